"""Message histories kept in any store: every message is stored, the most recent are loaded.

:class:`ConversationWindowMemory` loads the last ``window_size`` messages,
:class:`TokenWindowMemory` as many of the most recent messages as fit in a token budget. Both
keep the whole history, so the window is applied when loading, never when writing.

Layout of one session's history, under the session's key prefix
``ThreadKeys(session, namespace).prefix`` (``thread_<encoded id>:``)::

    <prefix>messages                  the head: message count, a random epoch, the chunk
                                      size, the tool calls still unanswered, and the messages
                                      after the last full chunk (the tail)
    <prefix>messages:<epoch>:<n>      chunk n: messages n*size .. n*size+size-1, written once

An append reads the head and writes it back with the new messages added to its tail. Once the
tail holds a full chunk, that chunk is written to its own key and dropped from the head, so an
append rewrites at most about one chunk of messages, however long the history. Loading the last
K messages reads the head and only the chunks those K messages are in (one ``get_many`` where
the store has it).

Concurrency: on stores with ``compare_and_set`` the head is written only if it still holds
what was read, retried otherwise, so concurrent appends from any number of tasks, processes or
machines lose no message. A chunk is written only once the head that holds its messages has
been written, so its content is settled and writing it twice is harmless. On plain stores
(only ``get``, ``set`` and ``delete``) appends to one session are serialized by an asyncio
lock per (store, session): safe within one process only.

The epoch is chosen when a session's first message is written and changes after
:meth:`clear`, so a writer that was still finishing an append to the cleared history writes
only to keys nobody reads.

Values that slimcache did not write (a head or chunk that does not parse, or has another
format or version) raise :class:`StoreError` naming the key; ``clear(session)`` removes them.
A chunk that is absent (expired under ``ttl``, or evicted by an LRU-bounded store) is skipped:
loading returns the messages after it, and a warning is logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import secrets
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from slimcache._exceptions import ConfigurationError, InvalidInput, StoreError
from slimcache.core.entries import load_stored
from slimcache.core.keys import ThreadKeys, normalize_namespace
from slimcache.core.results import Stats
from slimcache.core.thread_cache import StoreIO
from slimcache.messages import (
    Message,
    TokenCounter,
    approx_tokens,
    check_messages,
    count_message_tokens,
)
from slimcache.stores.protocol import Store, positive_int, validate_ttl
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT, check_seconds

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ConversationWindowMemory",
    "HistoryHead",
    "TokenWindowMemory",
]

logger = logging.getLogger("slimcache")

DEFAULT_CHUNK_SIZE = 32
"""Messages per stored chunk: the head holds fewer than this many between chunk writes."""

_HEAD_FORMAT = "slimcache.history"
_CHUNK_FORMAT = "slimcache.history.chunk"
_VERSION = 1
# Appends retried this often against concurrent writers before giving up. Every failed
# compare-and-set means another append succeeded, so only a session under a storm of
# concurrent appends gets anywhere near it.
_MAX_ATTEMPTS = 1000

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

# One lock per (store, head key) for stores without compare_and_set. Weak values: a lock
# nobody holds or waits for is dropped, so sessions do not accumulate.
_LOCKS: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = weakref.WeakValueDictionary()


def _session_lock(store: Store, key: str) -> asyncio.Lock:
    lock = _LOCKS.get((id(store), key))
    if lock is None:
        lock = asyncio.Lock()
        _LOCKS[(id(store), key)] = lock
    return lock


@dataclass(frozen=True)
class HistoryHead:
    """The head entry of one session's history, as read or written.

    Attributes:
        epoch: Random id of this incarnation of the history (new after a clear).
        chunk: Messages per chunk.
        count: Messages in the history.
        base: Messages stored in chunks (a multiple of ``chunk``); the rest are in ``tail``.
        open_calls: Tool call ids of the last assistant message that no tool result has
            answered yet (what a following tool result may answer).
        tail: Messages ``base .. count - 1``.
    """

    epoch: str
    chunk: int
    count: int
    base: int
    open_calls: tuple[str, ...]
    tail: tuple[dict[str, Any], ...]

    @classmethod
    def new(cls, chunk: int) -> HistoryHead:
        """The head of an empty history with a fresh epoch."""
        return cls(secrets.token_hex(8), chunk, 0, 0, (), ())

    def to_json(self) -> str:
        """Serialize the head."""
        return _ENCODER.encode(
            {
                "format": _HEAD_FORMAT,
                "v": _VERSION,
                "epoch": self.epoch,
                "chunk": self.chunk,
                "count": self.count,
                "base": self.base,
                "open": list(self.open_calls),
                "tail": list(self.tail),
            }
        )

    @classmethod
    def parse(cls, raw: str) -> HistoryHead | None:
        """Rebuild a head, or return ``None`` if ``raw`` is not one slimcache wrote."""
        data = load_stored(raw)
        if not isinstance(data, dict):
            return None
        if data.get("format") != _HEAD_FORMAT or data.get("v") != _VERSION:
            return None
        epoch, chunk, count, base = (data.get(k) for k in ("epoch", "chunk", "count", "base"))
        open_calls, tail = data.get("open"), data.get("tail")
        if not (isinstance(epoch, str) and epoch and epoch.isalnum()):
            return None
        if not (_is_int(chunk) and _is_int(count) and _is_int(base)):
            return None
        if chunk < 1 or base < 0 or base % chunk or count < base:
            return None
        if not isinstance(open_calls, list) or not all(isinstance(c, str) for c in open_calls):
            return None
        if not _messages_list(tail) or len(tail) != count - base:
            return None
        return cls(epoch, chunk, count, base, tuple(open_calls), tuple(tail))

    @property
    def full_chunks(self) -> int:
        """How many full chunks the tail holds (written to their own keys by the next writer)."""
        return len(self.tail) // self.chunk

    def chunk_value(self, position: int) -> tuple[int, str]:
        """The number and serialized value of the tail's ``position``-th full chunk."""
        number = self.base // self.chunk + position
        start = position * self.chunk
        messages = list(self.tail[start : start + self.chunk])
        value = _ENCODER.encode(
            {
                "format": _CHUNK_FORMAT,
                "v": _VERSION,
                "epoch": self.epoch,
                "n": number,
                "messages": messages,
            }
        )
        return number, value

    def sealed(self) -> HistoryHead:
        """This head once its full chunks are stored under their own keys."""
        moved = self.full_chunks * self.chunk
        return replace(self, base=self.base + moved, tail=self.tail[moved:])

    def extended(self, batch: _Batch) -> HistoryHead:
        """This head with ``batch`` appended."""
        if batch.open_after is None:
            answered = {call_id for _, call_id in batch.answers}
            open_calls = tuple(c for c in self.open_calls if c not in answered)
        else:
            open_calls = batch.open_after
        return replace(
            self,
            count=self.count + len(batch.messages),
            open_calls=open_calls,
            tail=self.tail + tuple(batch.messages),
        )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _messages_list(value: object) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and all(isinstance(m, dict) for m in value)


