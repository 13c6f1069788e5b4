"""One thread's cache as the compressor uses it: its index, its ranges, commits and repairs.

:class:`ThreadCache` reads a thread's index and ranges, builds the writes of a commit (the
range, then the index), undoes and repairs them, all through a
:class:`~slimcache.core.store_io.StoreIO`. Entries read are remembered by the process (per
store), so a request for an earlier point of a thread reads only the index once its range was
read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slimcache._exceptions import StoreError
from slimcache.core.store_io import KNOWN_ENTRIES, refresh_due
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import DeleteOp, SetOp, StoreOp

if TYPE_CHECKING:
    from slimcache.core.store_io import StoreIO

__all__ = ["INDEX_ATTEMPTS", "ThreadCache"]

logger = logging.getLogger("slimcache")

# Attempts at writing the index when other workers keep writing it in between.
INDEX_ATTEMPTS = 8


class ThreadCache:
    """One thread's entries in the store.

    Args:
        io: The store calls.
        keys: The thread's keys.
    """

    def __init__(self, io: StoreIO, keys: ThreadKeys) -> None:
        self.io = io
        self.keys = keys

    def parse_index(self, raw: str | None) -> ThreadIndex | None:
        """Parse a raw index value (unusable values are logged misses); its head is
        remembered (see :meth:`known`)."""
        index = ThreadIndex.parse(raw, thread=self.keys.encoded)
        if index is not None:
            self.remember(index.head)
        return index

    def parse_range(self, raw: str | None, start: int, end: int) -> SummaryEntry | None:
        """Parse a raw range value (unusable values are logged misses); an entry is
        remembered (see :meth:`known`)."""
        entry = SummaryEntry.parse(raw, thread=self.keys.encoded, start=start, end=end)
        if entry is not None:
            self.remember(entry)
        return entry

    def remember(self, entry: SummaryEntry) -> None:
        """Remember an entry read from the store, for :meth:`known`."""
        known = self.io.known
        if known is not None:
            if len(known) >= KNOWN_ENTRIES:
                known.clear()
            known[(self.keys.prefix, entry.start, entry.end, entry.fingerprint)] = entry

    def known(self, ref: RangeRef) -> SummaryEntry | None:
        """An entry for ``ref`` this process read from the store before, or ``None``.

        A request for an earlier point of the thread than its index's newest summary (a
        worker behind the others, a replay) needs a range besides the index. The index lists
        each range with the fingerprint of the messages it covers, so an entry read before
        with the same fingerprint summarizes exactly those messages: it is served without
        reading the range again. Not with a TTL, as the store would have dropped it by then.
        """
        known = self.io.known
        if known is None:
            return None
        return known.get((self.keys.prefix, ref.start, ref.end, ref.fingerprint))

    async def read_index(self) -> str | None:
        """Read the raw index."""
        return await self.io.get(self.keys.index)

    async def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[SummaryEntry | None]:
        """Read and parse several ranges in one round trip where the store can."""
        if not ranges:
            return []
        raws = await self.io.get_many([self.keys.summary(s, e) for s, e in ranges])
        return [self.parse_range(raw, s, e) for raw, (s, e) in zip(raws, ranges, strict=True)]

    async def read_index_and_range(self, start: int, end: int) -> tuple[str | None, str | None]:
        """Read the raw index and one raw range together."""
        index_raw, range_raw = await self.io.get_many(
            [self.keys.index, self.keys.summary(start, end)]
        )
        return index_raw, range_raw

    async def undo_range(self, entry: SummaryEntry, written: str, previous: str | None) -> None:
        """Put a range back as it was (see :meth:`StoreIO.undo`)."""
        await self.io.undo(self.keys.summary(entry.start, entry.end), written, previous)

    def commit_ops(
        self,
        entry: SummaryEntry,
        expected_raw: str | None,
        index: ThreadIndex,
        delete: Sequence[tuple[int, int]],
    ) -> tuple[str, list[StoreOp]]:
        """The writes of one commit, for one batch: the range, the index, then stale ranges.

        The index is written with compare-and-set where the store can (see
        :meth:`write_index`). Returns the range's value (for :meth:`undo_range`) and the ops.
        """
        value = entry.to_json()
        range_key = self.keys.summary(entry.start, entry.end)
        ops: list[StoreOp] = [
            SetOp(range_key, value, self.io.ttl),
            self.io.index_op(self.keys.index, expected_raw, index),
        ]
        ops += [DeleteOp(self.keys.summary(start, end)) for start, end in delete]
        return value, ops

    def refresh_due(self, index: ThreadIndex) -> bool:
        """Whether a hit on ``index`` should rewrite it (see :func:`refresh_due`)."""
        return refresh_due(index, self.io.ttl)

    async def refresh(self, index_raw: str | None, index: ThreadIndex) -> None:
        """Give the index and its head range a fresh TTL (see :meth:`StoreIO.refresh`)."""
        head = index.head
        await self.io.refresh(
            self.keys.summary(head.start, head.end), head, self.keys.index, index_raw, index
        )

    async def write_index(self, expected_raw: str | None, index: ThreadIndex) -> bool:
        """Write the index (see :meth:`StoreIO.write_index`)."""
        return await self.io.write_index(self.keys.index, expected_raw, index)

    async def delete_ranges(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Delete ranges that went stale; a failure only leaves garbage behind."""
        for start, end in ranges:
            try:
                await self.io.delete(self.keys.summary(start, end))
            except StoreError as exc:
                logger.warning("could not delete stale range %d-%d: %s", start, end, exc)
