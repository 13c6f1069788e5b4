"""The summary of exactly a given span of a thread, cached by its range.

Google ADK, LlamaIndex and Strands each hand their summarizer the very messages to summarize:
a window of events, a flushed batch, the messages a manager removes. :class:`SpanSummaries`
summarizes exactly those, as messages ``start..end`` of the thread, and caches the summary
under the thread's key for that range (``thread_<id>:summary:<start>-<end>``), with the
fingerprint of exactly the messages it covers:

- the same span again is served from the store, with no summarizer call (one store read);
- a span whose first messages were summarized before as a span of their own (the same
  ``start``, an earlier ``end``) extends that summary with only the messages after it;
- a span whose messages changed is never served an old summary: the fingerprint differs;
- workers that ask for one span at once make one summarizer call: the first takes the
  thread's lease (the compressor's, on stores with ``set_if_absent``) and the others wait
  for its summary, as :class:`~slimcache.SummarizeCompressor`'s requests do.

Spans keep no index: a span is found by its own key, and the summaries of its prefixes, on a
miss, by reading their keys in one round trip (where the store batches reads). The summary is
made as the compressor makes one (the same strategy, prompts, budget, ``max_input_tokens``
steps, each step cached as a prefix of its own, and hooks), by the compressor's settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence

from slimcache._exceptions import InvalidInput, StoreError, SummarizerError
from slimcache.core import recorder as reporting
from slimcache.core.lease import Lease
from slimcache.core.plan import History
from slimcache.core.request import Work
from slimcache.core.results import CompressionResult, Outcome, Stats
from slimcache.core.settings.compressor import CompressorOptions, checked_settings
from slimcache.core.store_io import StoreIO
from slimcache.core.summarizer import Summarizer
from slimcache.messages import CheckedMessages, Message, check_messages
from slimcache.stores.entries import RangeRef, SummaryEntry
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import Store

__all__ = ["SpanSummaries", "check_start"]

logger = logging.getLogger("slimcache")

# Prefixes of a span read on a miss, the longest first: a longer span is summarized anew.
MAX_PREFIXES = 256


def check_start(start: object) -> int:
    """``start`` as the index of a span's first message in its thread.

    Raises:
        InvalidInput: ``start`` is not an integer at least 0.
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise InvalidInput(f"start must be an integer at least 0, got {start!r}")
    return start


