"""Message histories kept in any store: every message is stored, the most recent are loaded.

:class:`ConversationWindowMemory` loads the last ``window_size`` messages,
:class:`TokenWindowMemory` as many of the most recent messages as fit in a token budget. Both
keep the whole history, so the window is applied when loading, never when writing.

Layout of one session's history, under the session's keys ``ThreadKeys(session, namespace)``
(see :mod:`slimcache.stores.keys`)::

    history_head                      the head: message count, a random epoch, the chunk
                                      size, the tool calls still unanswered, and the messages
                                      after the last full chunk (the tail)
    history_chunk(epoch, n)           chunk n: messages n*size .. n*size+size-1, written once

An append reads the head and writes it back with the new messages added to its tail. Once the
tail holds a full chunk, that chunk is written to its own key and dropped from the head, so an
append rewrites at most about one chunk of messages, however long the history. Loading the last
K messages reads the head and only the chunks those K messages are in (one ``get_many`` where
the store has it).

Concurrency: appends to one session take turns within a process, through an asyncio lock per
(store, session), so the tasks of one process never retry against each other: each append
reads the head once. Across processes and machines, on stores with ``compare_and_set``, the
head is written only if it still holds what was read, retried otherwise, so concurrent
appends from any number of tasks, processes or machines lose no message. A chunk is written
only once the head that holds its messages has been written, so its content is settled and
writing it twice is harmless. On plain stores (only ``get``, ``set`` and ``delete``) the lock
is all there is: safe within one process only.

The epoch is chosen when a session's first message is written and changes after
:meth:`clear`, so a writer that was still finishing an append to the cleared history writes
only to keys nobody reads.

Values that slimcache did not write (a head or chunk that does not parse, or has another
format or version) raise :class:`StoreError` naming the key; ``clear(session)`` removes them.
So does a stored message that breaks a rule of :func:`~slimcache.messages.check_messages`
(a numeric role, a dict as content, a tool result answering no call, ...): every message a
load returns is checked first, and none is ever returned or skipped in silence.
A chunk that is absent (expired under ``ttl``, or evicted by an LRU-bounded store) is skipped:
loading returns the messages after it, and a warning is logged.

A head's message count is trusted only as far as the chunks in the store back it (see
:mod:`slimcache.recipes.window_chunks`): chunks are read newest first, ``CHUNKS_PER_CALL`` keys
per call, and reading stops at the first one missing; :meth:`clear` deletes them the same way
and stops at the first batch none of which is stored. A head claiming millions of messages
therefore costs a call or two, and a long history a few calls per thousand chunks, each
bounded by ``store_timeout``; a cancelled caller stops between two calls.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

from slimcache._exceptions import InvalidInput, StoreError
from slimcache.core.results import Stats
from slimcache.core.settings.compressor import DEFAULTS, check_fields
from slimcache.core.store_argument import close_owned_store, open_store_argument
from slimcache.core.store_io import StoreIO
from slimcache.messages import (
    Message,
    TokenCounter,
    check_messages,
    count_message_tokens,
)
from slimcache.recipes.window_chunks import (
    CHUNKS_PER_CALL,
    delete_chunks,
    read_chunks,
    write_full_chunks,
)
from slimcache.recipes.window_history import (
    DEFAULT_CHUNK_SIZE,
    Batch,
    HistoryHead,
    check_answers,
    check_batch,
    check_stored,
    drop_orphans,
    stored_message_error,
)
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import Store, positive_int

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ConversationWindowMemory",
    "HistoryHead",
    "TokenWindowMemory",
]

# Appends retried this often against concurrent writers before giving up. Every failed
# compare-and-set means another append succeeded, so only a session under a storm of
# concurrent appends gets anywhere near it.
_MAX_ATTEMPTS = 1000

# One lock per (store, head key): appends in one process take turns. On stores without
# compare_and_set it is what keeps them apart; on the others it spares the tasks of one process
# the rounds of failed compare-and-set they would otherwise cost each other (dozens of tasks on
# one session made every append read and write the head about a dozen times). Weak values: a
# lock nobody holds or waits for is dropped, so sessions do not accumulate.
_LOCKS: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = weakref.WeakValueDictionary()


def _session_lock(store: Store, key: str) -> asyncio.Lock:
    lock = _LOCKS.get((id(store), key))
    if lock is None:
        lock = asyncio.Lock()
        _LOCKS[(id(store), key)] = lock
    return lock


async def _backoff(attempt: int) -> None:
    # Jitter spreads out writers that collided, so they do not collide again in lockstep.
    await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))


_H = TypeVar("_H", bound="_MessageHistory")


class _MessageHistory:
    """The storage shared by the window memories; see the module docstring for the layout."""

    def __init__(
        self,
        store: Store | str,
        *,
        namespace: str,
        ttl: float | None,
        chunk_size: int,
        store_timeout: float | None,
    ) -> None:
        positive_int("chunk_size", chunk_size)
        checked = check_fields(namespace=namespace, ttl=ttl, store_timeout=store_timeout)
        self._store, self._owns_store = open_store_argument(store, optional=False)
        self._namespace = checked["namespace"]
        self._ttl = checked["ttl"]
        self._chunk_size = chunk_size
        self._io = StoreIO(self._store, Stats(), timeout=checked["store_timeout"], ttl=self._ttl)

    @property
    def store(self) -> Store:
        """The store the messages are kept in."""
        return self._store

    async def aclose(self) -> None:
        """Close the store if this memory opened it from a URL; a store passed in stays open."""
        await close_owned_store(self._store, self._owns_store)

    async def __aenter__(self: _H) -> _H:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ WindowHistory
    # What the sliding window asks of the memory (see window_history.WindowHistory).

    @property
    def store_timeout(self) -> float | None:
        """Seconds one store call may take (``None``: no bound beyond the store's own)."""
        return self._io.timeout

    async def append_messages(
        self, session: str | int, messages: Sequence[Message]
    ) -> HistoryHead | None:
        """Append ``messages`` (all or none); return the head as written (``None``: none).

        Raises:
            InvalidInput: A message or the session id breaks a rule (nothing is written).
            StoreError: The store failed or holds a value slimcache did not write.
        """
        keys = ThreadKeys(session, self._namespace)
        batch = check_batch(messages)
        if not batch.messages:
            return None
        # Tasks here take turns; compare-and-set keeps other processes' appends apart.
        async with _session_lock(self._store, keys.history_head):
            return await self._append_batch(keys, batch)

    async def read_head(self, session: str | int) -> HistoryHead | None:
        """The session's head, or ``None`` when it has no history.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write.
        """
        return await self._read_head(ThreadKeys(session, self._namespace))

    async def read_messages(
        self, session: str | int, head: HistoryHead, start: int
    ) -> list[dict[str, Any]]:
        """Messages ``start .. head.count - 1`` of the history ``head`` is the head of.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: A chunk holding some of them is missing, holds a value slimcache did
                not write, or one of them breaks a rule of ``check_messages``; or the store
                failed.
        """
        keys = ThreadKeys(session, self._namespace)
        messages = await self._read_span(keys, head, start, strict=True)
        return check_stored(keys, head, messages, max(0, start))

    # ------------------------------------------------------------------ public API

    async def append(self, session: str | int, message: Message) -> None:
        """Store one message at the end of the session's history.

        Args:
            session: The session (conversation) id.
            message: An OpenAI-style chat message. A tool result must answer a tool call of
                the assistant message before it in the history.

        Raises:
            InvalidInput: The message or session id breaks a rule (nothing is written).
            StoreError: The store failed or holds a value slimcache did not write.
        """
        await self.append_many(session, [message])

    async def append_many(self, session: str | int, messages: Sequence[Message]) -> None:
        """Store several messages at the end of the session's history, all or none.

        Raises:
            InvalidInput: A message or the session id breaks a rule (nothing is written).
            StoreError: The store failed or holds a value slimcache did not write.
        """
        await self.append_messages(session, messages)

    async def load_all(self, session: str | int) -> list[dict[str, Any]]:
        """Return every message of the session, oldest first.

        The chunks are read newest first, ``CHUNKS_PER_CALL`` per ``get_many``; one that is
        missing ends the reading, with a warning, and the messages after it are returned.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write, a stored
                message that breaks a rule of ``check_messages`` included (the error names
                its key; nothing is returned).
        """
        keys = ThreadKeys(session, self._namespace)
        head = await self._read_head(keys)
        if head is None:
            return []
        loaded = drop_orphans(await self._read_span(keys, head, 0, strict=False))
        return check_stored(keys, head, loaded, head.count - len(loaded))

    async def count(self, session: str | int) -> int:
        """Return how many messages the session's history holds (one store read).

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write.
        """
        head = await self.read_head(session)
        return 0 if head is None else head.count

    async def clear(self, session: str | int) -> None:
        """Delete the session's whole history.

        The head goes first, so the history is gone at once; then its chunks, newest first,
        ``CHUNKS_PER_CALL`` at a time (one ``get_many`` to find those stored and one ``batch``
        to delete them), until a batch holds none. A head that slimcache did not write is
        deleted too (its chunks cannot be known).

        When the clear is cancelled, or the store fails, part way, the chunks not deleted yet
        stay in the store, unreachable (under ``ttl`` they expire).

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed.
        """
        keys = ThreadKeys(session, self._namespace)
        key = keys.history_head
        if self._io.compares:
            await self._clear(keys, key)
        else:
            async with _session_lock(self._store, key):
                await self._clear(keys, key)

    # ------------------------------------------------------------------ storage

    def _parse_head(self, raw: str | None, key: str) -> HistoryHead | None:
        if raw is None:
            return None
        head = HistoryHead.parse(raw)
        if head is None:
            raise StoreError(
                f"{key} holds a value slimcache did not write (or a newer format); "
                "clear(session) removes it"
            )
        return head

    async def _read_head(self, keys: ThreadKeys) -> HistoryHead | None:
        key = keys.history_head
        return self._parse_head(await self._io.get(key), key)

    async def _append_batch(self, keys: ThreadKeys, batch: Batch) -> HistoryHead:
        key = keys.history_head
        for attempt in range(_MAX_ATTEMPTS):
            raw = await self._io.get(key)
            head = self._parse_head(raw, key) or HistoryHead.new(self._chunk_size)
            check_answers(batch, head.open_calls)
            # Chunks left in the head by a writer that has not stored them yet: their messages
            # are settled, so storing them again is harmless.
            head = await write_full_chunks(self._io, keys, head)
            written = head.extended(batch)
            written_raw = written.to_json()
            if await self._write_head(key, raw, written_raw):
                break
            await _backoff(attempt)
        else:
            raise StoreError(
                f"{key} changed {_MAX_ATTEMPTS} times while appending; nothing was appended"
            )
        if written.full_chunks:
            sealed = await write_full_chunks(self._io, keys, written)
            # Failing means another writer has written the head since; it stores the same
            # chunks itself, so there is nothing to do.
            if await self._write_head(key, written_raw, sealed.to_json()):
                return sealed
        return written

    async def _write_head(self, key: str, expected: str | None, value: str) -> bool:
        if self._io.compares:
            return await self._io.compare_and_set(key, expected, value)
        # Plain stores: the caller holds this session's lock.
        await self._io.set(key, value)
        return True

    async def _clear(self, keys: ThreadKeys, key: str) -> None:
        for attempt in range(_MAX_ATTEMPTS):
            raw = await self._io.get(key)
            if raw is None:
                return
            head = HistoryHead.parse(raw)
            if self._io.compares:
                if not await self._io.compare_and_delete(key, raw):
                    await _backoff(attempt)
                    continue
            else:
                await self._io.delete(key)
            if head is not None:
                # The head is gone, so the history is; its chunks are now unreachable. Those
                # numbered up to the count include any a writer stored just before the clear.
                await delete_chunks(self._io, keys, head.epoch, -(-head.count // head.chunk))
            return
        raise StoreError(f"{key} changed {_MAX_ATTEMPTS} times while clearing it")

    async def _read_span(
        self, keys: ThreadKeys, head: HistoryHead, start: int, *, strict: bool
    ) -> list[dict[str, Any]]:
        """Messages ``start .. head.count - 1`` (those after a missing chunk, unless strict)."""
        start = max(0, start)
        if start >= head.base:
            return list(head.tail[start - head.base :])
        first = start // head.chunk
        stored, complete = await read_chunks(
            self._io, keys, head, first, head.base // head.chunk, strict=strict
        )
        if complete:
            stored = stored[start - first * head.chunk :]
        return stored + list(head.tail)


class ConversationWindowMemory(_MessageHistory):
    """A message history in any slimcache store that keeps every message and loads the last K.

    Every appended message is stored; :meth:`load` returns the last ``window_size`` of them,
    in whole units: when the window would start with tool results, the assistant message
    whose tool calls they answer is loaded with them (so a few more than ``window_size``, and a
    non-empty history never loads as empty), :meth:`load_all` the whole history.

    Concurrent appends lose no message: on stores with ``compare_and_set`` (the memory, Redis,
    SQL and S3 stores) across processes and machines; on plain stores only within one process.
    Within a process, appends to one session take turns (an asyncio lock per store and
    session), so they never retry against each other.

    Args:
        store: Any slimcache store, or a store URL (``"redis://localhost:6379/0"``), which the
            memory opens with :func:`~slimcache.open_store` and closes in ``aclose()`` (or on
            leaving ``async with``); a store passed in stays open.
        window_size: How many of the most recent messages :meth:`load` returns.
        namespace: Namespace of every key (``"myapp"`` gives ``myapp:thread_...``).
        ttl: Seconds each stored entry lives after it is written (``None``: until cleared).
            The head is rewritten on every append, so an idle session expires whole; in a
            session appended to for longer than ``ttl``, the oldest chunks expire first and
            loading returns the messages after them.
        chunk_size: Messages per stored chunk (a session's existing size is kept).
        store_timeout: Seconds one store call may take before it fails with
            :class:`StoreError` (``None``: no bound beyond the store's own).

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        store: Store | str,
        window_size: int,
        *,
        namespace: str = DEFAULTS.namespace,
        ttl: float | None = DEFAULTS.ttl,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        store_timeout: float | None = DEFAULTS.store_timeout,
    ) -> None:
        positive_int("window_size", window_size)
        super().__init__(
            store,
            namespace=namespace,
            ttl=ttl,
            chunk_size=chunk_size,
            store_timeout=store_timeout,
        )
        self._window_size = window_size

    @property
    def window_size(self) -> int:
        """How many of the most recent messages :meth:`load` returns."""
        return self._window_size

    async def load(self, session: str | int) -> list[dict[str, Any]]:
        """Return the session's last ``window_size`` messages, oldest first.

        Only the head and the chunks holding those messages are read.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write, a stored
                message that breaks a rule of ``check_messages`` included (the error names
                its key; nothing is returned).
        """
        keys = ThreadKeys(session, self._namespace)
        head = await self._read_head(keys)
        if head is None:
            return []
        start = head.count - self._window_size
        loaded = await self._read_span(keys, head, start, strict=False)
        if loaded and loaded[0].get("role") == "tool" and start > 0:
            loaded = await self._whole_first_unit(keys, head, start, loaded)
        loaded = drop_orphans(loaded)
        return check_stored(keys, head, loaded, head.count - len(loaded))

    async def _whole_first_unit(
        self, keys: ThreadKeys, head: HistoryHead, start: int, loaded: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``loaded`` (the messages from ``start``) preceded by the rest of its first unit:
        the assistant message whose tool calls the leading tool results answer, and any
        results before them, read back a few messages at a time."""
        if len(loaded) != head.count - start:  # chunks are missing: no earlier messages
            return loaded
        first, begin = start, start  # the unit's first message; where ``loaded`` begins
        while True:
            while first > begin and loaded[first - begin].get("role") == "tool":
                first -= 1
            if begin == 0 or loaded[first - begin].get("role") != "tool":
                return loaded[first - begin :]
            begin = max(0, begin - max(8, self._window_size))
            loaded = await self._read_span(keys, head, begin, strict=False)
            if len(loaded) != head.count - begin:
                return loaded


class TokenWindowMemory(_MessageHistory):
    """A message history whose :meth:`load` returns as many recent messages as fit a budget.

    Storage, appends and concurrency are those of :class:`ConversationWindowMemory`. Loading
    takes whole units from the end: an assistant message with tool calls and its tool results
    are returned together or not at all. When even the last unit is over the budget, the
    window is empty.

    Args:
        store: Any slimcache store, or a store URL (see :class:`ConversationWindowMemory`).
        max_tokens: Token budget of the loaded messages, counted as ``count_message_tokens``
            does (text, tool calls, name, plus 4 per message).
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``;
            :class:`~slimcache.messages.TiktokenCounter` counts with OpenAI's tokenizer).
        namespace: Namespace of every key.
        ttl: Seconds each stored entry lives (see :class:`ConversationWindowMemory`).
        chunk_size: Messages per stored chunk.
        store_timeout: Seconds one store call may take.

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        store: Store | str,
        max_tokens: int,
        *,
        token_counter: TokenCounter = DEFAULTS.token_counter,
        namespace: str = DEFAULTS.namespace,
        ttl: float | None = DEFAULTS.ttl,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        store_timeout: float | None = DEFAULTS.store_timeout,
    ) -> None:
        positive_int("max_tokens", max_tokens)
        check_fields(token_counter=token_counter)
        super().__init__(
            store,
            namespace=namespace,
            ttl=ttl,
            chunk_size=chunk_size,
            store_timeout=store_timeout,
        )
        self._max_tokens = max_tokens
        self._count_tokens = token_counter

    @property
    def max_tokens(self) -> int:
        """The token budget of :meth:`load`."""
        return self._max_tokens

    async def load(self, session: str | int) -> list[dict[str, Any]]:
        """Return the most recent messages that fit in ``max_tokens``, oldest first.

        Chunks are read from the newest back, doubling how many each round (up to
        ``CHUNKS_PER_CALL``), until the messages read are over the budget, a chunk is missing,
        or the history's start is reached.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write, a stored
                message that breaks a rule of ``check_messages`` included (the error names
                its key; nothing is returned).
        """
        keys = ThreadKeys(session, self._namespace)
        head = await self._read_head(keys)
        if head is None:
            return []
        # Checked before their tokens are counted: counting needs well-formed messages.
        loaded = check_stored(keys, head, list(head.tail), head.base)
        tokens = sum(count_message_tokens(m, self._count_tokens) for m in loaded)
        stop = head.base // head.chunk
        step = 1
        while tokens <= self._max_tokens and stop > 0:
            first = max(0, stop - step)
            older, complete = await read_chunks(self._io, keys, head, first, stop, strict=False)
            check_stored(keys, head, older, stop * head.chunk - len(older))
            loaded = older + loaded
            tokens += sum(count_message_tokens(m, self._count_tokens) for m in older)
            if not complete:
                break
            stop, step = first, min(step * 2, CHUNKS_PER_CALL)
        return self._fit(keys, head, drop_orphans(loaded))

    def _fit(
        self, keys: ThreadKeys, head: HistoryHead, messages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if not messages:
            return []
        try:
            checked = check_messages(messages, self._count_tokens)
        except InvalidInput as exc:
            raise stored_message_error(keys, head, head.count - len(messages), exc) from None
        starts: list[int] = []
        position = 0
        while position < len(messages):
            starts.append(position)
            position = checked.unit_end[position] + 1
        budget = self._max_tokens
        chosen = len(messages)
        for start in reversed(starts):
            cost = sum(checked.tokens[start : checked.unit_end[start] + 1])
            if cost > budget:
                break
            budget -= cost
            chosen = start
        return messages[chosen:]
