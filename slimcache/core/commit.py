"""The write path: a new summary's range and the thread's index, committed together.

The index is the commit point: a range no index lists is never served. One batch carries the
range, the index, the stale ranges' deletes and the lease's release where the store runs
batches; a concurrent index write is merged with. A commit that failed is never undone once the
index lists its range (its reply was lost, it landed); one that timed out is settled once the
store answers again: written then, unless it landed, with the lease kept until it is. An index or
range of a format version this one does not know is never overwritten: the thread is left to
the workers that read it (see :func:`leaves_alone`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from slimcache._exceptions import StoreError, StoreTimeout
from slimcache.core.lease import Lease
from slimcache.core.lease_wait import PlannedRead
from slimcache.core.plan import History, IndexUpdate, Rules, next_index, read_index
from slimcache.core.store_io import in_background, once_the_store_answers
from slimcache.core.thread_cache import INDEX_ATTEMPTS, ThreadCache
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex, of_other_version

__all__ = ["SETTLE_SECONDS", "CatchUpCommits", "EntryMaker", "IndexWriter", "leaves_alone", "lists"]

logger = logging.getLogger("slimcache")

SETTLE_SECONDS = 10.0
"""Seconds a commit whose store call timed out is tried again in the background."""

EntryMaker = Callable[[str, RangeRef, str, int], SummaryEntry]
"""Builds a range's entry: ``(thread, range, summary, covered_tokens) -> entry``."""


def leaves_alone(thread: str, *raws: str | None) -> bool:
    """Whether a commit must write nothing because one of ``raws`` (the index, the range, as
    read) is a record of a format version this one does not know; logged at WARNING.

    Such a record is never overwritten: a newer worker sharing the store reads it, and this
    one serves its summary uncached.
    """
    if not any(of_other_version(raw) for raw in raws):
        return False
    logger.warning(
        "thread %s holds entries of a format version this one does not know: "
        "leaving them alone, the summary is not cached",
        thread,
    )
    return True


def lists(index: ThreadIndex | None, entry: SummaryEntry) -> bool:
    """Whether ``index`` lists ``entry``'s range, with its fingerprint."""
    if index is None:
        return False
    return any(
        (ref.start, ref.end, ref.fingerprint) == (entry.start, entry.end, entry.fingerprint)
        for ref in index.ranges
    )


