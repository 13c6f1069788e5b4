"""The stateful compressor: one conversation's rolling summary and verbatim window, in process.

It is convo-compress's model: messages are appended to a window; when the window passes the
trigger, its oldest whole units are folded into a running summary with only those messages
sent to the summarizer. Nothing is cached in a store; :meth:`ConversationCompressor.serialize`
gives a JSON-safe snapshot to keep wherever you like, and
:meth:`ConversationCompressor.deserialize` restores it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from slimcache._exceptions import ConfigurationError, InvalidInput, SummarizerError
from slimcache.core.compressor import DEFAULT_SUMMARY_TEMPLATE
from slimcache.core.plan import eviction_boundary
from slimcache.core.policy import (
    AnyOf,
    ContextWindow,
    EvictableTokens,
    Keep,
    KeepMessages,
    KeepTokens,
    Manual,
    MessageThreshold,
    TokenThreshold,
    Trigger,
    WindowState,
    is_settled,
)
from slimcache.core.results import CompressEvent
from slimcache.core.settings import (
    call_hook,
    check_callables,
    check_seconds_or_none,
    check_summary_format,
    resolve_policies,
)
from slimcache.core.strategies import (
    Concat,
    Extend,
    Hybrid,
    Replace,
    Strategy,
    StrategyName,
    resolve_strategy,
)
from slimcache.core.summarizer import Prompts, Summarizer, SummaryContext, Task, call_summarizer
from slimcache.messages import (
    DEFAULT_MESSAGE_OVERHEAD,
    PINNED_ROLES,
    CheckedMessages,
    Message,
    TokenCounter,
    approx_tokens,
    check_messages,
    count_message_tokens,
)

__all__ = ["STATE_VERSION", "ConversationCompressor", "ConversationStats"]

logger = logging.getLogger("slimcache")

Hook = Any

STATE_VERSION = 1
"""The version of the snapshot :meth:`ConversationCompressor.serialize` writes."""
_STATE_FORMAT = "slimcache.conversation"
_COUNTERS = (
    "total_messages",
    "messages_compressed",
    "total_input_tokens",
    "summarization_calls",
    "summarizer_input_tokens",
    "summarizer_errors",
)


@dataclass(frozen=True)
class ConversationStats:
    """A snapshot of a :class:`ConversationCompressor`'s counters and state.

    Counters run since creation (or the last ``reset_stats``); the others describe the
    compressor as it is now.

    Attributes:
        total_messages: Messages added (counter).
        messages_compressed: Messages folded into the summary (counter).
        messages_in_window: Messages kept verbatim now, pinned system messages included.
        total_input_tokens: Tokens of the messages added (counter).
        summary_tokens: Tokens of the current summary text (0 without one).
        window_tokens: Tokens of the messages kept verbatim now.
        compression_ratio: ``messages_compressed / total_messages`` (0.0 before any message).
        summarization_calls: Summarizer calls made (counter).
        summarizer_input_tokens: Tokens sent to the summarizer: prompts, previous summaries and
            messages (counter).
        summarizer_errors: Compressions that failed because the summarizer did (counter).
    """

    total_messages: int
    messages_compressed: int
    messages_in_window: int
    total_input_tokens: int
    summary_tokens: int
    window_tokens: int
    compression_ratio: float
    summarization_calls: int
    summarizer_input_tokens: int
    summarizer_errors: int


@dataclass
class _Counters:
    total_messages: int = 0
    messages_compressed: int = 0
    total_input_tokens: int = 0
    summarization_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_errors: int = 0


class ConversationCompressor:
    """One conversation's rolling summary and verbatim window, kept in this process.

    Add messages as the conversation grows with :meth:`add_message` / :meth:`add_messages`
    (synchronous: they only check and append). Compression happens in the async methods:
    :meth:`get_compressed` first compresses when the window is over the trigger, and
    :meth:`compress` compresses now. Each compression sends the summarizer only the messages
    leaving the window (with the previous summary, depending on the strategy), so every message
    is summarized once.

    Leading system (and developer) messages are pinned: never summarized, always first. An
    assistant message with tool calls and its tool results are one unit, never split, and the
    last unit always stays verbatim.

    If the summarizer fails, the window is left exactly as it was (the messages that were
    leaving it stay, in order), ``on_error`` is called with them, and :class:`SummarizerError`
    is raised with the summarizer's exception as its ``__cause__``.

    Args:
        summarizer: ``(messages, context) -> str``, async or sync; see :class:`SummaryContext`.
        trigger: When :meth:`get_compressed` compresses (default: more than 20 messages in the
            window); :class:`Manual` never does, only :meth:`compress`.
        keep: How much stays verbatim after compressing (default: the last 12 messages).
        strategy: How the summary and the messages leaving the window combine: :class:`Extend`
            (the default), :class:`Concat`, :class:`Hybrid`, :class:`Replace`, :class:`Custom`,
            your own :class:`Strategy`, or a shortcut name.
        max_summary_tokens: Token budget handed to the summarizer.
        prompts: The default prompts given to the summarizer.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        message_overhead: Tokens added per message for role and framing.
        summary_role: Role of the summary message: ``"system"`` (default), ``"developer"``,
            ``"user"`` or ``"assistant"``.
        summary_template: Text of the summary message; ``{summary}``, ``{start}``, ``{end}`` and
            ``{count}`` are filled in.
        summarizer_timeout: Seconds one summarizer call may take.
        on_evict: Hook ``(messages, reason)`` called with the messages folded into the summary.
        on_compress: Hook ``(CompressEvent)`` called after each compression.
        on_error: Hook ``(exception, messages)`` called when the summarizer fails, with the
            messages that stay in the window.

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        trigger: Trigger | None = None,
        keep: Keep | None = None,
        strategy: Strategy | StrategyName = "extend",
        max_summary_tokens: int = 1000,
        prompts: Prompts | None = None,
        token_counter: TokenCounter = approx_tokens,
        message_overhead: int = DEFAULT_MESSAGE_OVERHEAD,
        summary_role: str = "system",
        summary_template: str = DEFAULT_SUMMARY_TEMPLATE,
        summarizer_timeout: float | None = None,
        on_evict: Hook | None = None,
        on_compress: Hook | None = None,
        on_error: Hook | None = None,
    ) -> None:
        if not callable(summarizer):
            raise ConfigurationError("summarizer must be a callable (messages, context) -> str")
        self._trigger, self._keep = resolve_policies(trigger, keep, default_keep=12)
        self._strategy = resolve_strategy(strategy)
        if prompts is not None and not isinstance(prompts, Prompts):
            raise ConfigurationError("prompts must be a Prompts(...) object")
        if not callable(token_counter):
            raise ConfigurationError("token_counter must be a callable (text) -> int")
        check_summary_format(
            max_summary_tokens=max_summary_tokens,
            message_overhead=message_overhead,
            summary_role=summary_role,
            summary_template=summary_template,
        )
        summarizer_timeout = check_seconds_or_none("summarizer_timeout", summarizer_timeout)
        check_callables({"on_evict": on_evict, "on_compress": on_compress, "on_error": on_error})

        self._summarizer = summarizer
        self._max_summary_tokens = max_summary_tokens
        self._prompts = prompts or Prompts()
        self._count = token_counter
        self._overhead = message_overhead
        self._summary_role = summary_role
        self._summary_template = summary_template
        self._timeout = None if summarizer_timeout is None else float(summarizer_timeout)
        self._hooks: dict[str, Hook | None] = {
            "on_evict": on_evict,
            "on_compress": on_compress,
            "on_error": on_error,
        }
        self._lock = asyncio.Lock()
        self._reset_state()

    def _reset_state(self) -> None:
        self._pinned: list[dict[str, Any]] = []
        self._pinned_tokens: list[int] = []
        self._window: list[dict[str, Any]] = []
        self._window_tokens: list[int] = []
        # For each window message, the window index of the last message of its unit.
        self._unit_end: list[int] = []
        self._summary: str | None = None
        self._summarized = 0
        self._counters = _Counters()
        # Bumped by clear(): a compression that was running then discards its result.
        self._generation = getattr(self, "_generation", 0) + 1

    # ------------------------------------------------------------------ adding messages

    def add_message(self, message: Message) -> None:
        """Append one message to the window; no compression happens here.

        Raises:
            InvalidInput: The message is malformed, is not JSON-serializable, or is a tool
                result that answers no tool call of the assistant message before it. Nothing
                is added.
        """
        self.add_messages([message])

    def add_messages(self, messages: Sequence[Message]) -> None:
        """Append messages to the window in order; either all are added or none.

        Raises:
            InvalidInput: A message is malformed (its index in ``messages`` is named), is not
                JSON-serializable, or a tool result answers no tool call of the assistant
                message before it. Nothing is added.
        """
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise InvalidInput(f"messages must be a list of dicts, got {type(messages).__name__}")
        if not messages:
            return
        # The open unit (the last assistant message with tool calls and its results so far)
        # is checked again with the new messages, so a tool result must answer it.
        tail_start = self._last_unit_start()
        tail = self._window[tail_start:]
        try:
            checked = check_messages([*tail, *messages], self._count, self._overhead)
        except InvalidInput as exc:
            if exc.index is None:
                raise
            raise InvalidInput(exc.rule, index=exc.index - len(tail)) from None
        copies = [_json_copy(message, index) for index, message in enumerate(messages)]
        new_tokens = checked.tokens[len(tail) :]

        pinning = not self._window and self._summarized == 0
        pinned = 0
        if pinning:
            while pinned < len(copies) and copies[pinned].get("role") in PINNED_ROLES:
                pinned += 1
        self._pinned.extend(copies[:pinned])
        self._pinned_tokens.extend(new_tokens[:pinned])
        # Unit ends of the tail and the new window messages, as window indices.
        shift = tail_start - pinned
        ends = [end + tail_start for end in checked.unit_end[: len(tail)]]
        ends.extend(end + shift for end in checked.unit_end[len(tail) + pinned :])
        self._unit_end[tail_start:] = ends
        self._window.extend(copies[pinned:])
        self._window_tokens.extend(new_tokens[pinned:])
        self._counters.total_messages += len(copies)
        self._counters.total_input_tokens += sum(new_tokens)

    def _last_unit_start(self) -> int:
        """Window index of the first message of the last unit (0 for an empty window)."""
        index = len(self._window) - 1
        while index > 0 and self._window[index].get("role") == "tool":
            index -= 1
        return max(index, 0)

    # ------------------------------------------------------------------ reading

    def get_messages(self) -> list[dict[str, Any]]:
        """The messages kept verbatim: the pinned system messages, then the window.

        This never compresses; it is :meth:`get_compressed` without the summary message.
        """
        return [dict(m) for m in (*self._pinned, *self._window)]

    def get_summary(self) -> str | None:
        """The current summary text, or ``None`` before the first compression."""
        return self._summary

    async def get_compressed(self) -> list[dict[str, Any]]:
        """Compress if the window is over the trigger, then return the messages to send.

        Returns:
            ``[pinned system messages..., summary message, *window]``, the summary message
            only once there is a summary (the same shape ``SummarizeCompressor`` returns).

        Raises:
            SummarizerError: The summarizer failed; the window is left as it was.
        """
        await self._compress(None, force=False)
        messages = [dict(m) for m in self._pinned]
        if self._summary is not None:
            messages.append(self._summary_message(self._summary))
        messages.extend(dict(m) for m in self._window)
        return messages

    async def compress(self, evict_count: int | None = None) -> int:
        """Fold the oldest messages of the window into the summary now.

        Args:
            evict_count: Evict at least this many messages: whole units are taken from the
                front until the count is reached, so a tool-call unit is never split (asking
                for 1 evicts 2 when the oldest unit is a tool call and its result). The last
                unit always stays verbatim, so fewer may be evicted. ``None``: evict down to
                the keep policy, whatever the trigger says.

        Returns:
            How many messages were folded into the summary (0 when none could be).

        Raises:
            InvalidInput: ``evict_count`` is not a positive integer.
            SummarizerError: The summarizer failed; the window is left as it was.
        """
        if evict_count is not None and (
            isinstance(evict_count, bool) or not isinstance(evict_count, int) or evict_count < 1
        ):
            raise InvalidInput(f"evict_count must be a positive integer, got {evict_count!r}")
        return await self._compress(evict_count, force=True)

    # ------------------------------------------------------------------ stats and state

    def get_stats(self) -> ConversationStats:
        """A snapshot of the counters and the current window and summary sizes."""
        counters = self._counters
        total = counters.total_messages
        return ConversationStats(
            total_messages=total,
            messages_compressed=counters.messages_compressed,
            messages_in_window=len(self._pinned) + len(self._window),
            total_input_tokens=counters.total_input_tokens,
            summary_tokens=self._count(self._summary) if self._summary is not None else 0,
            window_tokens=sum(self._pinned_tokens) + sum(self._window_tokens),
            compression_ratio=counters.messages_compressed / total if total else 0.0,
            summarization_calls=counters.summarization_calls,
            summarizer_input_tokens=counters.summarizer_input_tokens,
            summarizer_errors=counters.summarizer_errors,
        )

    def reset_stats(self) -> None:
        """Zero the counters; the summary and the window are untouched."""
        self._counters = _Counters()

    def clear(self) -> None:
        """Forget everything: the summary, the window and the counters.

        A compression still running when this is called discards its result.
        """
        self._reset_state()

    def serialize(self) -> dict[str, Any]:
        """Return a JSON-safe snapshot of the whole state, for :meth:`deserialize`.

        The snapshot holds a ``"version"``, the summary, the pinned and window messages, the
        counters, and the settings that can be written as JSON. Functions (the summarizer,
        the token counter, hooks, a :class:`Custom` merge) cannot be, and neither can trigger,
        keep or strategy objects of your own: they are written as ``null`` and must be given
        again to :meth:`deserialize`. It survives ``json.loads(json.dumps(state))``.
        """
        counters = self._counters
        return {
            "format": _STATE_FORMAT,
            "version": STATE_VERSION,
            "summary": self._summary,
            "summarized": self._summarized,
            "pinned": copy.deepcopy(self._pinned),
            "window": copy.deepcopy(self._window),
            "counters": {name: getattr(counters, name) for name in _COUNTERS},
            "settings": {
                "trigger": _trigger_to_json(self._trigger),
                "keep": _keep_to_json(self._keep),
                "strategy": _strategy_to_json(self._strategy),
                "max_summary_tokens": self._max_summary_tokens,
                "prompts": {
                    "summarize": self._prompts.summarize,
                    "extend": self._prompts.extend,
                    "condense": self._prompts.condense,
                },
                "message_overhead": self._overhead,
                "summary_role": self._summary_role,
                "summary_template": self._summary_template,
                "summarizer_timeout": self._timeout,
            },
        }

    @classmethod
    def deserialize(
        cls,
        state: Mapping[str, Any],
        summarizer: Summarizer,
        *,
        trigger: Trigger | None = None,
        keep: Keep | None = None,
        strategy: Strategy | StrategyName | None = None,
        max_summary_tokens: int | None = None,
        prompts: Prompts | None = None,
        token_counter: TokenCounter = approx_tokens,
        message_overhead: int | None = None,
        summary_role: str | None = None,
        summary_template: str | None = None,
        summarizer_timeout: float | None = None,
        on_evict: Hook | None = None,
        on_compress: Hook | None = None,
        on_error: Hook | None = None,
    ) -> ConversationCompressor:
        """Restore a compressor from :meth:`serialize`'s snapshot.

        Settings not given here are taken from the snapshot; the summarizer, the token counter
        and the hooks are not in it and are given here.

        Args:
            state: The snapshot (as returned, or after a JSON round trip).
            summarizer: The summarizer to use from now on.
            trigger: Overrides the snapshot's; required when it holds ``null`` (an object of
                your own). Likewise ``keep`` and ``strategy`` (a :class:`Custom` strategy is
                always given again).
            max_summary_tokens: Overrides the snapshot's; likewise ``prompts``,
                ``message_overhead``, ``summary_role``, ``summary_template`` and
                ``summarizer_timeout``.
            token_counter: Counts a text's tokens; window token counts are recomputed with it.
            on_evict: Hook, as in the constructor; likewise ``on_compress`` and ``on_error``.

        Raises:
            InvalidInput: The snapshot is malformed, or has another format or version.
            ConfigurationError: A setting is missing from the snapshot and not given, or a
                given one is invalid.
        """
        data = _check_state(state)
        saved = data["settings"]
        try:
            saved_trigger = _trigger_from_json(saved.get("trigger"))
            saved_keep = _keep_from_json(saved.get("keep"))
            saved_strategy = _strategy_from_json(saved.get("strategy"))
            saved_prompts = _prompts_from_json(saved.get("prompts"))
        except (ConfigurationError, KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"state['settings'] is malformed: {exc}") from None

        def pick(given: Any, key: str) -> Any:
            return given if given is not None else saved.get(key)

        compressor = cls(
            summarizer,
            trigger=_given_or_saved("trigger", trigger, saved_trigger),
            keep=_given_or_saved("keep", keep, saved_keep),
            strategy=_given_or_saved("strategy", strategy, saved_strategy),
            max_summary_tokens=pick(max_summary_tokens, "max_summary_tokens"),
            prompts=prompts if prompts is not None else saved_prompts,
            token_counter=token_counter,
            message_overhead=pick(message_overhead, "message_overhead"),
            summary_role=pick(summary_role, "summary_role"),
            summary_template=pick(summary_template, "summary_template"),
            summarizer_timeout=pick(summarizer_timeout, "summarizer_timeout"),
            on_evict=on_evict,
            on_compress=on_compress,
            on_error=on_error,
        )
        compressor._restore(data)
        return compressor

    def _restore(self, data: dict[str, Any]) -> None:
        """Load the checked snapshot's messages, summary and counters."""
        pinned: list[dict[str, Any]] = data["pinned"]
        window: list[dict[str, Any]] = data["window"]
        checked_pinned = _check_state_messages(pinned, "pinned", self._count, self._overhead)
        if checked_pinned.pinned != len(pinned):
            raise InvalidInput("state['pinned'] may hold only system and developer messages")
        checked = _check_state_messages(window, "window", self._count, self._overhead)
        if data["summary"] is not None and not window:
            raise InvalidInput("state has a summary but an empty window")
        self._pinned = [_json_copy(m, i) for i, m in enumerate(pinned)]
        self._pinned_tokens = list(checked_pinned.tokens)
        self._window = [_json_copy(m, i) for i, m in enumerate(window)]
        self._window_tokens = list(checked.tokens)
        self._unit_end = list(checked.unit_end)
        self._summary = data["summary"]
        self._summarized = data["summarized"]
        self._counters = _Counters(**{name: data["counters"][name] for name in _COUNTERS})

    # ------------------------------------------------------------------ compressing

    def _checked_window(self) -> CheckedMessages:
        # The boundary search reads only tokens and unit ends; nothing is fingerprinted.
        return CheckedMessages(self._window, self._window_tokens, 0, self._unit_end)

    def _summary_message(self, summary: str) -> dict[str, Any]:
        start = len(self._pinned)
        end = start + self._summarized - 1
        content = self._summary_template.format(
            summary=summary, start=start, end=end, count=self._summarized
        )
        return {"role": self._summary_role, "content": content}

    def _window_state(self, checked: CheckedMessages) -> WindowState:
        summary_tokens = (
            count_message_tokens(self._summary_message(self._summary), self._count, self._overhead)
            if self._summary is not None
            else 0
        )
        kept_to = eviction_boundary(checked, 0, self._keep)
        evictable = 0 if kept_to is None else kept_to + 1
        return WindowState(
            messages=len(self._window),
            tokens=sum(self._window_tokens),
            pinned_tokens=sum(self._pinned_tokens),
            summary_tokens=summary_tokens,
            evictable_messages=evictable,
            evictable_tokens=sum(self._window_tokens[:evictable]),
        )

    def _keep_boundary(self, checked: CheckedMessages, summary_tokens: int) -> int | None:
        """Last window index to evict so that the keep policy and the trigger are settled."""
        pinned_tokens = sum(self._pinned_tokens)

        def settled(messages: int, tokens: int) -> bool:
            after = WindowState(messages, tokens, pinned_tokens, summary_tokens)
            return is_settled(self._trigger, after, self._keep)

        return eviction_boundary(checked, 0, self._keep, settled)

    async def _compress(self, evict_count: int | None, *, force: bool) -> int:
        async with self._lock:
            checked = self._checked_window()
            if evict_count is not None:
                boundary = _count_boundary(checked, evict_count)
                reason = f"evict_count={evict_count}"
            else:
                state = self._window_state(checked)
                due = "forced" if force else self._trigger.reason(state)
                if due is None:
                    return 0
                boundary = self._keep_boundary(checked, state.summary_tokens)
                reason = due
            if boundary is None:
                return 0
            return await self._fold(boundary + 1, reason)

    async def _fold(self, count: int, reason: str) -> int:
        """Summarize the first ``count`` window messages into the summary, then drop them."""
        generation = self._generation
        evicted = [dict(m) for m in self._window[:count]]
        before = self._summary
        first = len(self._pinned) + self._summarized
        last = first + count - 1
        calls = 0
        sent_tokens = 0
        started = time.perf_counter()

        async def summarize(task: Task, messages: Sequence[Message], previous: str | None) -> str:
            nonlocal calls, sent_tokens
            prompt = self._prompts.for_task(task).replace(
                "{max_tokens}", str(self._max_summary_tokens)
            )
            start = len(self._pinned) if task == "condense" else first
            context = SummaryContext(
                task=task,
                previous_summary=previous,
                max_tokens=self._max_summary_tokens,
                prompt=prompt,
                thread_id=None,
                start=start,
                end=last if messages or task == "condense" else start - 1,
            )
            sent = self._count(prompt) + sum(
                count_message_tokens(m, self._count, self._overhead) for m in messages
            )
            if previous is not None:
                sent += self._count(previous)
            calls += 1
            sent_tokens += sent
            self._counters.summarization_calls += 1
            self._counters.summarizer_input_tokens += sent
            return await call_summarizer(self._summarizer, messages, context, timeout=self._timeout)

        try:
            try:
                summary = await self._strategy.combine(
                    before,
                    evicted,
                    summarize,
                    count=self._count,
                    max_tokens=self._max_summary_tokens,
                )
            except SummarizerError:
                raise
            except Exception as exc:
                raise SummarizerError(
                    f"strategy {self._strategy.name} failed: {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(summary, str) or not summary.strip():
                raise SummarizerError(
                    f"strategy {self._strategy.name} returned an empty or non-string summary"
                )
        except SummarizerError as exc:
            if generation == self._generation:
                self._counters.summarizer_errors += 1
            # The window was never changed: the messages that were leaving it are still there.
            await self._emit("on_error", exc, evicted)
            raise
        if generation != self._generation:
            logger.info("conversation cleared during a compression; its summary is discarded")
            return 0
        self._summary = summary
        self._summarized += count
        del self._window[:count]
        del self._window_tokens[:count]
        self._unit_end = [end - count for end in self._unit_end[count:]]
        self._counters.messages_compressed += count
        await self._emit("on_evict", evicted, reason)
        event = CompressEvent(
            thread_id=None,
            outcome="extended" if before is not None else "summarized",
            start=len(self._pinned),
            end=last,
            new_messages=count,
            summarizer_calls=calls,
            input_tokens=sent_tokens,
            summary_tokens=self._count(summary),
            elapsed=time.perf_counter() - started,
            reason=reason,
        )
        await self._emit("on_compress", event)
        return count

    async def _emit(self, name: str, *args: Any) -> None:
        await call_hook(name, self._hooks[name], *args)


_T = TypeVar("_T")


def _given_or_saved(name: str, given: _T | None, saved: _T | None) -> _T:
    """The setting given to ``deserialize``, else the snapshot's."""
    if given is not None:
        return given
    if saved is None:
        raise ConfigurationError(
            f"the state's {name} could not be saved (an object of your own, or a Custom merge): "
            f"pass {name}=... to deserialize"
        )
    return saved


def _count_boundary(checked: CheckedMessages, count: int) -> int | None:
    """Last index of the whole units covering at least ``count`` messages from the front.

    The last unit is never included, so fewer messages may be covered.
    """
    total = len(checked)
    boundary: int | None = None
    position = 0
    while position < count and position < total:
        end = checked.unit_end[position]
        if end >= total - 1:
            break
        boundary, position = end, end + 1
    return boundary


def _json_copy(message: Message, index: int) -> dict[str, Any]:
    """A plain JSON copy of a message, so that the state always serializes."""
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(message), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"message must be JSON-serializable to be kept in the state ({exc})", index=index
        ) from None
    return copied


