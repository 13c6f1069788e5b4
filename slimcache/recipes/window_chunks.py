"""A window memory's chunks in the store, read, written and deleted a batch of keys per call.

See :mod:`slimcache.recipes.window_memory` for the layout. A head says how many chunks its
history has, and nothing checks that number when it is written: a head slimcache did not write
may claim millions of messages. So the number is trusted only as far as the store backs it.
Reading goes from the newest chunk back, :data:`CHUNKS_PER_CALL` keys per ``get_many``, and
stops at the first chunk missing; deleting reads the keys it is about to delete the same way,
deletes those stored in one ``batch``, and stops at the first batch of which none is stored.
The work is then a few calls per thousand chunks actually stored, plus one, however many the
head claims; each call is bounded by the memory's ``store_timeout`` and a cancelled caller
stops between two calls.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slimcache._exceptions import StoreError
from slimcache.core.store_io import StoreIO
from slimcache.recipes.window_history import HistoryHead, parse_chunk
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import DeleteOp, SetOp

__all__ = ["CHUNKS_PER_CALL", "delete_chunks", "read_chunks", "write_full_chunks"]

logger = logging.getLogger("slimcache")

CHUNKS_PER_CALL = 500
"""Chunk keys read, written or deleted per store call (the SQL store's own ``IN`` list size)."""


def _batches(first: int, stop: int) -> list[range]:
    """Chunk numbers ``first .. stop - 1`` in batches, the newest batch first."""
    return [
        range(max(first, end - CHUNKS_PER_CALL), end)
        for end in range(stop, first, -CHUNKS_PER_CALL)
    ]


async def _pause() -> None:
    # Between two batches: a store that answers without yielding to the event loop (the
    # memory store) would otherwise run the whole walk before a cancellation could stop it.
    await asyncio.sleep(0)


def _joined(newest_first: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [message for part in reversed(newest_first) for message in part]


async def read_chunks(
    io: StoreIO, keys: ThreadKeys, head: HistoryHead, first: int, stop: int, *, strict: bool
) -> tuple[list[dict[str, Any]], bool]:
    """Read chunks ``first .. stop - 1`` of the history ``head`` is the head of, newest first.

    Returns:
        Their messages in order, and whether all were there. When one is missing, only the
        messages of the chunks after it are returned (with a warning), and no older chunk is
        read.

    Raises:
        StoreError: A chunk holds a value slimcache did not write, one is missing and
            ``strict``, or the store failed.
    """
    parts: list[list[dict[str, Any]]] = []  # newest first
    for numbers in _batches(first, stop):
        if parts:
            await _pause()
        chunk_keys = [keys.history_chunk(head.epoch, n) for n in numbers]
        raws = await io.get_many(chunk_keys)
        for number, chunk_key, raw in reversed(list(zip(numbers, chunk_keys, raws, strict=True))):
            if raw is None:
                _missing(keys, head, number, chunk_key, strict=strict)
                return _joined(parts), False
            messages = parse_chunk(raw, epoch=head.epoch, number=number, size=head.chunk)
            if messages is None:
                raise StoreError(
                    f"{chunk_key} holds a value slimcache did not write (or a newer format); "
                    "clear(session) removes the history"
                )
            parts.append(messages)
    return _joined(parts), True


def _missing(keys: ThreadKeys, head: HistoryHead, number: int, key: str, *, strict: bool) -> None:
    """Raise, or warn, that chunk ``number`` is not in the store."""
    where = f"messages {number * head.chunk}-{(number + 1) * head.chunk - 1}"
    if strict:
        raise StoreError(
            f"{where} of {keys.prefix[:-1]} are missing from the store "
            f"({key}: expired, evicted or deleted)"
        )
    logger.warning(
        "%s of %s are no longer in the store (%s); loading the messages after them",
        where,
        keys.prefix[:-1],
        key,
    )


async def write_full_chunks(io: StoreIO, keys: ThreadKeys, head: HistoryHead) -> HistoryHead:
    """Store the head's full chunks under their own keys; return the head without them.

    One ``set`` for a single chunk (an append's usual case); a ``batch`` per
    :data:`CHUNKS_PER_CALL` chunks when one append brought many.
    """
    values = [head.chunk_value(position) for position in range(head.full_chunks)]
    if len(values) == 1:
        number, value = values[0]
        await io.set(keys.history_chunk(head.epoch, number), value)
        return head.sealed()
    for start in range(0, len(values), CHUNKS_PER_CALL):
        if start:
            await _pause()
        ops = [
            SetOp(keys.history_chunk(head.epoch, number), value, io.ttl)
            for number, value in values[start : start + CHUNKS_PER_CALL]
        ]
        await io.batch(ops)
    return head.sealed()


async def delete_chunks(io: StoreIO, keys: ThreadKeys, epoch: str, chunks: int) -> int:
    """Delete chunks ``0 .. chunks - 1`` of history ``epoch``, newest first, as far as stored.

    Each batch of keys is read first, and only the chunks stored are deleted (one ``batch``
    call where the store has it); the first batch with no chunk stored ends the work, as every
    older chunk is gone too (chunks expire, and are evicted, oldest first).

    Returns:
        How many chunks were deleted.

    Raises:
        StoreError: The store failed (the chunks not deleted yet stay, unreachable).
    """
    deleted = 0
    for numbers in _batches(0, chunks):
        if deleted:
            await _pause()
        chunk_keys = [keys.history_chunk(epoch, n) for n in numbers]
        raws = await io.get_many(chunk_keys)
        stored = [key for key, raw in zip(chunk_keys, raws, strict=True) if raw is not None]
        if not stored:
            break
        await io.batch([DeleteOp(key) for key in stored])
        deleted += len(stored)
    return deleted
