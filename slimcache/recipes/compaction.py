"""Compaction the model drives itself: a context status each turn and a ``new_session`` tool.

Two modes, as in Crush's compaction proposal:

- ``"llm"``: each turn the model is told how full its context is (a ``<context_status>``
  system message) and is offered the ``new_session`` tool. When it judges the context too full
  it calls the tool with a summary; the conversation continues in a new thread whose first
  message carries that summary.
- ``"auto"``: no status message and no tool; automatic compaction stays with
  :class:`~slimcache.SummarizeCompressor`.

What is persisted, per thread (keys from :class:`~slimcache.stores.ThreadKeys`):

- ``ThreadKeys(new).session``: the new session's record, its summary and first message;
- ``ThreadKeys(old).link``: the link from the old thread to the new one;

so a stateless server that only knows an old thread id finds the current session with
:meth:`Compaction.current_session`, after a restart too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from slimcache._exceptions import ConfigurationError, InvalidInput, StoreError
from slimcache.core.results import Stats
from slimcache.core.settings.checks import check_choice, check_template
from slimcache.core.settings.compressor import DEFAULTS, check_fields
from slimcache.core.store_argument import close_owned_store, open_store_argument
from slimcache.core.store_io import StoreIO
from slimcache.messages import (
    NON_TEXT_PART_TOKENS,
    Message,
    TokenCounter,
    check_messages,
    count_message_tokens,
)
from slimcache.recipes.compaction_tool import (
    ContextStatus,
    NewSession,
    SessionLink,
    ToolRefusal,
    check_call_id,
    parse_summary,
)
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import Store, positive_int

__all__ = [
    "DEFAULT_SESSION_TEMPLATE",
    "NEW_SESSION_TOOL",
    "Compaction",
    "CompactionMode",
    "ContextStatus",
    "NewSession",
    "ToolRefusal",
]

logger = logging.getLogger("slimcache")

CompactionMode = Literal["auto", "llm"]
"""``"llm"``: the model compacts through the ``new_session`` tool; ``"auto"``: it does not."""

ToolApi = Literal["openai", "anthropic"]
"""The API a tool definition is shaped for: Chat Completions (``openai``) or Messages."""

NEW_SESSION_TOOL = "new_session"
"""The name of the tool the model calls to continue in a new session."""

DEFAULT_SESSION_TEMPLATE = (
    "This session continues an earlier one. Summary of that session:\n{summary}"
)
"""Text of a new session's first message; ``{summary}`` is the summary the model wrote."""

# Links are followed one store read at a time; real chains are a handful of sessions long.
_MAX_HOPS = 1000

_SUMMARY_DESCRIPTION = (
    "What the current session was working on, what has been accomplished and what remains to "
    "be done. It becomes the first message of the new session, which sees nothing else."
)

_TOOL_DESCRIPTION = """\
Start a fresh session that carries on with the current task from a summary you write, \
freeing the context window.

When to use: every turn carries a <context_status> message with used_pct, used_tokens, \
remaining_tokens and context_window. Call new_session when you judge the context too full to \
continue well: by default once used_pct reaches 75, preferably at a natural break in the work.

The summary is all the new session will know. Include:
1. the task being worked on;
2. what has been accomplished in this session;
3. what remains to be done, in detail;
and any critical context (file paths, decisions, findings, open questions) and the user's \
standing instructions, these about new_session included.

Once called, this session ends and the new one starts with your summary as its first message."""

_STATUS_HINT = (
    "When you judge the context too full to continue well, call the new_session tool with a "
    "summary of the task, what is done and what remains: the conversation then continues in a "
    "fresh session that starts from your summary."
)

_ALREADY_CONTINUED = (
    "new_session was already called for this conversation: it continues in session {thread}. "
    "Carry on with the task there."
)
_NOT_OFFERED = (
    "new_session is not available: this conversation's context is compacted automatically. "
    "Carry on with the task."
)