# ---------------------------------------------------------------------- snapshot checks


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_state(state: object) -> dict[str, Any]:
    """Check a snapshot's shape and version; return it as a dict."""
    if not isinstance(state, Mapping):
        raise InvalidInput(f"state must be a dict from serialize(), got {type(state).__name__}")
    if state.get("format") != _STATE_FORMAT:
        raise InvalidInput(
            f"state is not a ConversationCompressor snapshot (format {state.get('format')!r})"
        )
    version = state.get("version")
    if version != STATE_VERSION:
        raise InvalidInput(
            f"state version {version!r} is not supported (this slimcache reads version "
            f"{STATE_VERSION})"
        )
    summary = state.get("summary")
    if summary is not None and (not isinstance(summary, str) or not summary.strip()):
        raise InvalidInput("state['summary'] must be a non-empty string or null")
    summarized = state.get("summarized")
    if not _is_count(summarized):
        raise InvalidInput("state['summarized'] must be an integer >= 0")
    if (summary is None) != (summarized == 0):
        raise InvalidInput("state['summary'] and state['summarized'] disagree")
    for key in ("pinned", "window"):
        if not isinstance(state.get(key), list):
            raise InvalidInput(f"state[{key!r}] must be a list of messages")
    counters = state.get("counters")
    if not isinstance(counters, Mapping) or not all(
        _is_count(counters.get(name)) for name in _COUNTERS
    ):
        raise InvalidInput(f"state['counters'] must hold integers >= 0: {', '.join(_COUNTERS)}")
    settings = state.get("settings")
    if not isinstance(settings, Mapping):
        raise InvalidInput("state['settings'] must be a dict")
    for key, kinds in _SCALAR_SETTINGS.items():
        value = settings.get(key)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise InvalidInput(f"state['settings'][{key!r}] has the wrong type: {value!r:.60}")
    return dict(state)


