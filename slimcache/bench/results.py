"""The benchmark's settings and the figures it collects, per mode and per run."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from slimcache._exceptions import ConfigurationError
from slimcache.bench.summarizers import MeteredSummarizer
from slimcache.core.compressor import SummarizeCompressor
from slimcache.core.policy import KeepMessages, MessageThreshold
from slimcache.core.results import Stats
from slimcache.core.settings.compressor import DEFAULTS, check_fields
from slimcache.core.settings.groups import DEFAULT_KEEP, DEFAULT_TRIGGER
from slimcache.core.strategies import STRATEGY_NAMES, StrategyName
from slimcache.core.summarizer import OnOverBudget
from slimcache.stores.protocol import Store

__all__ = [
    "BENCH_DEFAULTS",
    "DEFAULT_PRICE_PER_MTOK",
    "BenchReport",
    "BenchSettings",
    "ModeResult",
]

DEFAULT_PRICE_PER_MTOK = 0.15
"""Default price of summarizer input tokens, in dollars per million tokens."""


# The compressor's default strategy, which is a shortcut name.
_STRATEGY = cast("StrategyName", DEFAULTS.strategy)


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class BenchSettings:
    """How every slimcache mode compresses.

    Attributes:
        threshold: Compress when the verbatim window holds more than this many messages.
        keep: Messages kept verbatim after compressing (below ``threshold``).
        strategy: How a cached summary and new messages combine.
        summary_tokens: Token budget handed to the summarizer (below the compressor's, so that
            a run costs less).
        checkpoints: Ranges each thread's index lists.
        price_per_mtok: Dollars per million summarizer input tokens, for the cost estimate.
        on_over_budget: A summary still over ``summary_tokens`` after the condense call is
            ``"cut"`` to it (counted) or makes the mode fail (``"raise"``).

    Raises:
        ConfigurationError: Naming the first invalid field.
    """

    threshold: int = DEFAULT_TRIGGER
    keep: int = DEFAULT_KEEP
    strategy: StrategyName = _STRATEGY
    summary_tokens: int = 400
    checkpoints: int = DEFAULTS.checkpoints
    price_per_mtok: float = DEFAULT_PRICE_PER_MTOK
    on_over_budget: OnOverBudget = DEFAULTS.on_over_budget

    def __post_init__(self) -> None:
        _positive("threshold", self.threshold)
        _positive("keep", self.keep)
        _positive("summary_tokens", self.summary_tokens)
        check_fields(checkpoints=self.checkpoints, on_over_budget=self.on_over_budget)
        if self.keep >= self.threshold:
            raise ConfigurationError(
                f"keep ({self.keep}) must be below threshold ({self.threshold})"
            )
        if self.strategy not in STRATEGY_NAMES:
            choices = ", ".join(STRATEGY_NAMES)
            raise ConfigurationError(f"strategy must be one of {choices}, got {self.strategy!r}")
        price = self.price_per_mtok
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not price >= 0:
            raise ConfigurationError(f"price_per_mtok must be a number >= 0, got {price!r}")

    def compressor(
        self, summarizer: MeteredSummarizer, store: Store | None, name: str
    ) -> SummarizeCompressor:
        """A compressor with these settings."""
        return SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(self.threshold),
            keep=KeepMessages(self.keep),
            strategy=self.strategy,
            max_summary_tokens=self.summary_tokens,
            summarizer_id=name,
            on_over_budget=self.on_over_budget,
            checkpoints=self.checkpoints,
        )


BENCH_DEFAULTS = BenchSettings()
"""The benchmark's settings by default, which the ``bench`` command's options show: the
compressor's defaults but the summary budget, smaller so that a run costs less."""


