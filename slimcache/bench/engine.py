"""The benchmark's replay engine: what re-summarizing costs, with and without the cache.

Each conversation is replayed the way a stateless chat server sees it: every request carries
the whole history up to and including a user message, and is compressed before the next
assistant turn. Four modes replay the same requests:

- ``naive``: no cache; everything outside the window is summarized again on every request
  that exceeds the window (a :class:`~slimcache.SummarizeCompressor` given no thread id).
- ``memory``: slimcache with its in-process store (one compressor, ``store=None``).
- ``store``: slimcache on the chosen store, with a new compressor for every request, as
  stateless servers behind a load balancer.
- ``second_pass``: the same requests again on the same store and thread ids. Its cache hits
  are timed, each beside one plain ``store.get`` of the thread's index key, so the report
  shows what a hit costs next to a plain read of the same store.

Thread ids are derived from the dataset, the conversation and the settings, so running the
benchmark again on the same store replays against what the store already holds.

This module needs nothing beyond the standard library (matplotlib only inside
:func:`write_plot`), so it can be imported without the ``bench`` extra.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import os
import re
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.bench.datasets import BenchConversation, Dataset, request_lengths
from slimcache.core.compressor import SummarizeCompressor
from slimcache.core.keys import ThreadKeys
from slimcache.core.policy import KeepMessages, MessageThreshold
from slimcache.core.results import Stats
from slimcache.core.strategies import STRATEGY_NAMES, StrategyName
from slimcache.core.summarizer import SummaryContext
from slimcache.messages import Message, check_messages, count_message_tokens, message_text
from slimcache.stores.protocol import (
    Store,
    StoreOp,
    SupportsBatch,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsSetIfAbsent,
)

__all__ = [
    "DEFAULT_PRICE_PER_MTOK",
    "MODES",
    "BenchReport",
    "BenchSettings",
    "BenchSummarizer",
    "ModeResult",
    "OfflineSummarizer",
    "OpenAISummarizer",
    "ProgressSink",
    "TimedStore",
    "make_summarizer",
    "redact_url",
    "run_bench",
    "thread_id_for",
    "timed_store",
    "write_plot",
    "write_report_json",
]

DEFAULT_PRICE_PER_MTOK = 0.15
"""Default price of summarizer input tokens, in dollars per million tokens."""

MODES: tuple[str, ...] = ("naive", "memory", "store", "second_pass")
"""The replay modes, in the order they run."""

_OFFLINE_LINE_CHARS = 120


# ---------------------------------------------------------------- summarizers


class BenchSummarizer(Protocol):
    """A summarizer the benchmark can run: the slimcache summarizer call plus a name."""

    name: str

    def __call__(
        self, messages: Sequence[Message], context: SummaryContext
    ) -> Awaitable[str] | str:
        """Summarize ``messages`` as :data:`slimcache.Summarizer` does."""
        ...


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = re.search(r"[.!?](\s|$)", flat)
    sentence = flat[: match.start() + 1] if match else flat
    if len(sentence) > _OFFLINE_LINE_CHARS:
        sentence = sentence[: _OFFLINE_LINE_CHARS - 3].rstrip() + "..."
    return sentence


class OfflineSummarizer:
    """A deterministic extractive summarizer: no model, no key, no network.

    Each message becomes one line, ``role: first sentence`` (truncated), appended to the
    previous summary; when the result exceeds the token budget the oldest lines go first.
    The same input always gives the same summary, so runs are repeatable.
    """

    name = "offline-extractive"

    def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` (extending ``context.previous_summary`` when given)."""
        lines = context.previous_summary.splitlines() if context.previous_summary else []
        for message in messages:
            role = "user" if message.get("role") == "human" else str(message.get("role"))
            sentence = _first_sentence(message_text(message)) or "(no text)"
            lines.append(f"- {role}: {sentence}")
        budget = context.max_tokens * 4  # approx_tokens counts four characters per token
        while len(lines) > 1 and len("\n".join(lines)) > budget:
            lines.pop(0)
        summary = "\n".join(lines)
        return summary[-budget:] if len(summary) > budget else summary or "(empty conversation)"