@dataclass(frozen=True)
class IndexWriter:
    """Writes new ranges and a thread's index under the planner's rules.

    Attributes:
        rules: The planner's rules, which say what an index keeps.
        checkpoints: How many earlier ranges an index lists at most.
    """

    rules: Rules
    checkpoints: int

    async def commit(
        self,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        entry: SummaryEntry,
        previous_raw: str | None,
        lease: Lease | None,
    ) -> ThreadIndex | None:
        """Write the range, then the index (the commit point); undo the range if that fails.

        One batch carries the range, the index, the stale ranges' deletes and the lease's
        release: one round trip on stores that run batches (elsewhere one call each, the
        deletes last). If another worker wrote the index in between, the index is merged with
        theirs and written again.

        Returns:
            The index as this worker wrote it; ``None`` if other workers kept writing it and
            the range is cached but not listed.

        Raises:
            StoreError: The store failed; the range was undone unless the index lists it. On
                a timeout the commit is settled in the background instead (see :meth:`settle`).
        """
        if leaves_alone(cache.keys.encoded, plan.index_raw, previous_raw):
            return None
        update = self.next_index(cache, history, plan.view.index, entry, plan.gone)
        # Stale ranges go in the batch only where it is one round trip; elsewhere they are
        # deleted after the index is written, and a failed delete only leaves garbage.
        batched = cache.io.batches
        written, ops = cache.commit_ops(
            entry, plan.index_raw, update.index, update.delete if batched else ()
        )
        release = lease.release_op() if lease is not None else None
        try:
            results = await cache.io.batch(ops if release is None else [*ops, release])
            if lease is not None and release is not None:
                lease.released()
            if results[1] is False:  # another worker wrote the index in between
                return await self.write_index(cache, history, plan, entry, stale=True)
            if not batched:
                await cache.delete_ranges(update.delete)
            return update.index
        except StoreTimeout:
            # The store is not answering: the batch may land yet, or may have landed. The
            # commit is settled once the store is back, without holding the caller, and the
            # lease stays with it until then (see settle).
            settle = functools.partial(
                self.settle, cache, history, plan, entry, written, previous_raw
            )
            if lease is not None:
                lease.hold_while(settle)
            else:
                in_background(settle())
            raise
        except StoreError:
            if not await self.landed(cache, entry):
                await cache.undo_range(entry, written, previous_raw)
            raise

    async def landed(self, cache: ThreadCache, entry: SummaryEntry) -> bool:
        """Whether the thread's index lists ``entry``'s range: a commit whose reply was lost
        landed, and its range is never undone. ``False`` when the index cannot be read."""
        try:
            raw = await cache.read_index()
        except StoreError:
            return False
        return lists(cache.parse_index(raw), entry)

    async def settle(
        self,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        entry: SummaryEntry,
        written: str,
        previous_raw: str | None,
    ) -> None:
        """Settle a commit whose store call timed out, once the store answers again.

        The summary was made: if the batch landed, the index lists its range and it stays;
        otherwise the range and the index are written now, so that the next request for the
        range is served it rather than summarizing it again. A range another worker wrote
        since is left to it. Tried for :data:`SETTLE_SECONDS`, then given up (logged).
        """
        key = cache.keys.summary(entry.start, entry.end)

        async def attempt() -> None:
            index_raw, range_raw = await cache.read_index_and_range(entry.start, entry.end)
            if lists(cache.parse_index(index_raw), entry):
                return  # the batch landed
            if range_raw not in (None, written, previous_raw):
                return  # another worker wrote the range since
            if range_raw != written and not await self._put(cache, key, range_raw, written):
                return
            view = read_index(cache.parse_index(index_raw), history, self.rules)
            fresh = replace(plan, index_raw=index_raw, view=view)
            if await self.write_index(cache, history, fresh, entry) is not None:
                logger.info(
                    "thread %s: range %d-%d cached once the store answered again",
                    cache.keys.encoded,
                    entry.start,
                    entry.end,
                )

        try:
            await once_the_store_answers(attempt, time.monotonic() + SETTLE_SECONDS)
        except StoreError as exc:
            logger.warning(
                "thread %s: could not cache range %d-%d after a timeout: %s",
                cache.keys.encoded,
                entry.start,
                entry.end,
                exc,
            )

    @staticmethod
    async def _put(cache: ThreadCache, key: str, expected: str | None, value: str) -> bool:
        """Write a range's value over ``expected``; compared where the store can."""
        if cache.io.compares:
            return await cache.io.compare_and_set(key, expected, value)
        await cache.io.set(key, value)
        return True

    def next_index(
        self,
        cache: ThreadCache,
        history: History,
        stored: ThreadIndex | None,
        entry: SummaryEntry,
        gone: frozenset[RangeRef] = frozenset(),
    ) -> IndexUpdate:
        """The index that makes ``entry`` the head of ``stored``, and the ranges to delete."""
        return next_index(
            stored,
            history,
            entry,
            self.rules,
            thread=cache.keys.encoded,
            checkpoints=self.checkpoints,
            gone=gone,
        )

    async def write_index(
        self,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        entry: SummaryEntry,
        *,
        stale: bool = False,
    ) -> ThreadIndex | None:
        """Make ``entry`` the head; on compare-and-set stores, merge with concurrent writes.

        ``stale``: the index ``plan`` read has been overwritten since; it is read again first.
        Returns the index written, or ``None`` if other workers kept writing it.
        """
        expected, stored = plan.index_raw, plan.view.index
        for attempt in range(INDEX_ATTEMPTS):
            if attempt or stale:
                expected = await cache.read_index()
                stored = cache.parse_index(expected)
            if leaves_alone(cache.keys.encoded, expected):
                return None
            update = self.next_index(cache, history, stored, entry, plan.gone)
            if await cache.write_index(expected, update.index):
                await cache.delete_ranges(update.delete)
                return update.index
        logger.warning(
            "thread %s: the index kept changing; range %d-%d is cached but not listed",
            cache.keys.encoded,
            entry.start,
            entry.end,
        )
        return None

    async def repair_index(
        self, cache: ThreadCache, history: History, plan: PlannedRead, entry: SummaryEntry
    ) -> None:
        """Point the index at ``entry`` so the next request is one read again."""
        try:
            await self.write_index(cache, history, plan, entry)
        except StoreError as exc:
            # Serving the valid summary does not depend on this write.
            logger.warning("could not update the index of thread %s: %s", cache.keys.encoded, exc)


class CatchUpCommits:
    """Caches the steps of a catch-up in chunks, each as a range of its own, under one lease.

    Each step is committed as any range is (the range, then the index), but the lease stays
    held: the catch-up goes on under it. :attr:`plan` follows the index as this worker wrote
    it, so that the next commit (the request's last included) compares against it. A request
    stopped halfway leaves its last step cached and listed, and the next one extends it.

    Args:
        writer: Writes ranges and the index.
        cache: The thread's cache.
        history: The request's history.
        plan: The plan the request made; the first step commits against its index.
        start: The first message every range covers.
        entry: Builds a step's entry.
        bypass: On a store failure, stop caching steps and go on (``on_store_error="bypass"``)
            rather than raise.
    """

    def __init__(
        self,
        writer: IndexWriter,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        *,
        start: int,
        entry: EntryMaker,
        bypass: bool,
    ) -> None:
        self.writer = writer
        self.cache = cache
        self.history = history
        self.plan = plan
        self.start = start
        self.entry = entry
        self.bypass = bypass
        self.stopped = False

    async def __call__(self, end: int, summary: str) -> None:
        """Commit ``summary`` as the range ``start..end``."""
        if self.stopped:
            return
        history = self.history
        ref = RangeRef(self.start, end, history.fingerprint(end))
        covered = sum(history.checked.tokens[self.start : end + 1])
        entry = self.entry(self.cache.keys.encoded, ref, summary, covered)
        try:
            written = await self.writer.commit(self.cache, history, self.plan, entry, None, None)
            raw = written.to_json() if written is not None else await self.cache.read_index()
        except StoreError as exc:
            if not self.bypass:
                raise
            logger.warning("store failed, catching up without caching the steps: %s", exc)
            self.stopped = True
            return
        view = read_index(self.cache.parse_index(raw), history, self.writer.rules)
        self.plan = replace(self.plan, index_raw=raw, view=view)