@dataclass
class ModeResult:
    """What one mode cost over the whole replay.

    Attributes:
        key: ``naive``, ``memory``, ``store`` or ``second_pass``.
        label: How the table names it.
        requests: Requests replayed.
        summarizer_calls: Calls made to the summarizer.
        summarizer_requests: Requests those calls sent to the model, retries included (see
            ``Stats.summarizer_requests``).
        input_tokens: Tokens sent to the summarizer (prompts, previous summaries, messages),
            each call's once.
        request_input_tokens: Tokens those requests carried, retries included: what the
            model's server received, and what the cost counts.
        output_tokens: Tokens of the summaries returned.
        message_tokens: Tokens of the chat messages sent to the summarizer (no prompts, no
            previous summaries).
        cache_hits: Requests served from a cached summary.
        extensions: Cached summaries extended with only the new messages.
        misses: Summaries made from scratch for a thread.
        invalidations: Requests whose newest cached summary did not match their history.
        uncached: Summaries made without the cache (the naive mode).
        store_reads: Store read round trips.
        store_writes: Store write round trips.
        store_deletes: Store delete round trips.
        store_batches: Round trips that carried several operations (stores with ``batch``).
        latency_median_ms: Median store round trip, or ``None`` when not measured.
        latency_p99_ms: 99th percentile store round trip, or ``None`` when not measured.
        hit_median_ms: Median time of the ``compress`` calls answered from the cache, or
            ``None`` when not measured (only the second pass measures it).
        index_get_median_ms: Median time of one plain ``store.get`` of the thread's index
            key, made beside each of those hits in the same run, or ``None``.
        hit_samples: How many hits (and index reads) the two medians are taken over.
        newest_hits: Of those hits, the ones that served their thread's newest summary (the
            index's own copy): a request for the thread as it stands.
        newest_hit_round_trips: Store round trips those hits made.
        older_hits: The others: a request for an earlier point of the thread, whose summary
            is an older range the index lists.
        older_hit_round_trips: Store round trips those hits made.
        call_median_ms: Median time of one summarizer call that returned, or ``None`` when
            the mode made none.
        call_samples: How many calls that median is taken over.
        truncated_replies: Replies the model cut at the summary's budget (see
            :class:`~slimcache.Stats`).
        shorter_retries: Requests made again, asking for a shorter summary, after a cut reply.
        truncated_accepted: Cut summaries kept (``--on-truncated accept``).
        condensed_over_budget: Summaries over the budget, condensed by one more call.
        cut_over_budget: Of those, summaries still over it, cut to it
            (``--on-over-budget cut``).
        summarizer_errors: Requests whose summarizer call failed.
        wall_seconds: Time the mode took.
        replayed: Requests replayed; below ``requests`` when the mode stopped on a failure.
        failure: Why the mode stopped (``"SummarizerError: ..."``), or ``None`` when it
            replayed every request.
        per_request_input_tokens: Summarizer input tokens of each request, in replay order.
    """

    key: str
    label: str
    requests: int = 0
    summarizer_calls: int = 0
    summarizer_requests: int = 0
    input_tokens: int = 0
    request_input_tokens: int = 0
    output_tokens: int = 0
    message_tokens: int = 0
    cache_hits: int = 0
    extensions: int = 0
    misses: int = 0
    invalidations: int = 0
    uncached: int = 0
    store_reads: int = 0
    store_writes: int = 0
    store_deletes: int = 0
    store_batches: int = 0
    latency_median_ms: float | None = None
    latency_p99_ms: float | None = None
    hit_median_ms: float | None = None
    index_get_median_ms: float | None = None
    hit_samples: int = 0
    newest_hits: int = 0
    newest_hit_round_trips: int = 0
    older_hits: int = 0
    older_hit_round_trips: int = 0
    call_median_ms: float | None = None
    call_samples: int = 0
    truncated_replies: int = 0
    shorter_retries: int = 0
    truncated_accepted: int = 0
    condensed_over_budget: int = 0
    cut_over_budget: int = 0
    summarizer_errors: int = 0
    wall_seconds: float = 0.0
    replayed: int = 0
    failure: str | None = None
    per_request_input_tokens: list[int] = field(default_factory=list)

    @property
    def store_round_trips(self) -> int:
        """All store calls made."""
        return self.store_reads + self.store_writes + self.store_deletes + self.store_batches

    def cost(self, price_per_mtok: float) -> float:
        """Dollars the summarizer input tokens of every request (retries included) cost at
        ``price_per_mtok``."""
        return self.request_input_tokens * price_per_mtok / 1_000_000

    def add_stats(self, stats: Stats) -> None:
        """Add a compressor's counters."""
        self.summarizer_calls += stats.summarizer_calls
        self.summarizer_requests += stats.summarizer_requests
        self.input_tokens += stats.summarizer_input_tokens
        self.request_input_tokens += stats.summarizer_request_tokens
        self.output_tokens += stats.summarizer_output_tokens
        self.cache_hits += stats.cache_hits
        self.extensions += stats.extensions
        self.misses += stats.misses
        self.invalidations += stats.invalidations
        self.uncached += stats.uncached
        self.store_reads += stats.store_reads
        self.store_writes += stats.store_writes
        self.store_deletes += stats.store_deletes
        self.store_batches += stats.store_batches
        self.truncated_replies += stats.truncated_replies
        self.shorter_retries += stats.shorter_retries
        self.truncated_accepted += stats.truncated_accepted
        self.condensed_over_budget += stats.condensed_over_budget
        self.cut_over_budget += stats.cut_over_budget
        self.summarizer_errors += stats.summarizer_errors

    def add_hit(self, *, newest: bool, round_trips: int) -> None:
        """Count one timed hit, on the newest history of its thread or on an older one."""
        if newest:
            self.newest_hits += 1
            self.newest_hit_round_trips += round_trips
        else:
            self.older_hits += 1
            self.older_hit_round_trips += round_trips

    def add_call_times(self, seconds: Sequence[float]) -> None:
        """Record how long the summarizer calls of this mode took."""
        self.call_samples = len(seconds)
        self.call_median_ms = statistics.median(seconds) * 1000 if seconds else None


