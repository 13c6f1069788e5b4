"""The stored form of a window memory's history: its head, its chunks, and appended batches.

See :mod:`slimcache.recipes.window_memory` for the layout and how appends use these; the keys
come from :class:`~slimcache.stores.keys.ThreadKeys`. :class:`WindowHistory` is what the
sliding window asks of a window memory beyond its public methods.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeGuard

from slimcache._exceptions import InvalidInput, StoreError
from slimcache.messages import Message, check_messages
from slimcache.stores.entries import load_stored
from slimcache.stores.keys import ThreadKeys

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "Batch",
    "HistoryHead",
    "WindowHistory",
    "check_answers",
    "check_batch",
    "check_continuing",
    "check_stored",
    "drop_orphans",
    "parse_chunk",
    "stored_message_error",
]

DEFAULT_CHUNK_SIZE = 32
"""Messages per stored chunk: the head holds fewer than this many between chunk writes."""

_HEAD_FORMAT = "slimcache.history"
_CHUNK_FORMAT = "slimcache.history.chunk"
_VERSION = 1

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


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

    def extended(self, batch: Batch) -> HistoryHead:
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


def parse_chunk(raw: str, *, epoch: str, number: int, size: int) -> list[dict[str, Any]] | None:
    """The messages of chunk ``number`` of history ``epoch``, or ``None`` if slimcache did not
    write ``raw`` as that chunk (or ``size`` messages are not there)."""
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
class Batch:
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


def check_batch(messages: Sequence[Message]) -> Batch:
    """Validate messages to append, before anything is written.

    A batch may start with tool results answering the history's last tool calls; whether they
    really do is checked against the stored head (:func:`check_answers`).

    Raises:
        InvalidInput: Naming the message index and the rule.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInput(f"messages must be a list of dicts, got {type(messages).__name__}")
    leading = check_continuing(messages)
    stored: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        try:
            stored.append(json.loads(_ENCODER.encode(dict(message))))
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidInput(
                f"message must be JSON-serializable to be stored ({exc})", index=index
            ) from None
    answers = tuple((i, str(m["tool_call_id"])) for i, m in enumerate(stored[:leading]))
    last = max((i for i, m in enumerate(stored) if m["role"] != "tool"), default=None)
    open_after: tuple[str, ...] | None = None
    if last is not None:
        answered = {m["tool_call_id"] for m in stored[last + 1 :]}
        calls_made = [c for m in _last_block(stored, last) for c in m.get("tool_calls") or ()]
        open_after = tuple(c["id"] for c in calls_made if c["id"] not in answered)
    return Batch(stored, answers, open_after)


def _last_block(stored: list[dict[str, Any]], last: int) -> list[dict[str, Any]]:
    """The assistant messages whose calls the results after ``last`` may answer: the run of
    assistant messages ending at ``last``, from the first of them with tool calls."""
    if stored[last]["role"] not in ("assistant", "ai"):
        return [stored[last]]
    start = last
    probe = last - 1
    while probe >= 0 and stored[probe]["role"] in ("assistant", "ai"):
        if stored[probe].get("tool_calls"):
            start = probe
        probe -= 1
    return stored[start : last + 1]


def check_continuing(messages: Sequence[Message]) -> int:
    """Check messages that continue a history, as ``check_messages`` checks a whole one.

    The messages may start with tool results answering tool calls made before them (in the
    history they continue); whether those calls exist is for the caller to check.

    Returns:
        How many tool results the messages start with.

    Raises:
        InvalidInput: Naming the message index (in ``messages``) and the rule.
    """
    leading = 0
    ids: list[str] = []
    for message in messages:
        if not (isinstance(message, Mapping) and message.get("role") == "tool"):
            break
        leading += 1
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str) and call_id and call_id not in ids:
            ids.append(call_id)
    if not ids:
        check_messages(messages)
        return leading
    # Stand in for the assistant message in the history whose calls these results answer,
    # so every other rule is checked as usual.
    calls = [
        {"id": i, "type": "function", "function": {"name": "call", "arguments": ""}} for i in ids
    ]
    stand_in = {"role": "assistant", "content": None, "tool_calls": calls}
    try:
        check_messages([stand_in, *messages])
    except InvalidInput as exc:
        index = None if exc.index is None else exc.index - 1
        raise InvalidInput(exc.rule, index=index) from None
    return leading


def stored_message_error(
    keys: ThreadKeys, head: HistoryHead, start: int, problem: InvalidInput
) -> StoreError:
    """The error for a message read from the store that breaks a rule.

    Args:
        keys: The session's keys.
        head: The head of the history the messages were read from.
        start: Position in that history of the first message checked.
        problem: What the check raised, its index counted from ``start``.
    """
    position = start + (problem.index or 0)
    if position >= head.base:
        key = keys.history_head
    else:
        key = keys.history_chunk(head.epoch, position // head.chunk)
    return StoreError(
        f"{key} holds a message slimcache did not write (message {position} of "
        f"{keys.prefix[:-1]}: {problem.rule}); clear(session) removes the history"
    )


def check_stored(
    keys: ThreadKeys, head: HistoryHead, messages: list[dict[str, Any]], start: int
) -> list[dict[str, Any]]:
    """Check messages read from the store before they are used; return them.

    ``messages`` are messages ``start ..`` of the history ``head`` is the head of, so they may
    start with tool results answering calls made before them.

    Raises:
        StoreError: One breaks a rule of ``check_messages``; naming the key holding it.
    """
    try:
        check_continuing(messages)
    except InvalidInput as exc:
        raise stored_message_error(keys, head, start, exc) from None
    return messages


def check_answers(batch: Batch, open_calls: tuple[str, ...]) -> None:
    """Check that the tool results ``batch`` starts with answer calls in ``open_calls``.

    Raises:
        InvalidInput: Naming the first result that answers no open call.
    """
    for index, call_id in batch.answers:
        if call_id not in open_calls:
            waiting = ", ".join(repr(c) for c in open_calls) or "none"
            raise InvalidInput(
                f"tool result {call_id!r} answers no tool call of the assistant message directly "
                f"before it in the history (unanswered calls: {waiting})",
                index=index,
            )


def drop_orphans(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop leading tool results: the tool calls they answer are not in the list."""
    start = 0
    while start < len(messages) and messages[start].get("role") == "tool":
        start += 1
    return messages[start:]


class WindowHistory(Protocol):
    """What :class:`~slimcache.SlidingWindow` asks of a window memory beyond its public API.

    It keeps its own copy of the history and reads only the messages it has not seen, so it
    needs the head (count and epoch) an append wrote and the messages after a position.
    """

    @property
    def store_timeout(self) -> float | None:
        """Seconds one store call may take (``None``: no bound beyond the store's own)."""
        ...

    async def append_messages(
        self, session: str | int, messages: Sequence[Message]
    ) -> HistoryHead | None:
        """Append ``messages`` (all or none); return the head as written (``None``: none)."""
        ...

    async def read_head(self, session: str | int) -> HistoryHead | None:
        """The session's head, or ``None`` when it has no history."""
        ...

    async def read_messages(
        self, session: str | int, head: HistoryHead, start: int
    ) -> list[dict[str, Any]]:
        """Messages ``start .. head.count - 1`` of the history ``head`` is the head of.

        Raises:
            StoreError: A chunk holding some of them is missing, or the store failed.
        """
        ...
