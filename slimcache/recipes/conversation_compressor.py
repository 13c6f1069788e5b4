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
import logging
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from slimcache._exceptions import InvalidInput, SummarizerError
from slimcache.core.plan import count_boundary, eviction_boundary
from slimcache.core.policy import (
    Keep,
    Trigger,
    WindowState,
    is_settled,
)
from slimcache.core.results import CompressEvent
from slimcache.core.settings.checks import check_summarizer
from slimcache.core.settings.compressor import DEFAULTS, check_fields
from slimcache.core.settings.groups import (
    Hook,
    call_hook,
    resolve_policies,
    takes_messages_summary_ms,
)
from slimcache.core.strategies import (
    Strategy,
    StrategyName,
    resolve_strategy,
)
from slimcache.core.summarizer import OnOverBudget, Prompts, Summarizer
from slimcache.messages import (
    PINNED_ROLES,
    CheckedMessages,
    Message,
    TokenCounter,
    check_messages,
    count_message_tokens,
)
from slimcache.recipes.compressor_snapshot import (
    COUNTERS,
    STATE_FORMAT,
    STATE_VERSION,
    ConversationStats,
    Counters,
    SummaryCalls,
    check_state,
    given_or_saved,
    json_copy,
    keep_to_json,
    prompts_to_json,
    restored_messages,
    run_strategy,
    saved_objects,
    strategy_to_json,
    trigger_to_json,
)

__all__ = ["STATE_VERSION", "ConversationCompressor", "ConversationStats"]

KEEP_BY_DEFAULT = 12
"""Messages kept verbatim by default: convo-compress's default ``target``."""