# The plain settings a snapshot holds, and the JSON types each may have.
_SCALAR_SETTINGS: dict[str, tuple[type, ...]] = {
    "max_summary_tokens": (int,),
    "message_overhead": (int,),
    "summary_role": (str,),
    "summary_template": (str,),
    "summarizer_timeout": (int, float, type(None)),
}


def _check_state_messages(
    messages: list[Any], key: str, counter: TokenCounter, overhead: int
) -> CheckedMessages:
    try:
        return check_messages(messages, counter, overhead)
    except InvalidInput as exc:
        where = f"state[{key!r}][{exc.index}]" if exc.index is not None else f"state[{key!r}]"
        raise InvalidInput(f"{where}: {exc.rule}") from None


# ---------------------------------------------------------------------- settings as JSON


def _trigger_to_json(trigger: Trigger) -> dict[str, Any] | None:
    kind = type(trigger)
    if kind is MessageThreshold:
        assert isinstance(trigger, MessageThreshold)
        return {"type": "messages", "messages": trigger.messages}
    if kind is TokenThreshold:
        assert isinstance(trigger, TokenThreshold)
        return {"type": "tokens", "tokens": trigger.tokens}
    if kind is EvictableTokens:
        assert isinstance(trigger, EvictableTokens)
        return {"type": "evictable_tokens", "tokens": trigger.tokens}
    if kind is ContextWindow:
        assert isinstance(trigger, ContextWindow)
        return {
            "type": "context_window",
            "max_tokens": trigger.max_tokens,
            "fraction": trigger.fraction,
        }
    if kind is Manual:
        return {"type": "manual"}
    if kind is AnyOf:
        assert isinstance(trigger, AnyOf)
        parts = [_trigger_to_json(item) for item in trigger.triggers]
        if any(part is None for part in parts):
            return None
        return {"type": "any_of", "triggers": parts}
    return None