class OpenAISummarizer:
    """Summarizes with an OpenAI-compatible chat-completions endpoint, via the standard library.

    Args:
        model: The model name sent with every request.
        api_key: The bearer token.
        base_url: The API root, e.g. ``https://api.openai.com/v1``.
        timeout: Seconds one completion may take.
    """

    def __init__(self, model: str, *, api_key: str, base_url: str, timeout: float = 120.0) -> None:
        if not model:
            raise ConfigurationError("summarizer 'openai:MODEL' needs a model name")
        self.model = model
        self.name = f"openai:{model}"
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout

    @classmethod
    def from_env(cls, model: str) -> OpenAISummarizer:
        """Build one from ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (optional).

        Raises:
            ConfigurationError: ``OPENAI_API_KEY`` is not set, or the model name is empty.
        """
        key = os.environ.get("OPENAI_API_KEY", "")
        if not key:
            raise ConfigurationError(
                "--summarizer openai:MODEL needs the OPENAI_API_KEY environment variable"
            )
        base = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return cls(model, api_key=key, base_url=base)

    def _request(self, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        url = f"{self.base_url}{path}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            url,
            data=data,
            method="GET" if body is None else "POST",
            headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise SummarizerError(f"{url} answered HTTP {exc.code}: {detail}") from exc
        except urllib.error.URLError as exc:
            raise SummarizerError(f"cannot reach {url}: {exc.reason}") from exc
        except (OSError, ValueError) as exc:
            raise SummarizerError(f"request to {url} failed: {type(exc).__name__}: {exc}") from exc

    def preflight(self, timeout: float = 5.0) -> None:
        """One cheap request (``GET /models``) so a dead endpoint or bad key fails at once.

        Raises:
            SummarizerError: The endpoint is unreachable or refuses the key.
        """
        self._request("/models", None, timeout)

    def complete(self, chat: list[dict[str, str]]) -> str:
        """Send one chat-completions request and return the reply's text (blocking).

        Raises:
            SummarizerError: The request failed or the reply has no text.
        """
        reply = self._request(
            "/chat/completions", {"model": self.model, "messages": chat}, self._timeout
        )
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError(f"unexpected chat-completions reply: {reply!r:.300}") from exc
        if not isinstance(content, str):
            raise SummarizerError(f"chat-completions reply has no text: {reply!r:.300}")
        return content

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` with the model, off the event loop."""
        return await asyncio.to_thread(self.complete, context.to_chat(messages))


def make_summarizer(spec: str) -> OfflineSummarizer | OpenAISummarizer:
    """Build the summarizer a ``--summarizer`` value names: ``offline`` or ``openai:MODEL``.

    Raises:
        ConfigurationError: Unknown value, or ``OPENAI_API_KEY`` missing for ``openai:``.
    """
    if spec == "offline":
        return OfflineSummarizer()
    if spec.startswith("openai:"):
        return OpenAISummarizer.from_env(spec.partition(":")[2])
    raise ConfigurationError(f"summarizer must be 'offline' or 'openai:MODEL', got {spec!r}")


class _Metered:
    """Wraps a summarizer and counts the message tokens it is given."""

    def __init__(self, inner: BenchSummarizer) -> None:
        self.inner = inner
        self.message_tokens = 0

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        # Counted exactly as the compressor counts them, so the figures can be compared.
        self.message_tokens += sum(count_message_tokens(m) for m in messages)
        result = self.inner(messages, context)
        if not isinstance(result, str):
            result = await result
        return result


# ---------------------------------------------------------------- timing proxy


class TimedStore:
    """A thin proxy recording how long each store round trip takes.

    Build it with :func:`timed_store`, which keeps the optional abilities (``set_if_absent``,
    ``get_many``, ``compare_and_set`` with ``compare_and_delete``, ``batch``) visible only when
    the wrapped store has them, so the compressor behaves on the proxy as on the store itself.
    """

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.samples: list[float] = []

    async def _timed(self, call: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.samples.append(time.perf_counter() - started)

    async def get(self, key: str) -> str | None:
        """Read ``key``."""
        value: str | None = await self._timed(self.inner.get(key))
        return value

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Write ``key``."""
        await self._timed(self.inner.set(key, value, ttl=ttl))

    async def delete(self, key: str) -> None:
        """Delete ``key``."""
        await self._timed(self.inner.delete(key))

    def take_samples(self) -> list[float]:
        """Return the recorded durations (seconds) and start a new list."""
        samples, self.samples = self.samples, []
        return samples


class _TimedSetIfAbsent(TimedStore):
    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        inner = self.inner
        assert isinstance(inner, SupportsSetIfAbsent)
        won: bool = await self._timed(inner.set_if_absent(key, value, ttl=ttl))
        return won


class _TimedGetMany(TimedStore):
    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        inner = self.inner
        assert isinstance(inner, SupportsGetMany)
        values: list[str | None] = await self._timed(inner.get_many(keys))
        return values


class _TimedCompareAndSet(TimedStore):
    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        inner = self.inner
        assert isinstance(inner, SupportsCompareAndSet)
        won: bool = await self._timed(inner.compare_and_set(key, expected, value, ttl=ttl))
        return won

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        inner = self.inner
        assert isinstance(inner, SupportsCompareAndSet)
        deleted: bool = await self._timed(inner.compare_and_delete(key, expected))
        return deleted


class _TimedBatch(TimedStore):
    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        inner = self.inner
        assert isinstance(inner, SupportsBatch)
        results: list[Any] = await self._timed(inner.batch(ops))
        return results


_ABILITIES: tuple[tuple[type, type[TimedStore]], ...] = (
    (SupportsSetIfAbsent, _TimedSetIfAbsent),
    (SupportsGetMany, _TimedGetMany),
    (SupportsCompareAndSet, _TimedCompareAndSet),
    (SupportsBatch, _TimedBatch),
)


@functools.cache
def _timed_class(parts: tuple[type[TimedStore], ...]) -> type[TimedStore]:
    """The proxy class with exactly the abilities ``parts`` add."""
    if not parts:
        return TimedStore
    name = "Timed" + "".join(part.__name__.removeprefix("_Timed") for part in parts)
    made: type[TimedStore] = type(name, parts, {})
    return made


def timed_store(inner: Store) -> TimedStore:
    """Wrap ``inner`` in a :class:`TimedStore` with exactly the optional abilities it has."""
    parts = tuple(part for ability, part in _ABILITIES if isinstance(inner, ability))
    return _timed_class(parts)(inner)


# ---------------------------------------------------------------- settings and results


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
        summary_tokens: Token budget handed to the summarizer.
        checkpoints: Ranges each thread's index lists (``None``: the compressor's default).
        price_per_mtok: Dollars per million summarizer input tokens, for the cost estimate.

    Raises:
        ConfigurationError: Naming the first invalid field.
    """

    threshold: int = 20
    keep: int = 10
    strategy: StrategyName = "extend"
    summary_tokens: int = 400
    checkpoints: int | None = None
    price_per_mtok: float = DEFAULT_PRICE_PER_MTOK

    def __post_init__(self) -> None:
        _positive("threshold", self.threshold)
        _positive("keep", self.keep)
        _positive("summary_tokens", self.summary_tokens)
        if self.checkpoints is not None:
            _positive("checkpoints", self.checkpoints)
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
        self, summarizer: _Metered, store: Store | None, name: str
    ) -> SummarizeCompressor:
        """A compressor with these settings."""
        options: dict[str, Any] = {}
        if self.checkpoints is not None:
            options["checkpoints"] = self.checkpoints
        return SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(self.threshold),
            keep=KeepMessages(self.keep),
            strategy=self.strategy,
            max_summary_tokens=self.summary_tokens,
            summarizer_id=name,
            **options,
        )


@dataclass
class ModeResult:
    """What one mode cost over the whole replay.

    Attributes:
        key: ``naive``, ``memory``, ``store`` or ``second_pass``.
        label: How the table names it.
        requests: Requests replayed.
        summarizer_calls: Calls made to the summarizer.
        input_tokens: Tokens sent to the summarizer (prompts, previous summaries, messages).
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
        wall_seconds: Time the mode took.
        per_request_input_tokens: Summarizer input tokens of each request, in replay order.
    """

    key: str
    label: str
    requests: int = 0
    summarizer_calls: int = 0
    input_tokens: int = 0
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
    wall_seconds: float = 0.0
    per_request_input_tokens: list[int] = field(default_factory=list)

    @property
    def store_round_trips(self) -> int:
        """All store calls made."""
        return self.store_reads + self.store_writes + self.store_deletes + self.store_batches

    def cost(self, price_per_mtok: float) -> float:
        """Dollars the summarizer input tokens cost at ``price_per_mtok``."""
        return self.input_tokens * price_per_mtok / 1_000_000

    def add_stats(self, stats: Stats) -> None:
        """Add a compressor's counters."""
        self.summarizer_calls += stats.summarizer_calls
        self.input_tokens += stats.summarizer_input_tokens
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


# ---------------------------------------------------------------- the replay


class ProgressSink(Protocol):
    """Receives progress while the replay runs."""

    def start(self, label: str, total: int) -> None:
        """A mode starts; it will replay ``total`` requests."""
        ...

    def advance(self) -> None:
        """One request was replayed."""
        ...


class _NoProgress:
    def start(self, label: str, total: int) -> None:
        return None

    def advance(self) -> None:
        return None


def redact_url(url: str) -> str:
    """Hide the password of a URL, for printing."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def thread_id_for(
    dataset: Dataset, conversation: BenchConversation, settings: BenchSettings, summarizer: str
) -> str:
    """A thread id that depends only on the dataset, the conversation and the settings.

    The same run on the same store finds its earlier summaries; changing a setting, the
    summarizer or the data gives new threads instead of mixing incompatible summaries.
    """
    recipe = "|".join(
        [
            dataset.digest,
            str(settings.threshold),
            str(settings.keep),
            settings.strategy,
            str(settings.summary_tokens),
            str(settings.checkpoints),
            summarizer,
        ]
    )
    digest = hashlib.blake2b(recipe.encode("utf-8"), digest_size=4).hexdigest()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset.name)
    return f"bench-{name}-{digest}-{conversation.id}"


def _percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _latency(mode: ModeResult, samples: list[float]) -> None:
    if samples:
        mode.latency_median_ms = statistics.median(samples) * 1000
        mode.latency_p99_ms = _percentile(samples, 0.99) * 1000


def _requests(conversation: BenchConversation) -> Iterable[list[dict[str, Any]]]:
    for length in request_lengths(conversation.messages):
        yield conversation.messages[:length]


async def _replay_shared(
    mode: ModeResult,
    compressor: SummarizeCompressor,
    conversations: Sequence[BenchConversation],
    thread_ids: Sequence[str] | None,
    progress: ProgressSink,
    on_result: Callable[[int, tuple[int, int] | None], None] | None = None,
) -> None:
    """Replay on one long-lived compressor (naive: no thread ids; memory: with them)."""
    for position, conversation in enumerate(conversations):
        thread_id = thread_ids[position] if thread_ids is not None else None
        for request in _requests(conversation):
            before = compressor.stats.summarizer_input_tokens
            result = await compressor.compress_detailed(request, thread_id=thread_id)
            mode.per_request_input_tokens.append(compressor.stats.summarizer_input_tokens - before)
            if on_result is not None:
                on_result(position, result.summary_range)
            progress.advance()
    mode.add_stats(compressor.stats)


async def _timed_get(store: Store, key: str) -> float:
    started = time.perf_counter()
    await store.get(key)
    return time.perf_counter() - started


async def _replay_stateless(
    mode: ModeResult,
    settings: BenchSettings,
    summarizer: _Metered,
    name: str,
    store: TimedStore,
    conversations: Sequence[BenchConversation],
    thread_ids: Sequence[str],
    progress: ProgressSink,
    *,
    time_hits: bool = False,
) -> float:
    """Replay with a new compressor for every request, all on one store.

    With ``time_hits``, every ``compress`` call answered from the cache is timed, and so is one
    plain ``store.get`` of its thread's index key, made right before or right after it (in
    turn), so a hit can be set beside a plain read of the same store in the same run.

    Returns:
        Seconds spent in those extra reads, which are not part of the replay.
    """
    hits: list[float] = []
    gets: list[float] = []
    aside = 0.0
    for conversation, thread_id in zip(conversations, thread_ids, strict=True):
        index_key = ThreadKeys(thread_id).index
        for number, request in enumerate(_requests(conversation)):
            compressor = settings.compressor(summarizer, store, name)
            get_first = time_hits and number % 2 == 1
            get_seconds = await _timed_get(store.inner, index_key) if get_first else 0.0
            started = time.perf_counter()
            result = await compressor.compress_detailed(request, thread_id=thread_id)
            elapsed = time.perf_counter() - started
            if time_hits and result.outcome == "hit":
                if not get_first:
                    get_seconds = await _timed_get(store.inner, index_key)
                hits.append(elapsed)
                gets.append(get_seconds)
            aside += get_seconds
            stats = compressor.stats
            mode.per_request_input_tokens.append(stats.summarizer_input_tokens)
            mode.add_stats(stats)
            progress.advance()
    _latency(mode, store.take_samples())
    if hits:
        mode.hit_median_ms = statistics.median(hits) * 1000
        mode.index_get_median_ms = statistics.median(gets) * 1000
        mode.hit_samples = len(hits)
    return aside


async def _warm_threads(store: Store, thread_ids: Sequence[str]) -> int:
    """How many of the threads the store already holds an index for."""
    keys = [ThreadKeys(t).index for t in thread_ids]
    if isinstance(store, SupportsGetMany):
        values = await store.get_many(keys)
    else:
        values = [await store.get(key) for key in keys]
    return sum(value is not None for value in values)


async def run_bench(
    dataset: Dataset,
    conversations: Sequence[BenchConversation],
    *,
    store: Store,
    store_url: str,
    summarizer: BenchSummarizer,
    settings: BenchSettings | None = None,
    progress: ProgressSink | None = None,
    extra: dict[str, Any] | None = None,
) -> BenchReport:
    """Replay ``conversations`` under every mode and collect the figures.

    Args:
        dataset: Where the conversations come from (names the threads).
        conversations: The conversations to replay.
        store: The store for the ``store`` and ``second_pass`` modes (not closed here).
        store_url: The store's URL, for the report.
        summarizer: The summarizer every mode uses.
        settings: Compressor settings (defaults when ``None``).
        progress: Receives progress (nothing when ``None``).
        extra: Further settings recorded in the report.

    Raises:
        ConfigurationError: No conversation has a request to replay.
        SummarizerError: The summarizer failed.
        StoreError: The store failed.
    """
    settings = settings or BenchSettings()
    sink: ProgressSink = progress or _NoProgress()
    name = summarizer.name
    thread_ids = [thread_id_for(dataset, c, settings, name) for c in conversations]
    per_conversation = [len(request_lengths(c.messages)) for c in conversations]
    total = sum(per_conversation)
    if total == 0:
        raise ConfigurationError("the conversations hold no user message, so nothing to replay")
    scheme = store_url.partition("://")[0] or "store"
    modes: dict[str, ModeResult] = {}

    async def run(
        key: str, label: str, body: Callable[[ModeResult], Awaitable[float | None]]
    ) -> None:
        mode = ModeResult(key=key, label=label, requests=total)
        sink.start(label, total)
        started = time.perf_counter()
        aside = await body(mode)  # seconds of extra reads, not part of the replay
        mode.wall_seconds = time.perf_counter() - started - (aside or 0.0)
        modes[key] = mode

    def metered_into(mode: ModeResult) -> _Metered:
        metered = _Metered(summarizer)
        metered_by_mode[mode.key] = metered
        return metered

    metered_by_mode: dict[str, _Metered] = {}
    evicted_end: dict[int, int] = {}

    def record_end(position: int, summary_range: tuple[int, int] | None) -> None:
        if summary_range is not None:
            evicted_end[position] = max(evicted_end.get(position, -1), summary_range[1])

    async def naive(mode: ModeResult) -> None:
        compressor = settings.compressor(metered_into(mode), None, name)
        await _replay_shared(mode, compressor, conversations, None, sink)

    async def memory(mode: ModeResult) -> None:
        compressor = settings.compressor(metered_into(mode), None, name)
        await _replay_shared(mode, compressor, conversations, thread_ids, sink, record_end)

    timed = timed_store(store)
    warm = await _warm_threads(store, thread_ids)

    async def on_store(mode: ModeResult) -> float:
        metered = metered_into(mode)
        return await _replay_stateless(
            mode,
            settings,
            metered,
            name,
            timed,
            conversations,
            thread_ids,
            sink,
            time_hits=mode.key == "second_pass",
        )

    await run("naive", "naive (no cache)", naive)
    await run("memory", "slimcache (no store)", memory)
    await run("store", f"slimcache ({scheme})", on_store)
    await run("second_pass", f"second pass ({scheme})", on_store)
    for key, metered in metered_by_mode.items():
        modes[key].message_tokens = metered.message_tokens

    floor = 0
    for position, end in evicted_end.items():
        checked = check_messages(conversations[position].messages)
        floor += sum(checked.tokens[checked.pinned : end + 1])
    return BenchReport(
        settings=settings,
        summarizer=name,
        dataset=dataset.name,
        store=redact_url(store_url),
        conversations=[c.id for c in conversations],
        thread_ids=thread_ids,
        requests_per_conversation=per_conversation,
        messages=sum(len(c.messages) for c in conversations),
        warm_threads=warm,
        floor_tokens=floor,
        modes=modes,
        extra=dict(extra or {}),
    )


# ---------------------------------------------------------------- output


def write_report_json(report: BenchReport, path: str | Path) -> None:
    """Write every figure of ``report`` as JSON."""
    Path(path).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")


def _cumulative(values: Sequence[int]) -> list[int]:
    total, out = 0, []
    for value in values:
        total += value
        out.append(total)
    return out


def _tokens_label(value: float, _position: object) -> str:
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def write_plot(report: BenchReport, path: str | Path) -> None:
    """Plot cumulative summarizer input tokens, naive against slimcache, as a PNG.

    Left: request by request through the longest conversation, where re-summarizing grows
    quadratically and slimcache linearly. Right: the whole replay.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError as exc:
        from slimcache._exceptions import MissingExtraError

        raise MissingExtraError(
            f"--plot needs matplotlib ({exc}); run: pip install 'slimcache[bench]'"
        ) from None

    counts = report.requests_per_conversation
    longest = max(range(len(counts)), key=lambda i: counts[i])
    begin = sum(counts[:longest])
    span = slice(begin, begin + counts[longest])
    shown = [k for k in ("naive", "memory") if k in report.modes]
    styles = {"naive": ("#d62728", "naive: re-summarize every request"), "memory": ("#1f77b4", "")}

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for key in shown:
        mode = report.modes[key]
        colour, label = styles[key]
        label = label or f"{mode.label}: cached, incremental"
        per_conversation = mode.per_request_input_tokens[span]
        left.plot(
            range(1, len(per_conversation) + 1),
            _cumulative(per_conversation),
            color=colour,
            label=label,
            linewidth=2,
        )
        right.plot(
            range(1, len(mode.per_request_input_tokens) + 1),
            _cumulative(mode.per_request_input_tokens),
            color=colour,
            label=label,
            linewidth=2,
        )
    left.set_title(f"Longest conversation ({counts[longest]} requests): quadratic vs linear")
    left.set_xlabel("request (each user turn, full history sent)")
    left.set_ylabel("cumulative summarizer input tokens")
    right.set_title(f"All {len(report.conversations)} conversations, in replay order")
    right.set_xlabel("request number across the replay")
    for axes in (left, right):
        axes.yaxis.set_major_formatter(FuncFormatter(_tokens_label))
        axes.grid(alpha=0.3)
        axes.legend(loc="upper left")
    figure.suptitle(
        f"slimcache bench: summarizer input tokens, {report.dataset}, "
        f"window {report.settings.keep}-{report.settings.threshold} messages"
    )
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)