def _parse_chunk(raw: str, *, epoch: str, number: int, size: int) -> list[dict[str, Any]] | None:
    data = load_stored(raw)
    if not isinstance(data, dict):
        return None
    if data.get("format") != _CHUNK_FORMAT or data.get("v") != _VERSION:
        return None
    if data.get("epoch") != epoch or data.get("n") != number:
        return None
    messages = data.get("messages")
    if not _messages_list(messages) or len(messages) != size:
        return None
    result: list[dict[str, Any]] = messages
    return result


@dataclass(frozen=True)
class _Batch:
    """Messages checked and ready to append.

    Attributes:
        messages: The messages as they will be stored (a JSON round trip of what was given).
        answers: ``(index, tool_call_id)`` of the tool results the batch starts with: they
            answer tool calls already in the history.
        open_after: The tool calls left unanswered after the batch, or ``None`` when the batch
            holds only tool results (the history's open calls, minus those answered).
    """

    messages: list[dict[str, Any]]
    answers: tuple[tuple[int, str], ...]
    open_after: tuple[str, ...] | None


def _check_batch(messages: Sequence[Message]) -> _Batch:
    """Validate messages to append, before anything is written.

    A batch may start with tool results answering the history's last tool calls; whether they
    really do is checked against the stored head (:func:`_check_answers`).

    Raises:
        InvalidInput: Naming the message index and the rule.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInput(f"messages must be a list of dicts, got {type(messages).__name__}")
    leading: list[Mapping[str, Any]] = []
    for message in messages:
        if not (isinstance(message, Mapping) and message.get("role") == "tool"):
            break
        leading.append(message)
    ids: list[str] = []
    for message in leading:
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str) and call_id and call_id not in ids:
            ids.append(call_id)
    if ids:
        # Stand in for the assistant message in the history whose calls these results answer,
        # so every other rule is checked as usual.
        calls = [
            {"id": i, "type": "function", "function": {"name": "call", "arguments": ""}}
            for i in ids
        ]
        stand_in = {"role": "assistant", "content": None, "tool_calls": calls}
        try:
            check_messages([stand_in, *messages])
        except InvalidInput as exc:
            index = None if exc.index is None else exc.index - 1
            raise InvalidInput(exc.rule, index=index) from None
    else:
        check_messages(messages)
    stored: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        try:
            stored.append(json.loads(_ENCODER.encode(dict(message))))
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidInput(
                f"message must be JSON-serializable to be stored ({exc})", index=index
            ) from None
    answers = tuple((i, str(m["tool_call_id"])) for i, m in enumerate(stored[: len(leading)]))
    last = max((i for i, m in enumerate(stored) if m["role"] != "tool"), default=None)
    open_after: tuple[str, ...] | None = None
    if last is not None:
        answered = {m["tool_call_id"] for m in stored[last + 1 :]}
        calls_made = stored[last].get("tool_calls") or []
        open_after = tuple(c["id"] for c in calls_made if c["id"] not in answered)
    return _Batch(stored, answers, open_after)


def _check_answers(batch: _Batch, open_calls: tuple[str, ...]) -> None:
    for index, call_id in batch.answers:
        if call_id not in open_calls:
            waiting = ", ".join(repr(c) for c in open_calls) or "none"
            raise InvalidInput(
                f"tool result {call_id!r} answers no tool call of the assistant message directly "
                f"before it in the history (unanswered calls: {waiting})",
                index=index,
            )


def _drop_orphans(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop leading tool results: the tool calls they answer are not in the list."""
    start = 0
    while start < len(messages) and messages[start].get("role") == "tool":
        start += 1
    return messages[start:]


