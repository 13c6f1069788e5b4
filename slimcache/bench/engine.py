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

``run_bench(modes=...)`` runs some of them only (always in that order): with a real model the
naive baseline makes most of the calls, and ``memory`` repeats the calls of ``store``.

Thread ids are derived from the dataset, the conversation and the settings, so running the
benchmark again on the same store replays against what the store already holds.

This module needs nothing beyond the standard library, so it can be imported without the
``bench`` extra.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from slimcache._exceptions import ConfigurationError, SlimcacheError
from slimcache.bench.datasets import BenchConversation, Dataset, request_lengths
from slimcache.bench.results import BenchReport, BenchSettings, ModeResult
from slimcache.bench.summarizers import BenchSummarizer, MeteredSummarizer
from slimcache.bench.timing import TimedStore, timed_store
from slimcache.core.compressor import SummarizeCompressor
from slimcache.messages import check_messages
from slimcache.stores.entries import ThreadIndex
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import Store, SupportsGetMany
from slimcache.stores.toolkit import redact_url

__all__ = ["MODES", "ProgressSink", "check_modes", "redact_url", "run_bench", "thread_id_for"]

MODES: tuple[str, ...] = ("naive", "memory", "store", "second_pass")
"""The replay modes, in the order they run."""


def check_modes(modes: Iterable[str] | None) -> tuple[str, ...]:
    """The modes to run, in :data:`MODES` order (all of them for ``None``).

    Raises:
        ConfigurationError: A name that is not a mode, or no mode at all.
    """
    if modes is None:
        return MODES
    chosen = set(modes)
    unknown = sorted(chosen.difference(MODES))
    if unknown:
        raise ConfigurationError(
            f"unknown mode {', '.join(map(repr, unknown))}: the modes are {', '.join(MODES)}"
        )
    if not chosen:
        raise ConfigurationError(f"choose at least one mode of {', '.join(MODES)}")
    return tuple(mode for mode in MODES if mode in chosen)


_ModeBody = Callable[[ModeResult, MeteredSummarizer], Awaitable[float | None]]
"""Replays one mode; returns seconds spent outside the replay (extra reads), if any."""


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
    try:
        for position, conversation in enumerate(conversations):
            thread_id = thread_ids[position] if thread_ids is not None else None
            for request in _requests(conversation):
                before = compressor.stats.summarizer_input_tokens
                result = await compressor.compress_detailed(request, thread_id=thread_id)
                after = compressor.stats.summarizer_input_tokens
                mode.per_request_input_tokens.append(after - before)
                if on_result is not None:
                    on_result(position, result.summary_range)
                mode.replayed += 1
                progress.advance()
    finally:  # what a mode that stops on a failure did so far counts too
        mode.add_stats(compressor.stats)


async def _timed_get(store: Store, key: str) -> tuple[float, str | None]:
    started = time.perf_counter()
    raw = await store.get(key)
    return time.perf_counter() - started, raw


def _newest(raw: str | None, thread: str, served: tuple[int, int] | None) -> bool:
    """Whether a hit served the newest summary of its thread: the one its index holds."""
    index = ThreadIndex.parse(raw, thread=thread)
    return index is not None and served == (index.head.start, index.head.end)