def _ratio(value: int, base: int) -> float | None:
    return value / base if base else None


@dataclass
class BenchReport:
    """Every figure of one benchmark run.

    Attributes:
        settings: The compressor settings.
        summarizer: The summarizer's name.
        dataset: The dataset's name.
        store: The store URL, password hidden.
        conversations: Conversation ids replayed, in order.
        thread_ids: The thread id of each conversation.
        requests_per_conversation: Requests replayed per conversation.
        messages: Messages in all conversations.
        warm_threads: Threads the store already had an index for before the ``store`` mode.
        floor_tokens: Tokens of every message that ever left the window, each counted once.
        modes: Results per mode key, in run order.
        extra: Further settings to record (how the conversations were chosen).
    """

    settings: BenchSettings
    summarizer: str
    dataset: str
    store: str
    conversations: list[str]
    thread_ids: list[str]
    requests_per_conversation: list[int]
    messages: int
    warm_threads: int
    floor_tokens: int
    modes: dict[str, ModeResult]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        """Requests per mode."""
        return sum(self.requests_per_conversation)

    @property
    def failed(self) -> ModeResult | None:
        """The mode that stopped on a failure (the last that ran), or ``None``."""
        return next((m for m in self.modes.values() if m.failure is not None), None)

    def ratio(self, key: str, what: str) -> float | None:
        """``what`` (``summarizer_calls`` or ``input_tokens``) of mode ``key`` over naive's."""
        naive = self.modes.get("naive")
        mode = self.modes[key]
        if naive is None:
            return None
        value: int = getattr(mode, what)
        base: int = getattr(naive, what)
        return _ratio(value, base)

    def to_dict(self) -> dict[str, Any]:
        """Every figure as JSON-ready data."""
        price = self.settings.price_per_mtok
        modes: dict[str, Any] = {}
        for key, mode in self.modes.items():
            data = asdict(mode)
            data["store_round_trips"] = mode.store_round_trips
            data["cost_usd"] = mode.cost(price)
            data["ratio_calls_vs_naive"] = self.ratio(key, "summarizer_calls")
            data["ratio_input_tokens_vs_naive"] = self.ratio(key, "input_tokens")
            modes[key] = data
        return {
            "settings": {
                **asdict(self.settings),
                "summarizer": self.summarizer,
                "dataset": self.dataset,
                "store": self.store,
                **self.extra,
            },
            "conversations": len(self.conversations),
            "requests": self.requests,
            "messages": self.messages,
            "store_warm_threads": self.warm_threads,
            "floor_tokens": self.floor_tokens,
            "failed_mode": None if (failed := self.failed) is None else failed.key,
            "modes": modes,
            "threads": [
                {"conversation": c, "thread_id": t, "requests": n}
                for c, t, n in zip(
                    self.conversations,
                    self.thread_ids,
                    self.requests_per_conversation,
                    strict=True,
                )
            ],
        }