def _trigger_from_json(data: object) -> Trigger | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError(f"trigger must be a dict or null, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "messages":
        return MessageThreshold(data["messages"])
    if kind == "tokens":
        return TokenThreshold(data["tokens"])
    if kind == "evictable_tokens":
        return EvictableTokens(data["tokens"])
    if kind == "context_window":
        return ContextWindow(data["max_tokens"], data["fraction"])
    if kind == "manual":
        return Manual()
    if kind == "any_of":
        parts = data["triggers"]
        if not isinstance(parts, list):
            raise TypeError("any_of triggers must be a list")
        triggers = [_trigger_from_json(part) for part in parts]
        if any(item is None for item in triggers):
            raise ValueError("any_of holds an unknown trigger")
        return AnyOf(*(item for item in triggers if item is not None))
    raise ValueError(f"unknown trigger type {kind!r}")


def _keep_to_json(keep: Keep) -> dict[str, Any] | None:
    if type(keep) is KeepMessages:
        assert isinstance(keep, KeepMessages)
        return {"type": "messages", "messages": keep.messages}
    if type(keep) is KeepTokens:
        assert isinstance(keep, KeepTokens)
        return {"type": "tokens", "tokens": keep.tokens}
    return None


def _keep_from_json(data: object) -> Keep | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError(f"keep must be a dict or null, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "messages":
        return KeepMessages(data["messages"])
    if kind == "tokens":
        return KeepTokens(data["tokens"])
    raise ValueError(f"unknown keep type {kind!r}")


_PLAIN_STRATEGIES: dict[str, type[Strategy]] = {
    "extend": Extend,
    "concat": Concat,
    "replace": Replace,
}


def _strategy_to_json(strategy: Strategy) -> dict[str, Any] | None:
    for name, kind in _PLAIN_STRATEGIES.items():
        if type(strategy) is kind:
            return {"type": name}
    if type(strategy) is Hybrid:
        assert isinstance(strategy, Hybrid)
        return {"type": "hybrid", "max_tokens": strategy.max_tokens}
    return None


def _strategy_from_json(data: object) -> Strategy | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError(f"strategy must be a dict or null, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "hybrid":
        return Hybrid(data.get("max_tokens"))
    if isinstance(kind, str) and kind in _PLAIN_STRATEGIES:
        return _PLAIN_STRATEGIES[kind]()
    raise ValueError(f"unknown strategy type {kind!r}")


def _prompts_from_json(data: object) -> Prompts:
    if data is None:
        return Prompts()
    if not isinstance(data, Mapping):
        raise TypeError(f"prompts must be a dict, got {type(data).__name__}")
    summarize, extend, condense = (data.get(key) for key in ("summarize", "extend", "condense"))
    if not (isinstance(summarize, str) and isinstance(extend, str) and isinstance(condense, str)):
        raise TypeError("prompts must hold the strings summarize, extend and condense")
    return Prompts(summarize, extend, condense)
