"""The conversation wrapper: a thread's messages with its id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slimcache._exceptions import InvalidInput
from slimcache.messages.types import Message

__all__ = [
    "Conversation",
    "split_conversation",
    "unwrap_messages",
    "with_report",
    "wrap_messages",
]


@dataclass(frozen=True)
class Conversation:
    """A thread's messages with its id, so the id need not repeat on every message.

    Attributes:
        thread_id: Identifies the conversation; summaries are cached per thread.
        messages: The chat messages, oldest first.
        metadata: Free-form data about the conversation; ``compress`` adds a ``"slimcache"``
            entry describing what it did.
    """

    thread_id: str
    messages: list[dict[str, Any]]
    metadata: dict[str, Any] | None = field(default=None)


def wrap_messages(messages: Sequence[Message], thread_id: str) -> Conversation:
    """Wrap a list of messages into a :class:`Conversation` for ``thread_id``."""
    return Conversation(thread_id=thread_id, messages=[dict(m) for m in messages])


def unwrap_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """Return the messages of a :class:`Conversation` as a plain list."""
    return list(conversation.messages)


def split_conversation(
    messages: Conversation | Sequence[Message], thread_id: str | int | None
) -> tuple[Sequence[Message], str | int | None]:
    """The messages and the thread id a ``compress(messages, thread_id=...)`` call names.

    Raises:
        InvalidInput: A :class:`Conversation` given with a ``thread_id`` too.
    """
    if not isinstance(messages, Conversation):
        return messages, thread_id
    if thread_id is not None:
        raise InvalidInput("give the thread id in the Conversation or as thread_id, not both")
    return messages.messages, messages.thread_id


def with_report(
    given: Conversation, messages: list[dict[str, Any]], report: dict[str, Any]
) -> Conversation:
    """A new :class:`Conversation` of ``given``'s thread holding ``messages``, its metadata
    given a ``"slimcache"`` entry, ``report``, saying what a compressor did."""
    metadata = dict(given.metadata or {})
    metadata["slimcache"] = report
    return Conversation(given.thread_id, messages, metadata)
