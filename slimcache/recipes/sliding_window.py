"""A sliding window: recent messages verbatim, older ones folded into a running summary.

:class:`SlidingWindow` stores every pushed message with a :class:`ConversationWindowMemory`
and keeps its running summary as the cached range summary of a :class:`SummarizeCompressor`
working on the same store with ``thread_id`` set to the window's id. Both live in the store
under the id's keys (:class:`~slimcache.stores.ThreadKeys`: the history's head and chunks, the index
and the range summaries), so any number of instances with the same id and store,
in one process or many, and across restarts, see one history and one summary.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Union

from slimcache._exceptions import ConfigurationError
from slimcache.core.compressor import SummarizeCompressor
from slimcache.core.policy import KeepMessages, MessageThreshold, Trigger, WindowState
from slimcache.core.results import CompressionResult
from slimcache.core.settings.checks import check_callables
from slimcache.core.settings.compressor import DEFAULTS, CompressorOptions, CompressorSettings
from slimcache.core.settings.groups import InputBoundSetting, RefreshMode, call_hook
from slimcache.core.store_argument import close_owned_store, open_store_argument
from slimcache.core.strategies import Extend
from slimcache.core.summarizer import (
    OnOverBudget,
    Summarizer,
    SummaryContext,
    run_summarizer,
    summarizer_name,
)
from slimcache.messages import (
    PINNED_ROLES,
    Message,
    TokenCounter,
    count_message_tokens,
)
from slimcache.recipes.maintenance import clear_thread
from slimcache.recipes.window_history import DEFAULT_CHUNK_SIZE, HistoryHead, WindowHistory
from slimcache.recipes.window_memory import ConversationWindowMemory
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import Store, positive_int

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from slimcache.core.settings.compressor import CompressorOptions

__all__ = ["CompactEndHook", "CompactStartHook", "SlidingWindow", "WindowStats"]

logger = logging.getLogger("slimcache")

CompactStartHook = Callable[[int, int], Union[Awaitable[None], None]]  # noqa: UP007
"""``on_compact_start(evicted_count, total_tokens)``, sync or async."""

CompactEndHook = Callable[[int, int, float], Union[Awaitable[None], None]]  # noqa: UP007
"""``on_compact_end(tokens_before, tokens_after, ratio)``, sync or async."""


@dataclass(frozen=True)
class WindowStats:
    """What a :class:`SlidingWindow` looked like at its last ``push`` or ``get_messages``.

    Attributes:
        total_messages: Messages pushed to the window's id (by any instance).
        windowed_messages: Messages :meth:`SlidingWindow.get_messages` returns verbatim
            (every message but the summary, pinned system messages included).
        summary_tokens: Tokens of the running summary's text (0 before the first eviction).
        evictions: Compaction rounds this instance ran (each folds a batch of messages into
            the summary); rounds run by other instances are not counted.
    """

    total_messages: int = 0
    windowed_messages: int = 0
    summary_tokens: int = 0
    evictions: int = 0

    def to_dict(self) -> dict[str, int]:
        """Return the fields as a dict with snake_case keys."""
        return asdict(self)


@dataclass(frozen=True)
class _Mirror:
    """The history as this instance last read it: messages never change within an epoch."""

    epoch: str
    messages: list[dict[str, Any]]


@dataclass
class _Round:
    """One compression call of one window, as its summarizer wrapper sees it."""

    window: SlidingWindow
    history: Sequence[Message]
    started: bool = False
    tokens_before: int = 0


class _Turns:
    """The compactions of one window id on one store object, in this process, one at a time.

    A task that compacts a history shorter than one already compacted cannot use that
    summary (it reaches past its messages) and would summarize its own again; taking turns,
    and reading the history again when another task got further, avoids that.
    """

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.epoch = ""
        self.count = 0


# Weak values: the entry lives as long as a window using it.
_TURNS: weakref.WeakValueDictionary[tuple[int, str], _Turns] = weakref.WeakValueDictionary()


def _turns_for(store: Store, name: str) -> _Turns:
    turns = _TURNS.get((id(store), name))
    if turns is None:
        turns = _Turns()
        _TURNS[(id(store), name)] = turns
    return turns


# The round in progress in this task: the summarizer runs inside the compressor's call, and
# this is how it finds which history it is compacting.
_ROUND: contextvars.ContextVar[_Round | None] = contextvars.ContextVar(
    "slimcache_window_round", default=None
)


@dataclass(frozen=True)
class _Overflow:
    """Fires as soon as the window holds more than ``messages`` messages: Crux's strict window.

    ``MessageThreshold`` refuses a keep as large as itself (the compressor would run again on
    the very next message); for ``batch=1`` that is the point, so the window uses this trigger.
    """

    messages: int

    def reason(self, state: WindowState) -> str | None:
        """Fire when the window's message count exceeds ``messages``."""
        return f"messages>{self.messages}" if state.messages > self.messages else None


