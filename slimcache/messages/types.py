"""Chat message types, roles, and the kinds of record a fingerprint hashes per message."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = [
    "INT_ID_KIND",
    "JSON_KIND",
    "PINNED_ROLES",
    "PLAIN_KINDS",
    "ROLES",
    "ROLE_ALIASES",
    "STR_ID_KIND",
    "Message",
    "MessageT",
    "TokenCounter",
]

Message = Mapping[str, Any]
"""An OpenAI-style chat message: ``{"role": ..., "content": ...}`` plus optional fields."""

MessageT = TypeVar("MessageT", bound=Message)
"""The type of the messages a front door was given, which it gives back: a plain ``dict``, or
an SDK's message type (the OpenAI SDK's ``ChatCompletionMessageParam``, Anthropic's
``MessageParam``), so the result passes to that SDK under ``mypy --strict``. The summary
message slimcache adds is a plain ``{"role": ..., "content": ...}`` dict of the same shape."""

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text: :class:`~slimcache.messages.TiktokenCounter` (OpenAI's tokenizer),
your provider's tokenizer, or any function of a text."""

ROLES = frozenset({"system", "developer", "user", "human", "assistant", "ai", "tool"})
ROLE_ALIASES = {"human": "user", "ai": "assistant"}
"""Other spellings of a role (LangChain's message types), read as the role they stand for."""
# Leading messages with these roles are the pinned system prompt.
PINNED_ROLES = frozenset({"system", "developer"})
# What a fingerprint records of each message: a plain turn (string content; no name, tool
# calls or tool call id) is its role's letter and its content as is; any other message is
# JSON_KIND and its canonical JSON text.
PLAIN_KINDS = {
    "system": "s",
    "developer": "d",
    "user": "u",
    "human": "u",
    "assistant": "a",
    "ai": "a",
}
JSON_KIND = "j"
# Fingerprinted by their id instead (see ids_as_records): a string id, or an integer id in hex
# (hex has no length limit, where str(int) refuses numbers past 4,300 digits).
STR_ID_KIND = "i"
INT_ID_KIND = "n"
