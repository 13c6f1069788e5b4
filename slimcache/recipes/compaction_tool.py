"""The ``new_session`` tool's values: the context status, the tool's answers, the stored records.

:class:`~slimcache.recipes.compaction.Compaction` builds these; what it stores per thread is a
:class:`NewSession` record under the new thread and a :class:`SessionLink` under the old one
(keys from :class:`~slimcache.stores.keys.ThreadKeys`).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slimcache._exceptions import InvalidInput
from slimcache.stores.entries import load_stored
from slimcache.stores.keys import encode_thread_id

__all__ = [
    "ContextStatus",
    "NewSession",
    "SessionLink",
    "ToolRefusal",
    "check_call_id",
    "parse_summary",
]

logger = logging.getLogger("slimcache")

_SESSION_FORMAT = "slimcache.session"
_LINK_FORMAT = "slimcache.session_link"
_RECORD_VERSION = 1
_EMPTY_SUMMARY = (
    "A non-empty summary is required to start a new session. Call new_session again with a "
    "summary of the task, what has been accomplished and what remains to be done."
)


@dataclass(frozen=True)
class ContextStatus:
    """How full the context is, for the messages about to be sent.

    Attributes:
        used_tokens: Tokens of the messages (plus any ``extra_tokens`` given).
        context_window: The model's context window in tokens.
        remaining_tokens: ``context_window - used_tokens``, never below 0.
        used_pct: Whole percent of the window used (rounded down, at most 100).
    """

    used_tokens: int
    context_window: int
    remaining_tokens: int
    used_pct: int

    @classmethod
    def measure(cls, used_tokens: int, context_window: int) -> ContextStatus:
        """Build the status of ``used_tokens`` out of ``context_window``."""
        return cls(
            used_tokens=used_tokens,
            context_window=context_window,
            remaining_tokens=max(context_window - used_tokens, 0),
            used_pct=min(used_tokens * 100 // context_window, 100),
        )

    def tag(self) -> str:
        """The ``<context_status>`` element: a compact JSON object in the tag.

        Example: ``<context_status>{"used_pct":42,"used_tokens":4200,
        "remaining_tokens":5800,"context_window":10000}</context_status>``.
        """
        data = {
            "used_pct": self.used_pct,
            "used_tokens": self.used_tokens,
            "remaining_tokens": self.remaining_tokens,
            "context_window": self.context_window,
        }
        return f"<context_status>{json.dumps(data, separators=(',', ':'))}</context_status>"


def check_call_id(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{name} must be a non-empty string, got {value!r:.80}")
    return value


def _openai_result(content: str, call_id: str | None) -> dict[str, Any]:
    if call_id is None:
        raise InvalidInput("tool_call_id is needed: pass the id of the model's tool call")
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _anthropic_result(content: str, call_id: str | None, *, is_error: bool) -> dict[str, Any]:
    if call_id is None:
        raise InvalidInput("tool_use_id is needed: pass the id of the model's tool_use block")
    return {"type": "tool_result", "tool_use_id": call_id, "is_error": is_error, "content": content}


@dataclass(frozen=True)
class ToolRefusal:
    """The model's ``new_session`` call was refused; send this back so it can retry.

    A value :meth:`~slimcache.Compaction.handle_new_session` returns for the model to read,
    not an exception: nothing is raised, and nothing was written to the store. Its
    ``openai_result`` and ``anthropic_result`` are the tool result to send (an error result).

    Attributes:
        message: What was wrong and how to call the tool instead.
        tool_call_id: The id of the refused call, when it was given to the handler.
    """

    message: str
    tool_call_id: str | None = None

    def openai_result(self, tool_call_id: str | None = None) -> dict[str, Any]:
        """The tool message for the Chat Completions API.

        Args:
            tool_call_id: The call's id; defaults to the one given to the handler.

        Returns:
            ``{"role": "tool", "tool_call_id": ..., "content": ...}``.

        Raises:
            InvalidInput: No call id was given, here or to the handler.
        """
        call_id = check_call_id("tool_call_id", tool_call_id) or self.tool_call_id
        return _openai_result(self.message, call_id)

    def anthropic_result(self, tool_use_id: str | None = None) -> dict[str, Any]:
        """The ``tool_result`` content block for the Anthropic Messages API.

        Put it in the content of the next user message.

        Args:
            tool_use_id: The ``tool_use`` block's id; defaults to the one given to the handler.

        Returns:
            ``{"type": "tool_result", "tool_use_id": ..., "is_error": True, "content": ...}``.

        Raises:
            InvalidInput: No call id was given, here or to the handler.
        """
        call_id = check_call_id("tool_use_id", tool_use_id) or self.tool_call_id
        return _anthropic_result(self.message, call_id, is_error=True)


@dataclass(frozen=True)
class NewSession:
    """A session started by the model's ``new_session`` call.

    Attributes:
        thread_id: The new session's thread id: send its messages under this id from now on.
        previous_thread_id: The thread the model called ``new_session`` from.
        summary: The summary the model wrote (surrounding whitespace removed).
        first_message: The new session's first message, which carries the summary.
        created_at: Unix time the session was started.
        tool_call_id: The id of the call that started it, when given to the handler.
    """

    thread_id: str
    previous_thread_id: str | int
    summary: str
    first_message: dict[str, Any]
    created_at: float
    tool_call_id: str | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The new session's history so far: a copy of ``[first_message]``."""
        return [copy.deepcopy(self.first_message)]

    @property
    def result_text(self) -> str:
        """The text of the success result, for the old thread's transcript."""
        return f"Started new session {self.thread_id}; it begins with the summary."

    def openai_result(self, tool_call_id: str | None = None) -> dict[str, Any]:
        """The tool message answering the call in the old thread (Chat Completions API).

        Needed only if the old thread's transcript is kept or shown: every tool call must be
        answered before that history is valid again.

        Raises:
            InvalidInput: No call id was given, here or to the handler.
        """
        call_id = check_call_id("tool_call_id", tool_call_id) or self.tool_call_id
        return _openai_result(self.result_text, call_id)

    def anthropic_result(self, tool_use_id: str | None = None) -> dict[str, Any]:
        """The ``tool_result`` block answering the call in the old thread (Messages API).

        Raises:
            InvalidInput: No call id was given, here or to the handler.
        """
        call_id = check_call_id("tool_use_id", tool_use_id) or self.tool_call_id
        return _anthropic_result(self.result_text, call_id, is_error=False)

    def to_json(self) -> str:
        """Serialize the session record (what is stored under ``ThreadKeys.session``)."""
        data = {
            "format": _SESSION_FORMAT,
            "v": _RECORD_VERSION,
            "thread": encode_thread_id(self.thread_id),
            "thread_id": self.thread_id,
            "previous_thread_id": self.previous_thread_id,
            "summary": self.summary,
            "first_message": self.first_message,
            "created_at": self.created_at,
            "tool_call_id": self.tool_call_id,
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: object, *, thread: str) -> NewSession | None:
        """Rebuild a stored record; ``None`` (logged) if it is unusable or not ``thread``'s."""
        if raw is None:
            return None
        session = cls._from_json(raw, thread)
        if session is None:
            logger.warning("ignoring unusable session record for thread %s", thread)
        return session

    @classmethod
    def _from_json(cls, raw: object, thread: str) -> NewSession | None:
        data = load_stored(raw)
        if not isinstance(data, dict) or data.get("format") != _SESSION_FORMAT:
            return None
        if data.get("v") != _RECORD_VERSION or data.get("thread") != thread:
            return None
        thread_id = data.get("thread_id")
        previous = data.get("previous_thread_id")
        summary = data.get("summary")
        first = data.get("first_message")
        created = data.get("created_at")
        call_id = data.get("tool_call_id")
        if not isinstance(thread_id, str) or not isinstance(summary, str):
            return None
        if isinstance(previous, bool) or not isinstance(previous, (str, int)):
            return None
        if not isinstance(first, dict) or isinstance(created, bool):
            return None
        if not isinstance(created, (int, float)):
            return None
        if call_id is not None and not isinstance(call_id, str):
            return None
        return cls(thread_id, previous, summary, first, float(created), call_id)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class SessionLink:
    next_thread_id: str
    tool_call_id: str | None
    created_at: float = field(default_factory=time.time)

    def to_json(self, thread: str) -> str:
        data = {
            "format": _LINK_FORMAT,
            "v": _RECORD_VERSION,
            "thread": thread,
            "next_thread_id": self.next_thread_id,
            "tool_call_id": self.tool_call_id,
            "created_at": self.created_at,
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: object, *, thread: str) -> SessionLink | None:
        if raw is None:
            return None
        data = load_stored(raw)
        if (
            isinstance(data, dict)
            and data.get("format") == _LINK_FORMAT
            and data.get("v") == _RECORD_VERSION
            and data.get("thread") == thread
            and isinstance(data.get("next_thread_id"), str)
            and (data.get("tool_call_id") is None or isinstance(data.get("tool_call_id"), str))
            and _is_number(data.get("created_at"))
        ):
            return cls(data["next_thread_id"], data["tool_call_id"], float(data["created_at"]))
        logger.warning("ignoring unusable session link for thread %s", thread)
        return None


def parse_summary(arguments: object) -> str | ToolRefusal:
    """The summary in the model's arguments, or the error to send back."""
    if isinstance(arguments, (bytes, bytearray)):
        try:
            arguments = arguments.decode("utf-8")
        except UnicodeDecodeError:
            return ToolRefusal(
                'new_session arguments must be a JSON object like {"summary": "..."}'
            )
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            return ToolRefusal(
                f"new_session arguments are not valid JSON ({exc}). Call it again with a JSON "
                'object like {"summary": "..."}.'
            )
    if not isinstance(arguments, Mapping):
        return ToolRefusal(
            'new_session arguments must be a JSON object like {"summary": "..."}, got '
            f"{type(arguments).__name__}."
        )
    summary = arguments.get("summary")
    if summary is None or (isinstance(summary, str) and not summary.strip()):
        return ToolRefusal(_EMPTY_SUMMARY)
    if not isinstance(summary, str):
        return ToolRefusal(
            f"new_session's summary must be a string, got {type(summary).__name__}. Call it "
            "again with the summary as text."
        )
    return summary.strip()