async def _backoff(attempt: int) -> None:
    # Jitter spreads out writers that collided, so they do not collide again in lockstep.
    await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))


class _MessageHistory:
    """The storage shared by the window memories; see the module docstring for the layout."""

    def __init__(
        self,
        store: Store,
        *,
        namespace: str,
        ttl: float | None,
        chunk_size: int,
        store_timeout: float | None,
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigurationError(
                f"store must have async get, set and delete methods, got {type(store).__name__}"
            )
        normalize_namespace(namespace)
        positive_int("chunk_size", chunk_size)
        self._store = store
        self._namespace = namespace
        self._ttl = validate_ttl(ttl)
        self._chunk_size = chunk_size
        timeout = check_seconds("store_timeout", store_timeout, allow_none=True)
        self._io = StoreIO(store, Stats(), timeout=timeout, ttl=self._ttl)

    @property
    def store(self) -> Store:
        """The store the messages are kept in."""
        return self._store

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
        await self._append(session, messages)

    async def load_all(self, session: str | int) -> list[dict[str, Any]]:
        """Return every message of the session, oldest first.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write.
        """
        keys = ThreadKeys(session, self._namespace)
        head = await self._read_head(keys)
        if head is None:
            return []
        return _drop_orphans(await self._read_span(keys, head, 0, strict=False))

    async def count(self, session: str | int) -> int:
        """Return how many messages the session's history holds (one store read).

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write.
        """
        head = await self._read_head(ThreadKeys(session, self._namespace))
        return 0 if head is None else head.count

    async def clear(self, session: str | int) -> None:
        """Delete the session's whole history.

        A head that slimcache did not write is deleted too (its chunks cannot be known).

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed.
        """
        keys = ThreadKeys(session, self._namespace)
        key = self._head_key(keys)
        if self._io.compares:
            await self._clear(keys, key)
        else:
            async with _session_lock(self._store, key):
                await self._clear(keys, key)

    # ------------------------------------------------------------------ storage

    @staticmethod
    def _head_key(keys: ThreadKeys) -> str:
        return f"{keys.prefix}messages"

    @staticmethod
    def _chunk_key(keys: ThreadKeys, epoch: str, number: int) -> str:
        return f"{keys.prefix}messages:{epoch}:{number}"

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
        key = self._head_key(keys)
        return self._parse_head(await self._io.get(key), key)

    async def _append(self, session: str | int, messages: Sequence[Message]) -> HistoryHead | None:
        """Append ``messages``; return the head as written (``None`` for no messages)."""
        keys = ThreadKeys(session, self._namespace)
        batch = _check_batch(messages)
        if not batch.messages:
            return None
        if self._io.compares:
            return await self._append_batch(keys, batch)
        async with _session_lock(self._store, self._head_key(keys)):
            return await self._append_batch(keys, batch)

    async def _append_batch(self, keys: ThreadKeys, batch: _Batch) -> HistoryHead:
        key = self._head_key(keys)
        for attempt in range(_MAX_ATTEMPTS):
            raw = await self._io.get(key)
            head = self._parse_head(raw, key) or HistoryHead.new(self._chunk_size)
            _check_answers(batch, head.open_calls)
            # Chunks left in the head by a writer that has not stored them yet: their messages
            # are settled, so storing them again is harmless.
            head = await self._seal(keys, head)
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
            sealed = await self._seal(keys, written)
            # Failing means another writer has written the head since; it stores the same
            # chunks itself, so there is nothing to do.
            if await self._write_head(key, written_raw, sealed.to_json()):
                return sealed
        return written

    async def _seal(self, keys: ThreadKeys, head: HistoryHead) -> HistoryHead:
        """Store the head's full chunks under their own keys; return the head without them."""
        for position in range(head.full_chunks):
            number, value = head.chunk_value(position)
            await self._io.set(self._chunk_key(keys, head.epoch, number), value)
        return head.sealed()

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
                # The head is gone, so the history is; its chunks are now unreachable.
                chunks = -(-head.count // head.chunk)
                for number in range(chunks):
                    await self._io.delete(self._chunk_key(keys, head.epoch, number))
            return
        raise StoreError(f"{key} changed {_MAX_ATTEMPTS} times while clearing it")

    async def _read_chunks(
        self, keys: ThreadKeys, head: HistoryHead, first: int, stop: int, *, strict: bool
    ) -> tuple[list[dict[str, Any]], bool]:
        """Read chunks ``first .. stop - 1``.

        Returns:
            Their messages in order, and whether all were there. When one is missing, only the
            messages of the chunks after it are returned (or, if ``strict``, it is an error).
        """
        if first >= stop:
            return [], True
        numbers = range(first, stop)
        chunk_keys = [self._chunk_key(keys, head.epoch, n) for n in numbers]
        raws = await self._io.get_many(chunk_keys)
        parts: list[list[dict[str, Any]]] = []
        for number, chunk_key, raw in reversed(list(zip(numbers, chunk_keys, raws, strict=True))):
            if raw is None:
                where = f"messages {number * head.chunk}-{(number + 1) * head.chunk - 1}"
                if strict:
                    raise StoreError(
                        f"{where} of {keys.prefix[:-1]} are missing from the store "
                        f"({chunk_key}: expired, evicted or deleted)"
                    )
                logger.warning(
                    "%s of %s are no longer in the store (%s); loading the messages after them",
                    where,
                    keys.prefix[:-1],
                    chunk_key,
                )
                parts.reverse()
                return [m for part in parts for m in part], False
            messages = _parse_chunk(raw, epoch=head.epoch, number=number, size=head.chunk)
            if messages is None:
                raise StoreError(
                    f"{chunk_key} holds a value slimcache did not write (or a newer format); "
                    "clear(session) removes the history"
                )
            parts.append(messages)
        parts.reverse()
        return [m for part in parts for m in part], True

    async def _read_span(
        self, keys: ThreadKeys, head: HistoryHead, start: int, *, strict: bool
    ) -> list[dict[str, Any]]:
        """Messages ``start .. head.count - 1`` (those after a missing chunk, unless strict)."""
        start = max(0, start)
        if start >= head.base:
            return list(head.tail[start - head.base :])
        first = start // head.chunk
        stored, complete = await self._read_chunks(
            keys, head, first, head.base // head.chunk, strict=strict
        )
        if complete:
            stored = stored[start - first * head.chunk :]
        return stored + list(head.tail)


class ConversationWindowMemory(_MessageHistory):
    """A message history in any slimcache store that keeps every message and loads the last K.

    Every appended message is stored; :meth:`load` returns the last ``window_size`` of them
    (fewer when the window would start with a tool result whose tool call lies before it:
    such results are left out), :meth:`load_all` the whole history.

    Concurrent appends lose no message: on stores with ``compare_and_set`` (the memory, Redis,
    SQL and S3 stores) across processes and machines; on plain stores only within one process
    (an asyncio lock per store and session).

    Args:
        store: Any slimcache store.
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
        store: Store,
        window_size: int,
        *,
        namespace: str = "",
        ttl: float | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        store_timeout: float | None = DEFAULT_STORE_TIMEOUT,
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
            StoreError: The store failed or holds a value slimcache did not write.
        """
        keys = ThreadKeys(session, self._namespace)
        head = await self._read_head(keys)
        if head is None:
            return []
        start = head.count - self._window_size
        return _drop_orphans(await self._read_span(keys, head, start, strict=False))


class TokenWindowMemory(_MessageHistory):
    """A message history whose :meth:`load` returns as many recent messages as fit a budget.

    Storage, appends and concurrency are those of :class:`ConversationWindowMemory`. Loading
    takes whole units from the end: an assistant message with tool calls and its tool results
    are returned together or not at all. When even the last unit is over the budget, the
    window is empty.

    Args:
        store: Any slimcache store.
        max_tokens: Token budget of the loaded messages, counted as ``count_message_tokens``
            does (text, tool calls, name, plus 4 per message).
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``; plug in tiktoken).
        namespace: Namespace of every key.
        ttl: Seconds each stored entry lives (see :class:`ConversationWindowMemory`).
        chunk_size: Messages per stored chunk.
        store_timeout: Seconds one store call may take.

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        store: Store,
        max_tokens: int,
        *,
        token_counter: TokenCounter = approx_tokens,
        namespace: str = "",
        ttl: float | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        store_timeout: float | None = DEFAULT_STORE_TIMEOUT,
    ) -> None:
        positive_int("max_tokens", max_tokens)
        if not callable(token_counter):
            raise ConfigurationError("token_counter must be a callable (text) -> int")
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

        Chunks are read from the newest back, doubling how many each round, until the messages
        read are over the budget or the history's start is reached.

        Raises:
            InvalidInput: The session id is malformed.
            StoreError: The store failed or holds a value slimcache did not write.
        """
        keys = ThreadKeys(session, self._namespace)
        head = await self._read_head(keys)
        if head is None:
            return []
        loaded = list(head.tail)
        tokens = sum(count_message_tokens(m, self._count_tokens) for m in loaded)
        stop = head.base // head.chunk
        step = 1
        while tokens <= self._max_tokens and stop > 0:
            first = max(0, stop - step)
            older, complete = await self._read_chunks(keys, head, first, stop, strict=False)
            loaded = older + loaded
            tokens += sum(count_message_tokens(m, self._count_tokens) for m in older)
            if not complete:
                break
            stop, step = first, step * 2
        return self._fit(keys, _drop_orphans(loaded))

    def _fit(self, keys: ThreadKeys, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not messages:
            return []
        try:
            checked = check_messages(messages, self._count_tokens)
        except InvalidInput as exc:
            raise StoreError(
                f"the messages stored for {keys.prefix[:-1]} do not pass validation: {exc}"
            ) from None
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