def _derived_thread_id(previous: str | int, tool_call_id: str) -> str:
    """The new thread id for a given call: the same call always gives the same id."""
    seed = f"slimcache-session-v1\x00{previous}\x00{tool_call_id}"
    digest = hashlib.blake2b(seed.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"session-{digest}"


def _block_tokens(part: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens of an Anthropic ``tool_use`` or ``tool_result`` content block."""
    if part.get("type") == "tool_use":
        arguments = json.dumps(part.get("input", {}), ensure_ascii=False, default=str)
        return counter(str(part.get("name", ""))) + counter(arguments)
    content = part.get("content")
    if isinstance(content, str):
        return counter(content)
    total = 0
    for item in content if isinstance(content, list) else ():
        if isinstance(item, Mapping) and item.get("type") == "text":
            total += counter(str(item.get("text", "")))
        else:
            total += NON_TEXT_PART_TOKENS
    return total


_TOOL_BLOCKS = ("tool_use", "tool_result")


class Compaction:
    """Lets the model decide when to compact: a context status each turn and a ``new_session``
    tool that carries a summary into a new thread.

    In ``"llm"`` mode, add :meth:`status_message` to every request (or use :meth:`with_status`)
    and offer :meth:`tools`; when the model calls ``new_session``, pass the arguments to
    :meth:`handle_new_session`. In ``"auto"`` mode there is no status message and no tool: keep
    compressing with :class:`~slimcache.SummarizeCompressor`.

    Args:
        mode: ``"llm"`` or ``"auto"`` (the default, as in Crush).
        context_window: The model's context window in tokens.
        store: Where session records and links live: a store, a store URL
            (``"redis://localhost:6379/0"``, opened with :func:`~slimcache.open_store` and
            closed by :meth:`aclose`), or ``None`` to keep them in this process (a
            :class:`~slimcache.MemoryStore`).
        namespace: Namespace of every store key (``"myapp"`` gives ``myapp:thread_...``).
        instructions: Your own instructions on when and how to call ``new_session`` and what
            the summary must hold. They are appended to the tool's description, where the model
            reads how to use the tool, marked as taking precedence over its defaults; the
            per-turn status message stays a short, fixed hint.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``); the same rule as
            the compressor's, so the figures agree.
        message_overhead: Tokens added per message for role and framing.
        session_role: Role of a new session's first message: ``"user"`` (the default; accepted
            by both the Chat Completions and the Anthropic Messages API) or ``"system"``.
        session_template: Text of a new session's first message; must contain ``{summary}``.
        ttl: Seconds session records and links live (``None``: until deleted).
        store_timeout: Seconds one store call may take before it fails with
            :class:`~slimcache.StoreError` (``None``: no bound beyond the store's own).

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        mode: CompactionMode = "auto",
        *,
        context_window: int,
        store: Store | str | None = None,
        namespace: str = DEFAULTS.namespace,
        instructions: str | None = None,
        token_counter: TokenCounter = DEFAULTS.token_counter,
        message_overhead: int = DEFAULTS.message_overhead,
        session_role: Literal["user", "system"] = "user",
        session_template: str = DEFAULT_SESSION_TEMPLATE,
        ttl: float | None = DEFAULTS.ttl,
        store_timeout: float | None = DEFAULTS.store_timeout,
    ) -> None:
        check_choice("mode", mode, ("auto", "llm"))
        positive_int("context_window", context_window)
        if instructions is not None and (
            not isinstance(instructions, str) or not instructions.strip()
        ):
            raise ConfigurationError("instructions must be a non-empty string or None")
        checked = check_fields(
            namespace=namespace,
            token_counter=token_counter,
            message_overhead=message_overhead,
            ttl=ttl,
            store_timeout=store_timeout,
        )
        check_choice("session_role", session_role, ("user", "system"))
        check_template("session_template", session_template)

        self._mode: CompactionMode = mode
        self._context_window = context_window
        self._store, self._owns_store = open_store_argument(store)
        self._namespace = namespace
        self._instructions = instructions.strip() if instructions is not None else None
        self._count = checked["token_counter"]
        self._overhead = checked["message_overhead"]
        self._session_role = session_role
        self._session_template = session_template
        self._io = StoreIO(
            self._store, Stats(), timeout=checked["store_timeout"], ttl=checked["ttl"]
        )

    # ------------------------------------------------------------------ settings

    @property
    def mode(self) -> CompactionMode:
        """``"llm"`` or ``"auto"``."""
        return self._mode

    @property
    def context_window(self) -> int:
        """The model's context window in tokens."""
        return self._context_window

    @property
    def store(self) -> Store:
        """The store session records and links are kept in."""
        return self._store

    async def aclose(self) -> None:
        """Close the store if this instance opened it from a URL; a store passed in stays open."""
        await close_owned_store(self._store, self._owns_store)

    async def __aenter__(self) -> Compaction:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ each turn

    def context_status(
        self, messages: Sequence[Message], *, extra_tokens: int = 0
    ) -> ContextStatus:
        """Measure how full the context is with ``messages``, in either mode.

        Tokens are counted with ``token_counter`` plus ``message_overhead`` per message, as
        the compressor counts them; Anthropic ``tool_use`` and ``tool_result`` blocks count
        their input and content, other non-text parts a flat 85.

        Args:
            messages: The messages the request will send (without the status message).
            extra_tokens: Tokens sent besides the messages, e.g. tool definitions or a system
                prompt passed separately.

        Raises:
            InvalidInput: A message is malformed, or ``extra_tokens`` is not an integer >= 0.
        """
        if isinstance(extra_tokens, bool) or not isinstance(extra_tokens, int) or extra_tokens < 0:
            raise InvalidInput(f"extra_tokens must be an integer >= 0, got {extra_tokens!r:.80}")
        checked = check_messages(messages, self._count, self._overhead)
        used = extra_tokens
        for message, tokens in zip(checked.messages, checked.tokens, strict=True):
            used += self._anthropic_tokens(message, tokens)
        return ContextStatus.measure(used, self._context_window)

    def _anthropic_tokens(self, message: Message, tokens: int) -> int:
        content = message.get("content")
        if not isinstance(content, list) or not any(
            part.get("type") in _TOOL_BLOCKS for part in content
        ):
            return tokens
        rest = [part for part in content if part.get("type") not in _TOOL_BLOCKS]
        total = count_message_tokens({**message, "content": rest}, self._count, self._overhead)
        for part in content:
            if part.get("type") in _TOOL_BLOCKS:
                total += _block_tokens(part, self._count)
        return total

    def status_message(
        self, messages: Sequence[Message], *, extra_tokens: int = 0
    ) -> dict[str, str] | None:
        """The ``<context_status>`` system message for this turn, or ``None`` in auto mode.

        Its content is the status element followed by a line telling the model it may call
        ``new_session`` when it judges the context too full::

            <context_status>{"used_pct":42,"used_tokens":4200,"remaining_tokens":5800,
            "context_window":10000}</context_status>
            When you judge the context too full to continue well, call the new_session tool ...

        Append it after the conversation (Chat Completions API); with the Anthropic Messages
        API, which takes system text apart from the messages, add its ``content`` to ``system``.
        The figures cover ``messages`` and ``extra_tokens``, not the status message itself.

        Raises:
            InvalidInput: As :meth:`context_status`.
        """
        status = self.context_status(messages, extra_tokens=extra_tokens)
        if self._mode != "llm":
            return None
        return {"role": "system", "content": f"{status.tag()}\n{_STATUS_HINT}"}

    def with_status(
        self, messages: Sequence[Message], *, extra_tokens: int = 0
    ) -> list[dict[str, Any]]:
        """A copy of ``messages`` with this turn's status message appended (llm mode).

        In auto mode the copy is returned unchanged.

        Raises:
            InvalidInput: As :meth:`context_status`.
        """
        status = self.status_message(messages, extra_tokens=extra_tokens)
        copied = [dict(message) for message in messages]
        return copied if status is None else [*copied, status]

    def tools(self, api: ToolApi) -> list[dict[str, Any]]:
        """The tool definitions to offer the model: ``[new_session]`` in llm mode, ``[]`` in auto.

        Args:
            api: ``"openai"`` for the Chat Completions API
                (``{"type": "function", "function": {"name", "description", "parameters"}}``)
                or ``"anthropic"`` for the Messages API (``{"name", "description",
                "input_schema"}``).

        Raises:
            ConfigurationError: ``api`` is neither.
        """
        if api not in ("openai", "anthropic"):
            raise ConfigurationError(f"api must be 'openai' or 'anthropic', got {api!r}")
        if self._mode != "llm":
            return []
        schema = {
            "type": "object",
            "properties": {"summary": {"type": "string", "description": _SUMMARY_DESCRIPTION}},
            "required": ["summary"],
            "additionalProperties": False,
        }
        if api == "openai":
            function = {"name": NEW_SESSION_TOOL, "description": self.tool_description}
            return [{"type": "function", "function": {**function, "parameters": schema}}]
        return [
            {"name": NEW_SESSION_TOOL, "description": self.tool_description, "input_schema": schema}
        ]

    @property
    def tool_description(self) -> str:
        """The ``new_session`` tool's description, with your ``instructions`` appended."""
        if self._instructions is None:
            return _TOOL_DESCRIPTION
        return (
            f"{_TOOL_DESCRIPTION}\n\nInstructions from the user, which take precedence over the "
            f"defaults above:\n{self._instructions}"
        )

    # ------------------------------------------------------------------ the tool call

    async def handle_new_session(
        self,
        arguments: object,
        *,
        thread_id: str | int,
        tool_call_id: str | None = None,
        new_thread_id: str | None = None,
    ) -> NewSession | ToolRefusal:
        """Start a new session from the model's ``new_session`` call, or refuse the call.

        A :class:`ToolRefusal` (send it back with ``openai_result`` or ``anthropic_result``; the
        model can retry) is returned, and nothing written, when the arguments are not a JSON
        object or dict, when the summary is missing, not a string, empty or only whitespace,
        in auto mode, where the tool is not offered, and when the thread was already continued
        by another call (its session has ended: the error names the session it continues in).

        Otherwise the new session's record (its summary and first message) is written under
        the new thread, ``ThreadKeys(new_thread_id).session``, and then the link
        ``ThreadKeys(thread_id).link``, the commit point. The new thread id is
        ``new_thread_id`` if given; else, with a ``tool_call_id``, derived from the old thread
        id and the call id (``session-`` and 32 hex digits), so handling the same call again
        (a retried request, another server) returns the same session without writing it again;
        else
        random (``session-`` and a UUID4's hex).

        Args:
            arguments: The call's arguments: the JSON string of a Chat Completions tool call
                (``function.arguments``) or the dict of an Anthropic ``tool_use`` block
                (``input``).
            thread_id: The thread the model called the tool from.
            tool_call_id: The call's id (``id`` of the tool call or ``tool_use`` block); kept
                on the result so formatting it needs no id.
            new_thread_id: The new session's thread id, if you choose it yourself.

        Returns:
            The :class:`NewSession`, or the :class:`ToolRefusal` to send back.

        Raises:
            InvalidInput: ``thread_id``, ``tool_call_id`` or ``new_thread_id`` is malformed
                (checked before anything is written).
            StoreError: The store failed; if the link could not be written, the session record
                written before it is removed again.
        """
        old_keys = ThreadKeys(thread_id, self._namespace)
        call_id = check_call_id("tool_call_id", tool_call_id)
        if new_thread_id is not None:
            self._check_new_thread_id(old_keys, new_thread_id)
        if self._mode != "llm":
            return ToolRefusal(_NOT_OFFERED, call_id)
        summary = parse_summary(arguments)
        if isinstance(summary, ToolRefusal):
            return ToolRefusal(summary.message, call_id)

        if new_thread_id is None:
            if call_id is not None:
                new_thread_id = _derived_thread_id(thread_id, call_id)
            else:
                new_thread_id = f"session-{uuid.uuid4().hex}"
        new_keys = ThreadKeys(new_thread_id, self._namespace)
        if call_id is not None:
            existing = NewSession.parse(
                await self._io.get(new_keys.session), thread=new_keys.encoded
            )
            if existing is not None and existing.tool_call_id == call_id:
                await self._relink(old_keys.link, old_keys.encoded, existing)
                return existing
        if (ended := await self._continued(old_keys, call_id)) is not None:
            return ended
        session = NewSession(
            thread_id=new_thread_id,
            previous_thread_id=thread_id,
            summary=summary,
            first_message={
                "role": self._session_role,
                "content": self._session_template.format(summary=summary),
            },
            created_at=time.time(),
            tool_call_id=call_id,
        )
        return await self._start(session, new_keys, old_keys)

    async def _continued(self, old_keys: ThreadKeys, call_id: str | None) -> ToolRefusal | None:
        """The error for a thread another call already continued: its session has ended, and
        a late call must not re-point its link. ``None`` when it never was continued."""
        link = SessionLink.parse(await self._io.get(old_keys.link), thread=old_keys.encoded)
        if link is None:
            return None
        return ToolRefusal(_ALREADY_CONTINUED.format(thread=link.next_thread_id), call_id)

    def _check_new_thread_id(self, old_keys: ThreadKeys, new_thread_id: object) -> None:
        """Refuse a chosen new thread id that is no string, or is the old thread's."""
        if not isinstance(new_thread_id, str):
            raise InvalidInput(
                f"new_thread_id must be a string, got {type(new_thread_id).__name__}"
            )
        if ThreadKeys(new_thread_id, self._namespace).encoded == old_keys.encoded:
            raise InvalidInput("new_thread_id must differ from thread_id")

    async def _start(
        self, session: NewSession, new_keys: ThreadKeys, old_keys: ThreadKeys
    ) -> NewSession | ToolRefusal:
        """Write the session's record, then the link to it (the commit point).

        On stores with compare-and-set the link is written only if the old thread has none, so
        of two calls continuing one thread at once, one wins and the other gets a ToolRefusal.
        """
        session_key, link_key = new_keys.session, old_keys.link
        call_id, new_thread_id = session.tool_call_id, session.thread_id
        await self._io.set(session_key, session.to_json())
        link = SessionLink(new_thread_id, call_id, session.created_at).to_json(old_keys.encoded)
        try:
            if self._io.compares:
                linked = await self._io.compare_and_set(link_key, None, link)
            else:
                await self._io.set(link_key, link)
                linked = True
        except StoreError:
            await self._forget(session_key)
            raise
        if linked:
            return session
        await self._forget(session_key)
        won = SessionLink.parse(await self._io.get(link_key), thread=old_keys.encoded)
        thread = won.next_thread_id if won is not None else "another thread"
        return ToolRefusal(_ALREADY_CONTINUED.format(thread=thread), call_id)

    async def _relink(self, link_key: str, thread: str, session: NewSession) -> None:
        """On a repeated call, write the link again only if it is missing.

        A link to a newer session is left alone: the old thread has moved on since.
        """
        if SessionLink.parse(await self._io.get(link_key), thread=thread) is None:
            link = SessionLink(session.thread_id, session.tool_call_id, session.created_at)
            await self._io.set(link_key, link.to_json(thread))

    async def _forget(self, key: str) -> None:
        """Undo a write whose commit failed; a failure here is logged, the first one raised."""
        try:
            await self._io.delete(key)
        except StoreError as exc:
            logger.warning("could not remove %s after a failed new_session: %s", key, exc)

    # ------------------------------------------------------------------ finding sessions

    async def current_session(self, thread_id: str | int) -> str | int:
        """Follow the links from ``thread_id`` to the newest session it was continued in.

        One store read per link. A stateless server that receives an old thread id calls this
        to find where the conversation lives now; the links are in the store, so they survive
        restarts.

        Returns:
            The newest thread id, or ``thread_id`` itself if it was never continued.

        Raises:
            InvalidInput: ``thread_id`` is malformed.
            StoreError: The store failed.
        """
        current: str | int = thread_id
        keys = ThreadKeys(current, self._namespace)
        seen = {keys.encoded}
        for _ in range(_MAX_HOPS):
            link = SessionLink.parse(await self._io.get(keys.link), thread=keys.encoded)
            if link is None:
                return current
            try:
                next_keys = ThreadKeys(link.next_thread_id, self._namespace)
            except InvalidInput:
                logger.warning("ignoring session link of thread %s to an empty id", keys.encoded)
                return current
            if next_keys.encoded in seen:
                logger.warning("session links of thread %s form a cycle", thread_id)
                return current
            seen.add(next_keys.encoded)
            current, keys = link.next_thread_id, next_keys
        logger.warning("stopped following session links of %s after %d", thread_id, _MAX_HOPS)
        return current

    async def session(self, thread_id: str | int) -> NewSession | None:
        """The record of a session started by ``new_session``, or ``None`` for other threads.

        Use it to rebuild a new session's first message (``record.messages``) from the store.

        Raises:
            InvalidInput: ``thread_id`` is malformed.
            StoreError: The store failed.
        """
        keys = ThreadKeys(thread_id, self._namespace)
        return NewSession.parse(await self._io.get(keys.session), thread=keys.encoded)