class SpanSummaries:
    """Summaries of exact spans of threads, cached by range (see the module docstring).

    Args:
        summarizer: A slimcache summarizer.
        store: The store (kept open: closing it is the caller's).
        options: The compressor's settings (``strategy``, ``max_summary_tokens``,
            ``namespace``, ``ttl``, ``lock_wait``, ``lease_ttl``, the hooks...), with their
            meaning there; ``trigger``, ``keep``, ``refresh`` and ``ceiling`` do not apply to
            a span, which is summarized when asked for, whole.

    Raises:
        ConfigurationError: An invalid setting.
    """

    def __init__(
        self, summarizer: Summarizer, store: Store, options: CompressorOptions | None = None
    ) -> None:
        given: CompressorOptions = {**(options or {})}
        for unused in ("trigger", "keep", "refresh", "ceiling"):
            given.pop(unused, None)  # type: ignore[misc]
        self._derived = checked_settings.derived(summarizer, given)
        settings = self._derived.settings
        self._stats = Stats()
        self._io = StoreIO(store, self._stats, timeout=settings.store_timeout, ttl=settings.ttl)

    @property
    def stats(self) -> Stats:
        """A snapshot of the counters."""
        return dataclasses.replace(self._stats)

    async def summarize(
        self, messages: Sequence[Message], thread_id: str | int | None, *, start: int = 0
    ) -> CompressionResult:
        """The summary of exactly ``messages``, messages ``start..`` of ``thread_id``.

        Args:
            messages: The span, as OpenAI-style dicts, oldest first.
            thread_id: The thread; ``None`` summarizes without the cache.
            start: The index of the span's first message in the thread.

        Returns:
            The result: ``summary`` and ``summary_range`` (``(start, end)``), ``messages`` the
            one summary message standing for the span, ``outcome`` ``"hit"``, ``"extended"``,
            ``"summarized"`` or ``"uncached"``; with ``on_summarizer_error="uncompressed"``, a
            failed summarizer gives ``"passthrough"``, no summary and the span as given.

        Raises:
            InvalidInput: A message, the thread id or ``start`` is malformed, or the span is
                empty (nothing is written).
            SummarizerError: The summarizer failed (nothing is written).
            StoreError: The store failed and ``on_store_error="raise"``.
        """
        call = self._summarize(messages, thread_id, start)
        if reporting.recorder is not None:
            return await reporting.recorder.compress(thread_id, call)
        return await call

    # ------------------------------------------------------------------ the paths

    async def _summarize(
        self, messages: Sequence[Message], thread_id: str | int | None, start: int
    ) -> CompressionResult:
        derived = self._derived
        settings = derived.settings
        start = check_start(start)
        checked = check_messages(messages, derived.count, settings.message_overhead)
        if not len(checked):
            raise InvalidInput("messages must not be empty: there is no span to summarize")
        keys = ThreadKeys(thread_id, settings.namespace) if thread_id is not None else None
        self._stats.requests += 1
        work = Work(checked, None if thread_id is None else str(thread_id), self._stats)
        work.reason = "span"
        try:
            if keys is None:
                return await self._uncached(work, start)
            try:
                return await self._cached(work, keys, start)
            except StoreError as exc:
                await derived.emit("on_error", exc, [dict(m) for m in checked.messages])
                if settings.on_store_error == "raise":
                    raise
                logger.warning("store failed, summarizing the span without the cache: %s", exc)
                return await self._uncached(Work(checked, work.thread_id, self._stats), start)
        except SummarizerError as exc:
            self._stats.summarizer_errors += 1
            await derived.emit("on_error", exc, [dict(m) for m in checked.messages])
            if settings.on_summarizer_error == "raise":
                raise
            logger.warning("summarizer failed, the span stays as it was: %s", exc)
            return work.as_given("passthrough")

    async def _uncached(self, work: Work, start: int) -> CompressionResult:
        history = History(work.checked, by_id=self._derived.by_id, first=0)
        target = _whole(history)
        summary = await self._derived.producer.produce(work, None, target)
        work.stats.uncached += 1
        return await self._made(work, summary, start, "uncached", cached=False)

    async def _cached(self, work: Work, keys: ThreadKeys, start: int) -> CompressionResult:
        history = History(work.checked, by_id=self._derived.by_id, first=0)
        target = _whole(history)
        end = start + target.end
        key = keys.summary(start, end)
        if (entry := self._serves(keys, await self._io.get(key), start, target)) is not None:
            return await self._hit(work, entry)
        settings = self._derived.settings
        timeouts = self._io.timeouts
        lease: Lease | None = None
        if not settings.single_writer and settings.lock_wait > 0 and self._io.atomic:
            lease = Lease(self._io, keys.lease, settings.lease_ttl)
            made = await self._take_turn(work, keys, lease, key, start, target)
            if made is not None:
                return made
        try:
            return await self._make(work, keys, history, start, target, lease)
        finally:
            if lease is not None:
                if self._io.timeouts != timeouts:
                    lease.release_later()  # the store is not answering: do not wait on it
                else:
                    await lease.release()

    async def _take_turn(
        self, work: Work, keys: ThreadKeys, lease: Lease, key: str, start: int, target: RangeRef
    ) -> CompressionResult | None:
        """Take the thread's lease, or wait for the worker holding it to cache the span: the
        span served from the store, or ``None`` once this worker is to make it."""
        read = await lease.acquire_and_read([key])
        if read is not None:  # taken, and the span read in the same round trip
            return await self._served_under(work, keys, lease, read[0], start, target)
        work.stats.lease_waits += 1
        if reporting.recorder is not None:
            reporting.recorder.lease_waited()
        settings = self._derived.settings
        deadline = time.monotonic() + settings.lock_wait
        delay = 0.02
        while (remaining := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.5)
            raw, lease_raw = await self._io.get_many([key, keys.lease])
            if (entry := self._serves(keys, raw, start, target)) is not None:
                return await self._hit(work, entry)
            taken = await lease.acquire() if lease_raw is None else await lease.take_over(lease_raw)
            if taken:
                # Read again now that the turn is this worker's: the last holder may have
                # cached it between the two reads.
                raw = await self._io.get(key)
                return await self._served_under(work, keys, lease, raw, start, target)
        logger.warning(
            "thread %s: waited %.1fs for another worker, summarizing the span here",
            keys.encoded,
            settings.lock_wait,
        )
        return None

    async def _served_under(
        self,
        work: Work,
        keys: ThreadKeys,
        lease: Lease,
        raw: str | None,
        start: int,
        target: RangeRef,
    ) -> CompressionResult | None:
        """The span served from ``raw``, read under the lease (then given up), or ``None``."""
        if (entry := self._serves(keys, raw, start, target)) is None:
            return None
        await lease.release()
        return await self._hit(work, entry)

    async def _make(
        self,
        work: Work,
        keys: ThreadKeys,
        history: History,
        start: int,
        target: RangeRef,
        lease: Lease | None,
    ) -> CompressionResult:
        """Summarize the span, extending the longest cached summary of a prefix of it."""
        base = await self._prefix(keys, history, start)
        producer = self._derived.producer
        bypass = self._derived.settings.on_store_error == "bypass"

        async def checkpoint(end: int, summary: str) -> None:
            # A step of a catch-up over max_input_tokens is cached as a prefix of its own.
            ref = RangeRef(0, end, history.fingerprint(end))
            try:
                await self._write(keys, ref, start, summary, history.checked)
            except StoreError:
                if not bypass:
                    raise

        kept = lease.kept() if lease is not None else contextlib.nullcontext()
        async with kept:
            summary = await producer.produce(work, base, target, checkpoint)
        cached = True
        try:
            await self._write(keys, target, start, summary, history.checked)
        except StoreError as exc:
            if not bypass:
                raise
            logger.warning("store failed, serving the span's summary uncached: %s", exc)
            cached = False
        if base is not None:
            work.stats.extensions += 1
        else:
            work.stats.misses += 1
        outcome: Outcome = "extended" if base is not None else "summarized"
        return await self._made(work, summary, start, outcome, cached=cached)

    async def _prefix(self, keys: ThreadKeys, history: History, start: int) -> SummaryEntry | None:
        """The longest cached summary of a prefix of the span ending on a whole unit, with
        indices relative to the span; ``None`` when none is cached."""
        checked = history.checked
        ends = [end for end in range(len(checked) - 2, -1, -1) if checked.unit_end[end] == end][
            :MAX_PREFIXES
        ]
        if not ends:
            return None
        raws = await self._io.get_many([keys.summary(start, start + end) for end in ends])
        rules = self._derived.rules
        for end, raw in zip(ends, raws, strict=True):
            entry = SummaryEntry.parse(raw, thread=keys.encoded, start=start, end=start + end)
            if entry is not None and rules.usable(entry) and history.same(end, entry.fingerprint):
                return dataclasses.replace(entry, start=0, end=end)
        return None

    async def _write(
        self,
        keys: ThreadKeys,
        ref: RangeRef,
        start: int,
        summary: str,
        checked: CheckedMessages,
    ) -> None:
        covered = sum(checked.tokens[ref.start : ref.end + 1])
        absolute = RangeRef(start + ref.start, start + ref.end, ref.fingerprint)
        entry = self._derived.producer.entry(keys.encoded, absolute, summary, covered)
        await self._io.set(keys.summary(absolute.start, absolute.end), entry.to_json())

    # ------------------------------------------------------------------ results

    def _serves(
        self, keys: ThreadKeys, raw: str | None, start: int, target: RangeRef
    ) -> SummaryEntry | None:
        """The entry ``raw`` holds when it is a usable summary of exactly the span."""
        if raw is None:
            return None
        entry = SummaryEntry.parse(raw, thread=keys.encoded, start=start, end=start + target.end)
        if entry is None or not self._derived.rules.serves(entry, target):
            if entry is not None:
                self._stats.invalidations += 1
            return None
        return entry

    async def _hit(self, work: Work, entry: SummaryEntry) -> CompressionResult:
        work.stats.cache_hits += 1
        work.naive_tokens = self._derived.prompt_tokens + entry.covered_tokens
        return await self._made(work, entry.summary, entry.start, "hit", cached=True)

    async def _made(
        self, work: Work, summary: str, start: int, outcome: Outcome, *, cached: bool
    ) -> CompressionResult:
        derived = self._derived
        end = start + len(work.checked) - 1
        if outcome != "hit":
            work.naive_tokens = derived.prompt_tokens + sum(work.checked.tokens)
        work.stats.naive_input_tokens += work.naive_tokens
        hook = "on_cache_hit" if outcome == "hit" else "on_compress"
        if derived.hooks[hook] is not None:
            tokens = derived.count(summary)
            if hook == "on_compress" and derived.legacy_on_compress:
                # (messages, summary, ms): the messages read from the span, by its own indices.
                event = work.event(outcome, 0, len(work.checked) - 1, tokens)
                await derived.emit(hook, *work.convo_compress_args(event, summary))
            else:
                await derived.emit(hook, work.event(outcome, start, end, tokens))
        message = derived.summary_message(summary, start, end)
        return work.result([message], outcome, summary, start, end, cached=cached)


def _whole(history: History) -> RangeRef:
    """The whole span, as the producer reads it: relative to its first message."""
    last = history.total - 1
    return RangeRef(0, last, history.fingerprint(last))