logger = logging.getLogger("slimcache")


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
        keep: How much stays verbatim after compressing (default: the last 12 messages, the
            ``target: 12`` of convo-compress's default, so code ported from it keeps its window;
            :class:`SummarizeCompressor` keeps 10).
        strategy: How the summary and the messages leaving the window combine: :class:`Extend`
            (the default), :class:`Concat`, :class:`Hybrid`, :class:`Replace`, :class:`Custom`,
            your own :class:`Strategy`, or a shortcut name. The default is not
            :class:`SummarizeCompressor`'s ``"tree"``: this compressor lets a message go once it
            is summarized, so a tree could never read a merged range's messages again, and its
            state holds the summary's text, not the tree's parts.
        max_summary_tokens: The summary's budget, in tokens counted with ``token_counter``.
            The default prompts ask for it, :class:`SummaryContext` carries it (``max_tokens``), and
            it is enforced: a summary that comes back more than a quarter over it is condensed
            by one more summarizer call (the ``condense`` task), and one still over it raises
            :class:`SummarizerError`, the window left as it was. It holds each summary the
            summarizer returns; the parts :class:`Concat` and :class:`Custom` join may pass it
            together, and :class:`Hybrid` condenses the joined summary once it passes
            ``Hybrid.max_tokens`` (by default this budget).
        prompts: The default prompts given to the summarizer.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        message_overhead: Tokens added per message for role and framing.
        summary_role: Role of the summary message: ``"system"`` (default), ``"developer"``,
            ``"user"`` or ``"assistant"``.
        summary_template: Text of the summary message; ``{summary}``, ``{start}``, ``{end}`` and
            ``{count}`` are filled in.
        summarizer_timeout: Seconds one summarizer call may take.
        on_evict: Hook ``(messages, reason)`` called with the messages folded into the summary.
        on_compress: Hook called after each compression, with a :class:`CompressEvent`; or,
            when it takes two or more positional arguments, convo-compress's
            ``on_compress(messages, summary, ms)``: the messages folded into the summary, the
            new summary and the milliseconds the compression took.
        on_error: Hook ``(exception, messages)`` called when the summarizer fails, with the
            messages that stay in the window.
        on_over_budget: A summary still over ``max_summary_tokens`` after the condense call:
            ``"cut"`` (default) to the budget at a sentence or word boundary, with a warning
            logged, or ``"raise"`` :class:`SummarizerError` (the window stays as it was).

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        trigger: Trigger | None = DEFAULTS.trigger,
        keep: Keep | None = DEFAULTS.keep,
        strategy: Strategy | StrategyName = "extend",
        max_summary_tokens: int = DEFAULTS.max_summary_tokens,
        prompts: Prompts | None = DEFAULTS.prompts,
        token_counter: TokenCounter = DEFAULTS.token_counter,
        message_overhead: int = DEFAULTS.message_overhead,
        summary_role: str = DEFAULTS.summary_role,
        summary_template: str = DEFAULTS.summary_template,
        summarizer_timeout: float | None = DEFAULTS.summarizer_timeout,
        on_evict: Hook | None = DEFAULTS.on_evict,
        on_compress: Hook | None = DEFAULTS.on_compress,
        on_error: Hook | None = DEFAULTS.on_error,
        on_over_budget: OnOverBudget = DEFAULTS.on_over_budget,
    ) -> None:
        check_summarizer(summarizer)
        self._trigger, self._keep = resolve_policies(trigger, keep, default_keep=KEEP_BY_DEFAULT)
        checked = check_fields(
            strategy=strategy,
            max_summary_tokens=max_summary_tokens,
            prompts=prompts,
            token_counter=token_counter,
            message_overhead=message_overhead,
            summary_role=summary_role,
            summary_template=summary_template,
            summarizer_timeout=summarizer_timeout,
            on_evict=on_evict,
            on_compress=on_compress,
            on_error=on_error,
            on_over_budget=on_over_budget,
        )
        self._strategy = resolve_strategy(checked["strategy"])
        self._on_over_budget = checked["on_over_budget"]
        self._summarizer = summarizer
        self._max_summary_tokens = checked["max_summary_tokens"]
        self._prompts = checked["prompts"] or Prompts()
        self._count = checked["token_counter"]
        self._overhead = checked["message_overhead"]
        self._summary_role = checked["summary_role"]
        self._summary_template = checked["summary_template"]
        self._timeout = checked["summarizer_timeout"]
        self._hooks = {
            "on_evict": checked["on_evict"],
            "on_compress": checked["on_compress"],
            "on_error": checked["on_error"],
        }
        self._legacy_on_compress = takes_messages_summary_ms(on_compress)
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
        self._counters = Counters()
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
        copies = [json_copy(message, index) for index, message in enumerate(messages)]
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

    def get_window(self) -> list[dict[str, Any]]:
        """The messages kept verbatim: the pinned system messages, then the window.

        This never compresses and holds no summary; for what to send the model (what
        convo-compress's ``getMessages()`` returns), ``await get_compressed()``.
        """
        return [dict(m) for m in (*self._pinned, *self._window)]

    def get_messages(self) -> list[dict[str, Any]]:
        """Deprecated: the same as :meth:`get_window`, which says what it returns.

        convo-compress's ``getMessages()`` is :meth:`get_compressed` here.
        """
        warnings.warn(
            "ConversationCompressor.get_messages() returns only the verbatim window, without "
            "the summary; call get_window() for that, or await get_compressed() for the "
            "summary and the window (convo-compress's getMessages())",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.get_window()

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
        self._counters = Counters()

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
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "summary": self._summary,
            "summarized": self._summarized,
            "pinned": copy.deepcopy(self._pinned),
            "window": copy.deepcopy(self._window),
            "counters": {name: getattr(counters, name) for name in COUNTERS},
            "settings": {
                "trigger": trigger_to_json(self._trigger),
                "keep": keep_to_json(self._keep),
                "strategy": strategy_to_json(self._strategy),
                "max_summary_tokens": self._max_summary_tokens,
                "prompts": prompts_to_json(self._prompts),
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
        token_counter: TokenCounter = DEFAULTS.token_counter,
        message_overhead: int | None = None,
        summary_role: str | None = None,
        summary_template: str | None = None,
        summarizer_timeout: float | None = None,
        on_evict: Hook | None = DEFAULTS.on_evict,
        on_compress: Hook | None = DEFAULTS.on_compress,
        on_error: Hook | None = DEFAULTS.on_error,
        on_over_budget: OnOverBudget = DEFAULTS.on_over_budget,
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
            on_evict: Hook, as in the constructor; likewise ``on_compress``, ``on_error`` and
                ``on_over_budget``, which the snapshot does not hold either.

        Raises:
            InvalidInput: The snapshot is malformed, or has another format or version.
            ConfigurationError: A setting is missing from the snapshot and not given, or a
                given one is invalid.
        """
        data = check_state(state)
        saved = data["settings"]
        saved_trigger, saved_keep, saved_strategy, saved_prompts = saved_objects(saved)

        def pick(given: Any, key: str) -> Any:
            return given if given is not None else saved.get(key)

        compressor = cls(
            summarizer,
            trigger=given_or_saved("trigger", trigger, saved_trigger),
            keep=given_or_saved("keep", keep, saved_keep),
            strategy=given_or_saved("strategy", strategy, saved_strategy),
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
            on_over_budget=on_over_budget,
        )
        compressor._restore(data)
        return compressor

    def _restore(self, data: dict[str, Any]) -> None:
        """Load the checked snapshot's messages, summary and counters."""
        pinned, checked_pinned, window, checked = restored_messages(
            data, self._count, self._overhead
        )
        self._pinned, self._pinned_tokens = pinned, list(checked_pinned.tokens)
        self._window, self._window_tokens = window, list(checked.tokens)
        self._unit_end = list(checked.unit_end)
        self._summary = data["summary"]
        self._summarized = data["summarized"]
        self._counters = Counters(**{name: data["counters"][name] for name in COUNTERS})

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
                boundary = count_boundary(checked, evict_count)
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
        started = time.perf_counter()
        calls = SummaryCalls(
            self._summarizer,
            self._prompts,
            self._count,
            self._overhead,
            self._max_summary_tokens,
            self._timeout,
            self._counters,
            first=first,
            last=last,
            pinned=len(self._pinned),
            on_over_budget=self._on_over_budget,
        )
        try:
            summary = await run_strategy(
                self._strategy, before, evicted, calls, self._count, self._max_summary_tokens
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
            summarizer_calls=calls.calls,
            input_tokens=calls.sent_tokens,
            summary_tokens=self._count(summary),
            elapsed=time.perf_counter() - started,
            reason=reason,
        )
        if self._legacy_on_compress:  # convo-compress's (messages, summary, ms)
            await self._emit("on_compress", evicted, summary, event.elapsed * 1000)
        else:
            await self._emit("on_compress", event)
        return count

    async def _emit(self, name: str, *args: Any) -> None:
        await call_hook(name, self._hooks[name], *args)