async def _replay_stateless(
    mode: ModeResult,
    settings: BenchSettings,
    summarizer: MeteredSummarizer,
    name: str,
    store: TimedStore,
    conversations: Sequence[BenchConversation],
    thread_ids: Sequence[str],
    progress: ProgressSink,
    on_result: Callable[[int, tuple[int, int] | None], None],
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
    try:
        for position, (conversation, thread_id) in enumerate(
            zip(conversations, thread_ids, strict=True)
        ):
            keys = ThreadKeys(thread_id)
            for number, request in enumerate(_requests(conversation)):
                compressor = settings.compressor(summarizer, store, name)
                get_first = time_hits and number % 2 == 1
                get_seconds, raw = (
                    await _timed_get(store.inner, keys.index) if get_first else (0, None)
                )
                started = time.perf_counter()
                try:
                    result = await compressor.compress_detailed(request, thread_id=thread_id)
                except BaseException:
                    mode.add_stats(compressor.stats)  # the calls of the failed request count
                    raise
                elapsed = time.perf_counter() - started
                stats = compressor.stats
                if time_hits and result.outcome == "hit":
                    if not get_first:
                        get_seconds, raw = await _timed_get(store.inner, keys.index)
                    hits.append(elapsed)
                    gets.append(get_seconds)
                    newest = _newest(raw, keys.encoded, result.summary_range)
                    mode.add_hit(newest=newest, round_trips=stats.store_round_trips)
                aside += get_seconds
                on_result(position, result.summary_range)
                mode.per_request_input_tokens.append(stats.summarizer_input_tokens)
                mode.add_stats(stats)
                mode.replayed += 1
                progress.advance()
    finally:
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


@dataclass
class _Replay:
    """What every mode of one run replays, and what the modes leave behind."""

    conversations: Sequence[BenchConversation]
    thread_ids: list[str]
    summarizer: BenchSummarizer
    settings: BenchSettings
    sink: ProgressSink
    total: int
    modes: dict[str, ModeResult] = field(default_factory=dict)
    # Per conversation position: the last message a slimcache summary covered, in any mode
    # but naive (which summarizes up to a different boundary).
    evicted_end: dict[int, int] = field(default_factory=dict)

    async def run(self, key: str, label: str, body: _ModeBody) -> ModeResult:
        """Replay one mode through ``body``, timing it and counting its message tokens.

        A store or summarizer failure stops the mode: what it did so far is kept, with the
        failure in :attr:`ModeResult.failure`.
        """
        mode = ModeResult(key=key, label=label, requests=self.total)
        self.sink.start(label, self.total)
        started = time.perf_counter()
        metered = MeteredSummarizer(self.summarizer)
        aside: float | None = None
        try:
            aside = await body(mode, metered)  # seconds of extra reads, not part of the replay
        except SlimcacheError as exc:
            mode.failure = f"{type(exc).__name__}: {exc}"
        mode.wall_seconds = time.perf_counter() - started - (aside or 0.0)
        mode.message_tokens = metered.message_tokens
        mode.add_call_times(metered.call_seconds)
        self.modes[key] = mode
        return mode

    async def naive(self, mode: ModeResult, metered: MeteredSummarizer) -> None:
        """One long-lived compressor with no thread ids: nothing is ever cached."""
        compressor = self.settings.compressor(metered, None, self.summarizer.name)
        await _replay_shared(mode, compressor, self.conversations, None, self.sink)

    async def memory(self, mode: ModeResult, metered: MeteredSummarizer) -> None:
        """One long-lived compressor on its in-process store, recording what left the window."""
        compressor = self.settings.compressor(metered, None, self.summarizer.name)
        await _replay_shared(
            mode, compressor, self.conversations, self.thread_ids, self.sink, self._record_end
        )

    def _record_end(self, position: int, summary_range: tuple[int, int] | None) -> None:
        if summary_range is not None:
            previous = self.evicted_end.get(position, -1)
            self.evicted_end[position] = max(previous, summary_range[1])

    def on_store(self, store: TimedStore) -> _ModeBody:
        """A stateless replay on ``store``; the second pass also times its cache hits."""

        async def replay(mode: ModeResult, metered: MeteredSummarizer) -> float:
            return await _replay_stateless(
                mode,
                self.settings,
                metered,
                self.summarizer.name,
                store,
                self.conversations,
                self.thread_ids,
                self.sink,
                self._record_end,
                time_hits=mode.key == "second_pass",
            )

        return replay

    async def run_modes(self, store: Store, store_url: str, modes: Sequence[str]) -> None:
        """Replay the given modes of :data:`MODES`, in order."""
        scheme = store_url.partition("://")[0] or "store"
        on_store = self.on_store(timed_store(store))
        bodies: dict[str, tuple[str, _ModeBody]] = {
            "naive": ("naive (no cache)", self.naive),
            "memory": ("slimcache (no store)", self.memory),
            "store": (f"slimcache ({scheme})", on_store),
            "second_pass": (f"second pass ({scheme})", on_store),
        }
        for key in modes:
            label, body = bodies[key]
            if (await self.run(key, label, body)).failure is not None:
                return  # the modes after it would replay on what it left half done

    def floor_tokens(self) -> int:
        """Tokens of every message that ever left the window, each counted once."""
        floor = 0
        for position, end in self.evicted_end.items():
            checked = check_messages(self.conversations[position].messages)
            floor += sum(checked.tokens[checked.pinned : end + 1])
        return floor


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
    modes: Iterable[str] | None = None,
) -> BenchReport:
    """Replay ``conversations`` under every mode (or the ``modes`` given) and collect the figures.

    A mode the store or the summarizer fails stops the run there: the report holds the modes
    run so far and what the failed one measured before it stopped, and
    :attr:`BenchReport.failed` names it.

    Args:
        dataset: Where the conversations come from (names the threads).
        conversations: The conversations to replay.
        store: The store for the ``store`` and ``second_pass`` modes (not closed here).
        store_url: The store's URL, for the report.
        summarizer: The summarizer every mode uses.
        settings: Compressor settings (defaults when ``None``).
        progress: Receives progress (nothing when ``None``).
        extra: Further settings recorded in the report.
        modes: The modes to run, of :data:`MODES` (all when ``None``); they run in that
            order whatever the order given.

    Raises:
        ConfigurationError: No conversation has a request to replay, or an unknown mode.
        StoreError: The store failed before the replay (reading which threads it holds).
    """
    settings = settings or BenchSettings()
    chosen = check_modes(modes)
    thread_ids = [thread_id_for(dataset, c, settings, summarizer.name) for c in conversations]
    per_conversation = [len(request_lengths(c.messages)) for c in conversations]
    total = sum(per_conversation)
    if total == 0:
        raise ConfigurationError("the conversations hold no user message, so nothing to replay")
    replay = _Replay(
        conversations, thread_ids, summarizer, settings, progress or _NoProgress(), total
    )
    warm = await _warm_threads(store, thread_ids)
    await replay.run_modes(store, store_url, chosen)
    return BenchReport(
        settings=settings,
        summarizer=summarizer.name,
        dataset=dataset.name,
        store=redact_url(store_url),
        conversations=[c.id for c in conversations],
        thread_ids=thread_ids,
        requests_per_conversation=per_conversation,
        messages=sum(len(c.messages) for c in conversations),
        warm_threads=warm,
        floor_tokens=replay.floor_tokens(),
        modes=replay.modes,
        extra=dict(extra or {}),
    )