def _batch_of(window_size: int, batch: int | None) -> int:
    """``batch``, or its default: half the window, at least 2.

    Raises:
        ConfigurationError: It is not a positive integer.
    """
    if batch is None:
        return max(2, window_size // 2)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigurationError(f"batch must be a positive integer, got {batch!r}")
    return batch


def _trigger(window_size: int, batch: int) -> _Overflow | MessageThreshold:
    """Fires once the window holds ``window_size + batch`` messages (more than the threshold);
    with a keep of ``window_size``, the summarizer is called once per batch."""
    return _Overflow(window_size) if batch == 1 else MessageThreshold(window_size + batch - 1)


class _WindowCompressor(SummarizeCompressor):
    """The window's compressor, which tells the window what its background refreshes made."""

    def __init__(
        self,
        window: SlidingWindow,
        summarizer: Summarizer,
        store: Store,
        **settings: Unpack[CompressorOptions],
    ) -> None:
        super().__init__(summarizer, store, **settings)
        self._window = window

    async def _refreshed(self, result: CompressionResult) -> None:
        await self._window._refreshed(result)


class SlidingWindow:
    """Keeps the last ``window_size`` messages verbatim and folds older ones into a summary.

    Every pushed message is stored. When the verbatim window reaches
    ``window_size + batch`` messages, the oldest are folded into the running summary (one
    summarizer call, given the previous summary and only those messages) until
    ``window_size`` remain, so the summarizer runs about once per ``batch`` pushes, not on
    every push. An assistant message with tool calls is never separated from its results, and
    leading system messages stay pinned in front of the summary, never summarized.

    Concurrent pushes lose no message (see :class:`ConversationWindowMemory`). Windows with
    the same id on the same store object take turns compacting within a process, so each
    message is summarized once; windows in separate processes that compact at the same moment
    may both summarize a batch, and the longer summary is kept.

    Args:
        id: The window's id: the store keys' thread id. The same id and store give the same
            history and running summary, in any instance, process or restart.
        window_size: Messages kept verbatim after each compaction.
        summarizer: ``(messages, context) -> str``, async or sync; ``context.previous_summary``
            holds the running summary to extend (see :class:`SummaryContext`).
        store: Where messages and summary live: a store, a store URL
            (``"redis://localhost:6379/0"``, opened with :func:`~slimcache.open_store` and
            closed by :meth:`aclose`), or ``None`` to keep them in this instance only.
        summary_budget: Token budget of the running summary, handed to the summarizer.
        max_input_tokens: Tokens one summarizer call may receive; more messages are folded in
            consecutive calls, each stored as it is made (see
            :class:`SummarizeCompressor`). ``"auto"`` (default): 4 times ``summary_budget``, at
            least 6,000; ``None``: no bound.
        summary_role: Role of the summary message: ``"system"``, ``"developer"``, ``"user"``
            or ``"assistant"``.
        on_compact_start: ``(evicted_count, total_tokens)``, sync or async, called before the
            summarizer: how many messages are folded in (by its first call, when they take
            several under ``max_input_tokens``), and the tokens of the messages being
            compacted: pinned messages, previous summary message and the whole window, the
            messages just pushed included.
        on_compact_end: ``(tokens_before, tokens_after, ratio)``, sync or async, called once the
            new summary is stored: ``total_tokens`` as above, the tokens of what
            :meth:`get_messages` returns after the compaction, and ``tokens_after /
            tokens_before``.
        batch: Messages the window may grow past ``window_size`` before a compaction folds
            them into the summary (default: ``window_size // 2``, at least 2). ``batch=1``
            compacts on every push past ``window_size``, as Crux does: the window then never
            holds more than ``window_size`` messages, at one summarizer call per push.
        namespace: Namespace of every store key (``"myapp"`` gives ``myapp:thread_...``).
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        summary_template: Text of the summary message; ``{summary}``, ``{start}``, ``{end}``
            and ``{count}`` are filled in.
        summarizer_id: Name recorded with the summary (default: the function's qualified
            name); a summary made under another name is made again.
        summarizer_timeout: Seconds one summarizer call may take.
        store_timeout: Seconds one store call may take before it fails with
            :class:`StoreError`.
        on_over_budget: A summary still over ``summary_budget`` after the condense call:
            ``"cut"`` (default) to the budget at a sentence or word boundary, counted in
            ``compressor.stats.cut_over_budget`` and logged, or ``"raise"``
            :class:`SummarizerError`.
        refresh: ``"inline"`` (default): a due compaction runs before ``push`` or
            :meth:`get_messages` returns. ``"background"``: while the window stays within
            ``ceiling``, it returns at once, the running summary as it was and every message
            after it, and the compaction runs in the background (see
            :mod:`slimcache.background`; the hooks fire there); a failed one leaves the summary
            as it was and is logged, never raised.
        ceiling: With ``refresh="background"`` (and required then): the most
            :meth:`get_messages` may return while a compaction runs in the background, in the
            triggers' terms, the leading system messages and the summary included
            (``MessageThreshold(3 * window_size)``, say: at most that many messages in all); a
            window past it compacts before returning. Above ``window_size + batch`` messages
            when it counts messages, with room for the summary and the system messages.

    Raises:
        InvalidInput: The id is malformed.
        ConfigurationError: For any other invalid argument.
    """

    def __init__(
        self,
        id: str | int,
        window_size: int,
        summarizer: Summarizer,
        store: Store | str | None = None,
        *,
        summary_budget: int = DEFAULTS.max_summary_tokens,
        max_input_tokens: InputBoundSetting = DEFAULTS.max_input_tokens,
        summary_role: str = DEFAULTS.summary_role,
        on_compact_start: CompactStartHook | None = None,
        on_compact_end: CompactEndHook | None = None,
        batch: int | None = None,
        namespace: str = DEFAULTS.namespace,
        token_counter: TokenCounter = DEFAULTS.token_counter,
        summary_template: str = DEFAULTS.summary_template,
        summarizer_id: str | None = DEFAULTS.summarizer_id,
        summarizer_timeout: float | None = DEFAULTS.summarizer_timeout,
        store_timeout: float | None = DEFAULTS.store_timeout,
        on_over_budget: OnOverBudget = DEFAULTS.on_over_budget,
        refresh: RefreshMode = DEFAULTS.refresh,
        ceiling: Trigger | None = DEFAULTS.ceiling,
    ) -> None:
        self._keys = ThreadKeys(id, namespace, name="id")
        positive_int("window_size", window_size)
        batch = _batch_of(window_size, batch)
        # Checked under its own name first: the compressor calls it max_summary_tokens.
        positive_int("summary_budget", summary_budget)
        options: CompressorOptions = {
            "trigger": _trigger(window_size, batch),  # one summarizer call per batch
            "keep": KeepMessages(window_size),
            "strategy": Extend(),
            "max_summary_tokens": summary_budget,
            "max_input_tokens": max_input_tokens,
            "token_counter": token_counter,
            "summary_role": summary_role,
            "summary_template": summary_template,
            "namespace": namespace,
            "summarizer_timeout": summarizer_timeout,
            "summarizer_id": summarizer_id,
            "store_timeout": store_timeout,
            "on_over_budget": on_over_budget,
            "refresh": refresh,
            "ceiling": ceiling,
        }
        # Checked as the compressor checks them, before the store is opened.
        checked = CompressorSettings(summarizer, **options).check()
        check_callables({"on_compact_start": on_compact_start, "on_compact_end": on_compact_end})
        options["summarizer_id"] = checked.summarizer_id or summarizer_name(summarizer)
        resolved, self._owns_store = open_store_argument(store)
        self._id, self._namespace = id, checked.namespace
        self._window_size, self._batch = window_size, batch
        self._summarizer = summarizer
        self._count, self._summary_role = checked.token_counter, checked.summary_role
        self._summary_template = checked.summary_template
        self._hooks = {"on_compact_start": on_compact_start, "on_compact_end": on_compact_end}
        self._memory = ConversationWindowMemory(
            resolved,
            window_size,
            namespace=namespace,
            chunk_size=DEFAULT_CHUNK_SIZE,
            store_timeout=checked.store_timeout,
        )
        self._compressor = _WindowCompressor(self, self._summarize, resolved, **options)
        self._store = resolved
        self._turns = _turns_for(resolved, self._keys.turns)
        self._mirror: _Mirror | None = None
        self._evictions = 0
        self._stats = WindowStats()

    # ------------------------------------------------------------------ public API

    @property
    def id(self) -> str | int:
        """The window's id."""
        return self._id

    @property
    def window_size(self) -> int:
        """Messages kept verbatim after each compaction."""
        return self._window_size

    @property
    def batch(self) -> int:
        """Messages the window may grow past ``window_size`` before a compaction."""
        return self._batch

    @property
    def store(self) -> Store:
        """The store holding the messages and the summary."""
        return self._store

    async def aclose(self) -> None:
        """Close the store if this window opened it from a URL; a store passed in stays open."""
        await close_owned_store(self._store, self._owns_store)

    async def __aenter__(self) -> SlidingWindow:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def memory(self) -> ConversationWindowMemory:
        """The message history (session id: the window's id)."""
        return self._memory

    @property
    def compressor(self) -> SummarizeCompressor:
        """The compressor keeping the running summary (thread id: the window's id)."""
        return self._compressor

    async def push(self, message: Message) -> None:
        """Store a message and compact the window if it has grown ``batch`` past its size.

        The message is stored before any compaction: if the summarizer fails, the message is
        kept, the summary stays as it was, and the next ``push`` or :meth:`get_messages`
        tries the compaction again.

        Raises:
            InvalidInput: The message breaks a rule (nothing is stored).
            SummarizerError: The summarizer failed (the message is kept).
            StoreError: The store failed or holds a value slimcache did not write (a stored
                message that breaks a rule of ``check_messages`` included).
        """
        await self.push_many([message])

    async def push_many(self, messages: Sequence[Message]) -> None:
        """Store several messages (all or none), then compact once if due.

        Raises:
            InvalidInput: A message breaks a rule (nothing is stored).
            SummarizerError: The summarizer failed (the messages are kept).
            StoreError: The store failed or holds a value slimcache did not write (a stored
                message that breaks a rule of ``check_messages`` included).
        """
        head = await self._history_store.append_messages(self._id, messages)
        if head is None:
            return
        async with self._turns.lock:
            if head.epoch == self._turns.epoch and head.count < self._turns.count:
                # Another task here has compacted a longer history since this append.
                head = await self._history_store.read_head(self._id)
            await self._compact(await self._history(head))

    async def get_messages(self) -> list[dict[str, Any]]:
        """Return the messages to send: ``[summary_message, *recent]``.

        Before the first eviction there is no summary and every message is returned. Leading
        system messages come first, before the summary. ``recent`` holds between
        ``window_size`` and ``window_size + batch - 1`` messages (more only to keep a tool call
        with its results). If messages pushed meanwhile (here or by another instance) made a
        compaction due, it runs first; with ``refresh="background"`` it runs afterwards while
        the messages returned, the summary and system messages included, stay within the
        ceiling, and ``recent`` holds more meanwhile.

        Raises:
            SummarizerError: A due compaction failed (nothing changed).
            StoreError: The store failed or holds a value slimcache did not write (a stored
                message that breaks a rule of ``check_messages`` included: none is ever
                returned).
        """
        async with self._turns.lock:
            head = await self._history_store.read_head(self._id)
            result = await self._compact(await self._history(head))
        return copy.deepcopy(result.messages)

    def get_stats(self) -> WindowStats:
        """Return the window as of this instance's last ``push`` or ``get_messages``."""
        return self._stats

    async def clear(self) -> None:
        """Delete the window's messages and its running summary.

        Everything slimcache keeps under the window's id goes (see
        :func:`~slimcache.clear_thread`): the summary's ranges and index first, the messages
        last.

        Raises:
            StoreError: The store failed.
        """
        # clear_thread deletes the message history too, and its store calls raise StoreError.
        await clear_thread(
            self._store,
            self._id,
            namespace=self._namespace,
            store_timeout=self._history_store.store_timeout,
        )
        self._mirror = None
        self._stats = WindowStats(evictions=self._evictions)

    # ------------------------------------------------------------------ internals

    @property
    def _history_store(self) -> WindowHistory:
        # The memory as this class uses it: its public methods and WindowHistory, no more.
        return self._memory

    async def _history(self, head: HistoryHead | None) -> list[dict[str, Any]]:
        """The whole history, reading only the messages this instance has not seen yet."""
        if head is None:
            self._mirror = None
            return []
        self._turns.epoch, self._turns.count = head.epoch, head.count
        mirror = self._mirror
        known: list[dict[str, Any]] = []
        if mirror is not None and mirror.epoch == head.epoch and len(mirror.messages) <= head.count:
            known = mirror.messages
        if len(known) < head.count:
            newer = await self._history_store.read_messages(self._id, head, len(known))
            history = known + newer
        else:
            history = known
        current = self._mirror
        if current is None or current.epoch != head.epoch or len(current.messages) < len(history):
            self._mirror = _Mirror(head.epoch, history)
        return history

    async def _compact(self, history: list[dict[str, Any]]) -> CompressionResult:
        """Run the compressor on the history; fire the hooks when it compacts."""
        round_ = _Round(self, history)
        token = _ROUND.set(round_)
        try:
            result = await self._compressor.compress_detailed(history, thread_id=self._id)
        finally:
            _ROUND.reset(token)
        compacted = round_.started and result.outcome in ("summarized", "extended")
        if compacted:
            self._evictions += 1
        summary_tokens = self._count(result.summary) if result.summary is not None else 0
        windowed = len(result.messages) - (1 if result.summary is not None else 0)
        self._stats = WindowStats(len(history), windowed, summary_tokens, self._evictions)
        if compacted:
            await self._compacted(round_, result)
        return result

    async def _refreshed(self, result: CompressionResult) -> None:
        """A background compaction ended: count it and fire ``on_compact_end``, as
        :meth:`_compact` does for one that runs inline."""
        round_ = _ROUND.get()  # the offering request's round: the refresh runs in its context
        if round_ is None or round_.window is not self or not round_.started:
            return
        if result.outcome in ("summarized", "extended"):
            self._evictions += 1
            self._stats = dataclasses.replace(self._stats, evictions=self._evictions)
            await self._compacted(round_, result)

    async def _compacted(self, round_: _Round, result: CompressionResult) -> None:
        before = round_.tokens_before
        after = sum(count_message_tokens(m, self._count) for m in result.messages)
        await self._emit("on_compact_end", before, after, after / before if before else 0.0)

    async def _summarize(self, messages: Sequence[Message], context: SummaryContext) -> Any:
        """The compressor's summarizer: the compaction hooks around the user's summarizer."""
        round_ = _ROUND.get()
        if (
            round_ is not None
            and round_.window is self
            and not round_.started
            and context.task != "condense"
        ):
            round_.started = True
            round_.tokens_before = self._tokens_before(round_.history, context)
            await self._emit("on_compact_start", len(messages), round_.tokens_before)
        return await run_summarizer(self._summarizer, messages, context)

    def _tokens_before(self, history: Sequence[Message], context: SummaryContext) -> int:
        """Tokens of the messages being compacted: pinned, previous summary and window."""
        tokens = [count_message_tokens(m, self._count) for m in history]
        pinned = 0
        while pinned < len(history) and history[pinned].get("role") in PINNED_ROLES:
            pinned += 1
        total = sum(tokens[:pinned]) + sum(tokens[context.start :])
        if context.previous_summary is not None:
            end = context.start - 1
            content = self._summary_template.format(
                summary=context.previous_summary, start=pinned, end=end, count=end - pinned + 1
            )
            message = {"role": self._summary_role, "content": content}
            total += count_message_tokens(message, self._count)
        return total

    async def _emit(self, name: str, *args: Any) -> None:
        await call_hook(name, self._hooks[name], *args)
