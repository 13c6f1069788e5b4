"""The write path: a new summary's range and the thread's index, committed together.

The index is the commit point: a range no index lists is never served. One batch carries the
range, the index, the stale ranges' deletes and the lease's release where the store runs
batches; a failure undoes the range, and a concurrent index write is merged with.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from slimcache._exceptions import StoreError, StoreTimeout
from slimcache.core.lease import Lease
from slimcache.core.plan import History, IndexUpdate, Rules, next_index
from slimcache.core.thread_cache import INDEX_ATTEMPTS, ThreadCache, in_background
from slimcache.core.turns import PlannedRead
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex

__all__ = ["IndexWriter"]

logger = logging.getLogger("slimcache")


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
    ) -> None:
        """Write the range, then the index (the commit point); undo the range if that fails.

        One batch carries the range, the index, the stale ranges' deletes and the lease's
        release: one round trip on stores that run batches (elsewhere one call each, the
        deletes last). If another worker wrote the index in between, the index is merged with
        theirs and written again.

        Raises:
            StoreError: The store failed; the range was undone (later, on a timeout).
        """
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
                await self.write_index(cache, history, plan, entry, stale=True)
            elif not batched:
                await cache.delete_ranges(update.delete)
        except StoreTimeout:
            # The store is not answering: undo once it is back, without holding the caller.
            in_background(cache.undo_range(entry, written, previous_raw))
            raise
        except StoreError:
            await cache.undo_range(entry, written, previous_raw)
            raise

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
    ) -> None:
        """Make ``entry`` the head; on compare-and-set stores, merge with concurrent writes.

        ``stale``: the index ``plan`` read has been overwritten since; it is read again first.
        """
        expected, stored = plan.index_raw, plan.view.index
        for attempt in range(INDEX_ATTEMPTS):
            if attempt or stale:
                expected = await cache.read_index()
                stored = cache.parse_index(expected)
            update = self.next_index(cache, history, stored, entry, plan.gone)
            if await cache.write_index(expected, update.index):
                await cache.delete_ranges(update.delete)
                return
        logger.warning(
            "thread %s: the index kept changing; range %d-%d is cached but not listed",
            cache.keys.encoded,
            entry.start,
            entry.end,
        )

    async def repair_index(
        self, cache: ThreadCache, history: History, plan: PlannedRead, entry: SummaryEntry
    ) -> None:
        """Point the index at ``entry`` so the next request is one read again."""
        try:
            await self.write_index(cache, history, plan, entry)
        except StoreError as exc:
            # Serving the valid summary does not depend on this write.
            logger.warning("could not update the index of thread %s: %s", cache.keys.encoded, exc)
