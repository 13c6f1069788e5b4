"""The summarize compressor: cached, incremental range summaries of a conversation."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Union, overload

from slimcache._entries import RangeRef, SummaryEntry, ThreadIndex
from slimcache._exceptions import ConfigurationError, InvalidInput, StoreError, SummarizerError
from slimcache._keys import ThreadKeys, fingerprint_chain
from slimcache._messages import (
    DEFAULT_MESSAGE_OVERHEAD,
    CheckedMessages,
    Conversation,
    Message,
    TokenCounter,
    approx_tokens,
    check_messages,
    count_message_tokens,
)
from slimcache._policy import (
    Keep,
    KeepMessages,
    MessageThreshold,
    Trigger,
    WindowState,
    check_hysteresis,
)
from slimcache._store import (
    MemoryStore,
    Store,
    SupportsGetMany,
    SupportsSetIfAbsent,
    positive_int,
    validate_ttl,
)
from slimcache._summarizer import (
    Prompts,
    Summarizer,
    SummaryContext,
    Task,
    call_summarizer,
    summarizer_name,
)

__all__ = [
    "DEFAULT_SUMMARY_TEMPLATE",
    "CompressEvent",
    "CompressionResult",
    "MergeFunction",
    "Outcome",
    "Stats",
    "Strategy",
    "SummarizeCompressor",
]

logger = logging.getLogger("slimcache")

Strategy = Literal["extend", "concat", "hybrid", "replace", "custom"]
_STRATEGIES: tuple[str, ...] = ("extend", "concat", "hybrid", "replace", "custom")

Outcome = Literal["unchanged", "hit", "extended", "summarized", "uncached", "passthrough"]
"""What one call did: ``unchanged`` (nothing to summarize), ``hit`` (a cached summary served,
no summarizer call), ``extended`` (a cached summary extended with the new messages only),
``summarized`` (summarized from scratch and cached), ``uncached`` (summarized without the cache:
no thread id, or the store failed under ``on_store_error="bypass"``), ``passthrough`` (the
summarizer failed under ``on_summarizer_error="uncompressed"``; messages returned as given)."""

MergeFunction = Callable[[Union[str, None], str], Union[Awaitable[str], str]]  # noqa: UP007
"""``custom`` strategy: ``(previous_summary or None, summary_of_new_messages) -> merged``."""

Hook = Callable[..., Any]

DEFAULT_SUMMARY_TEMPLATE = "Summary of the earlier conversation:\n{summary}"


@dataclass
class Stats:
    """Counters of one compressor since creation (or the last ``reset_stats``).

    Attributes:
        requests: ``compress`` calls.
        summarizer_calls: Calls made to the summarizer.
        summarizer_input_tokens: Tokens sent to the summarizer (prompt, previous summary, messages).
        summarizer_output_tokens: Tokens of the summaries it returned.
        naive_input_tokens: Tokens a compressor that re-summarizes everything outside the window
            on every request would have sent for the same requests.
        cache_hits: Requests served from a cached summary with no summarizer call.
        extensions: Cached summaries extended with only the new messages.
        misses: Summaries made from scratch for a thread (nothing valid was cached).
        invalidations: Requests whose newest cached summary no longer matched the history.
        uncached: Summaries made without the cache (no thread id, or store bypassed).
        evicted_messages: Messages moved from the verbatim window into a summary.
        store_reads: Store read round trips (``get`` and ``get_many``).
        store_writes: Store write round trips (``set`` and ``set_if_absent``).
        store_deletes: Store delete round trips.
        store_errors: Store calls that failed.
        summarizer_errors: Summarizer calls that failed.
    """

    requests: int = 0
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    naive_input_tokens: int = 0
    cache_hits: int = 0
    extensions: int = 0
    misses: int = 0
    invalidations: int = 0
    uncached: int = 0
    evicted_messages: int = 0
    store_reads: int = 0
    store_writes: int = 0
    store_deletes: int = 0
    store_errors: int = 0
    summarizer_errors: int = 0

    @property
    def store_round_trips(self) -> int:
        """All store calls made."""
        return self.store_reads + self.store_writes + self.store_deletes

    @property
    def tokens_saved(self) -> int:
        """Summarizer input tokens saved against re-summarizing on every request."""
        return self.naive_input_tokens - self.summarizer_input_tokens


@dataclass(frozen=True)
class CompressEvent:
    """Passed to the ``on_compress`` and ``on_cache_hit`` hooks.

    Attributes:
        thread_id: The thread, or ``None``.
        outcome: What happened (see :data:`Outcome`).
        start: First message index the summary covers.
        end: Last message index the summary covers.
        new_messages: Messages summarized by this call (0 for a cache hit).
        summarizer_calls: Summarizer calls made by this call.
        input_tokens: Tokens sent to the summarizer by this call.
        summary_tokens: Tokens of the resulting summary.
        elapsed: Seconds the call took.
        reason: Why compression was due (``"messages>20"``, ``"forced"``), or ``None``.
    """

    thread_id: str | None
    outcome: Outcome
    start: int
    end: int
    new_messages: int
    summarizer_calls: int
    input_tokens: int
    summary_tokens: int
    elapsed: float
    reason: str | None


@dataclass(frozen=True)
class CompressionResult:
    """The full answer of :meth:`SummarizeCompressor.compress_detailed`.

    Attributes:
        messages: The messages to send: pinned system messages, the summary message, then the
            verbatim messages.
        outcome: What happened (see :data:`Outcome`).
        summary: The summary text, or ``None`` when nothing is summarized.
        summary_range: ``(start, end)`` message indices the summary covers, or ``None``.
        summarizer_calls: Summarizer calls made by this call.
        cached: Whether the summary is in the store.
        thread_id: The thread, or ``None``.
    """

    messages: list[dict[str, Any]]
    outcome: Outcome
    summary: str | None = None
    summary_range: tuple[int, int] | None = None
    summarizer_calls: int = 0
    cached: bool = False
    thread_id: str | None = None


@dataclass
class _View:
    """What the index says about a thread, checked against this request's history."""

    index: ThreadIndex | None
    live: list[RangeRef] = field(default_factory=list)
    stale: set[tuple[int, int]] = field(default_factory=set)
    head_beyond: bool = False


@dataclass
class _Work:
    """Bookkeeping of one request while it runs."""

    checked: CheckedMessages
    thread_id: str | None
    reason: str | None = None
    calls: int = 0
    input_tokens: int = 0
    new_messages: int = 0
    started: float = field(default_factory=time.perf_counter)


class SummarizeCompressor:
    """Keeps recent messages verbatim and replaces older ones with a cached summary.

    For a thread, each call (1) serves the cached summary when it still matches the history and
    nothing new needs summarizing, with zero summarizer calls and one store read; (2) otherwise
    extends the longest cached summary that is still valid with only the messages after it;
    (3) otherwise summarizes from scratch. All state lives in the store, so any number of
    stateless servers sharing a store behave as one.

    Args:
        summarizer: ``(messages, context) -> str``, async or sync; see :class:`SummaryContext`.
        store: Where summaries live; ``None`` keeps them in this process (a :class:`MemoryStore`).
        trigger: When to compress (default: more than 20 verbatim messages).
        keep: How much stays verbatim after compressing (default: the last 10 messages).
        strategy: How a cached summary and new messages combine: ``"extend"`` (one call given
            the previous summary and only the new messages), ``"concat"`` (summarize only the
            new messages and append), ``"hybrid"`` (concat until ``hybrid_max_tokens``, then one
            call condenses), ``"replace"`` (the new messages' summary replaces the old) or
            ``"custom"`` (``merge`` combines them).
        merge: The merge function for ``"custom"``.
        hybrid_max_tokens: Budget above which ``"hybrid"`` condenses (default:
            ``max_summary_tokens``).
        max_summary_tokens: Token budget handed to the summarizer.
        prompts: The default prompts given to the summarizer.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        message_overhead: Tokens added per message for role and framing.
        summary_role: Role of the summary message: ``"system"`` (default), ``"developer"``,
            ``"user"`` or ``"assistant"``.
        summary_template: Text of the summary message; ``{summary}``, ``{start}``, ``{end}``
            and ``{count}`` are filled in.
        namespace: Prefix for every store key (e.g. ``"myapp:"``).
        ttl: Seconds cached entries live (``None``: until deleted).
        checkpoints: How many ranges a thread's index lists, so that an edit near the end falls
            back to a recent summary instead of summarizing everything again, and a replay of
            an earlier point is served from the cache.
        summarizer_timeout: Seconds one summarizer call may take.
        on_summarizer_error: ``"raise"`` a :class:`SummarizerError` (default) or return the
            messages ``"uncompressed"``. Either way the store is left untouched.
        on_store_error: ``"raise"`` the :class:`StoreError` (default) or ``"bypass"`` the cache
            and compress without it.
        summarizer_id: Name recorded in cached entries (default: the function's qualified name).
        lock_wait: Seconds to wait for another worker already summarizing the same range (on
            stores with ``set_if_absent``) before summarizing anyway; 0 disables this.
        on_evict: Hook ``(messages, reason)`` called with the messages folded into a summary.
        on_compress: Hook ``(CompressEvent)`` called after a summary is made.
        on_cache_hit: Hook ``(CompressEvent)`` called when a cached summary is served.
        on_error: Hook ``(exception, messages)`` called when the summarizer or store fails.

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        summarizer: Summarizer,
        store: Store | None = None,
        *,
        trigger: Trigger | None = None,
        keep: Keep | None = None,
        strategy: Strategy = "extend",
        merge: MergeFunction | None = None,
        hybrid_max_tokens: int | None = None,
        max_summary_tokens: int = 1000,
        prompts: Prompts | None = None,
        token_counter: TokenCounter = approx_tokens,
        message_overhead: int = DEFAULT_MESSAGE_OVERHEAD,
        summary_role: str = "system",
        summary_template: str = DEFAULT_SUMMARY_TEMPLATE,
        namespace: str = "",
        ttl: float | None = None,
        checkpoints: int = 64,
        summarizer_timeout: float | None = None,
        on_summarizer_error: Literal["raise", "uncompressed"] = "raise",
        on_store_error: Literal["raise", "bypass"] = "raise",
        summarizer_id: str | None = None,
        lock_wait: float = 30.0,
        on_evict: Hook | None = None,
        on_compress: Hook | None = None,
        on_cache_hit: Hook | None = None,
        on_error: Hook | None = None,
    ) -> None:
        if not callable(summarizer):
            raise ConfigurationError("summarizer must be a callable (messages, context) -> str")
        if store is not None and not isinstance(store, Store):
            raise ConfigurationError(
                f"store must have async get, set and delete methods, got {type(store).__name__}"
            )
        self._trigger: Trigger = trigger if trigger is not None else MessageThreshold(20)
        self._keep: Keep = keep if keep is not None else KeepMessages(10)
        if not isinstance(self._trigger, Trigger):
            raise ConfigurationError(f"trigger has no reason() method: {self._trigger!r}")
        if not isinstance(self._keep, Keep):
            raise ConfigurationError(f"keep has no satisfied() method: {self._keep!r}")
        check_hysteresis(self._trigger, self._keep)
        if strategy not in _STRATEGIES:
            raise ConfigurationError(
                f"strategy must be one of {', '.join(_STRATEGIES)}, got {strategy!r}"
            )
        if strategy == "custom" and not callable(merge):
            raise ConfigurationError("strategy='custom' needs a merge function")
        if strategy != "custom" and merge is not None:
            raise ConfigurationError("merge is only used with strategy='custom'")
        positive_int("max_summary_tokens", max_summary_tokens)
        positive_int("checkpoints", checkpoints)
        if hybrid_max_tokens is not None:
            positive_int("hybrid_max_tokens", hybrid_max_tokens)
        if isinstance(message_overhead, bool) or not isinstance(message_overhead, int):
            raise ConfigurationError("message_overhead must be an integer")
        if message_overhead < 0:
            raise ConfigurationError("message_overhead must not be negative")
        if summary_role not in ("system", "developer", "user", "assistant"):
            raise ConfigurationError(
                f"summary_role must be system, developer, user or assistant, got {summary_role!r}"
            )
        try:
            summary_template.format(summary="", start=0, end=0, count=0)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ConfigurationError(f"summary_template is not a valid template: {exc}") from None
        if "{summary}" not in summary_template:
            raise ConfigurationError("summary_template must contain {summary}")
        if summarizer_timeout is not None and not summarizer_timeout > 0:
            raise ConfigurationError("summarizer_timeout must be a positive number of seconds")
        if on_summarizer_error not in ("raise", "uncompressed"):
            raise ConfigurationError("on_summarizer_error must be 'raise' or 'uncompressed'")
        if on_store_error not in ("raise", "bypass"):
            raise ConfigurationError("on_store_error must be 'raise' or 'bypass'")
        if isinstance(lock_wait, bool) or not isinstance(lock_wait, (int, float)) or lock_wait < 0:
            raise ConfigurationError("lock_wait must be a number of seconds >= 0")
        for hook_name, hook in (
            ("on_evict", on_evict),
            ("on_compress", on_compress),
            ("on_cache_hit", on_cache_hit),
            ("on_error", on_error),
        ):
            if hook is not None and not callable(hook):
                raise ConfigurationError(f"{hook_name} must be callable")
        ThreadKeys("probe", namespace)  # validates the namespace before any use

        self._summarizer = summarizer
        self._store: Store = store if store is not None else MemoryStore()
        self._strategy: Strategy = strategy
        self._merge = merge
        self._max_summary_tokens = max_summary_tokens
        self._hybrid_max_tokens = hybrid_max_tokens or max_summary_tokens
        self._prompts = prompts or Prompts()
        self._count = token_counter
        self._overhead = message_overhead
        self._summary_role = summary_role
        self._summary_template = summary_template
        self._namespace = namespace
        self._ttl = validate_ttl(ttl)
        self._checkpoints = checkpoints
        self._timeout = summarizer_timeout
        self._on_summarizer_error = on_summarizer_error
        self._on_store_error = on_store_error
        self._summarizer_id = summarizer_id or summarizer_name(summarizer)
        self._lock_wait = float(lock_wait)
        self._lock_ttl = (summarizer_timeout or 120.0) + 10.0
        self._hooks: dict[str, Hook | None] = {
            "on_evict": on_evict,
            "on_compress": on_compress,
            "on_cache_hit": on_cache_hit,
            "on_error": on_error,
        }
        self._stats = Stats()

    # ------------------------------------------------------------------ public API

    @property
    def store(self) -> Store:
        """The store summaries are kept in."""
        return self._store

    @property
    def stats(self) -> Stats:
        """A snapshot of the counters."""
        return replace(self._stats)

    def reset_stats(self) -> None:
        """Zero every counter; the cache is untouched."""
        self._stats = Stats()

    @overload
    async def compress(
        self, messages: Conversation, *, thread_id: None = None, force: bool = False
    ) -> Conversation: ...

    @overload
    async def compress(
        self,
        messages: Sequence[Message],
        *,
        thread_id: str | int | None = None,
        force: bool = False,
    ) -> list[dict[str, Any]]: ...

    async def compress(
        self,
        messages: Conversation | Sequence[Message],
        *,
        thread_id: str | int | None = None,
        force: bool = False,
    ) -> Conversation | list[dict[str, Any]]:
        """Compress a conversation.

        Args:
            messages: A list of chat messages, or a :class:`Conversation`.
            thread_id: The thread these messages belong to (for a list). Without one, the
                messages are compressed but nothing is cached: summaries are never shared
                between conversations by content.
            force: Compress down to the keep policy now, whatever the trigger says.

        Returns:
            For a list: ``[pinned system messages..., summary message, *verbatim messages]``.
            For a :class:`Conversation`: a new one with those messages, and a ``"slimcache"``
            entry in its metadata describing what happened.

        Raises:
            InvalidInput: A message or the thread id is malformed (nothing is written).
            SummarizerError: The summarizer failed (the store is left as it was).
            StoreError: The store failed and ``on_store_error="raise"``.
        """
        result = await self.compress_detailed(messages, thread_id=thread_id, force=force)
        if isinstance(messages, Conversation):
            metadata = dict(messages.metadata or {})
            metadata["slimcache"] = {
                "outcome": result.outcome,
                "summary_range": list(result.summary_range) if result.summary_range else None,
                "summarizer_calls": result.summarizer_calls,
                "cached": result.cached,
            }
            return Conversation(messages.thread_id, result.messages, metadata)
        return result.messages

    async def compress_detailed(
        self,
        messages: Conversation | Sequence[Message],
        *,
        thread_id: str | int | None = None,
        force: bool = False,
    ) -> CompressionResult:
        """Like :meth:`compress`, returning a :class:`CompressionResult` with what happened."""
        if isinstance(messages, Conversation):
            if thread_id is not None:
                raise InvalidInput(
                    "give the thread id in the Conversation or as thread_id, not both"
                )
            thread_id = messages.thread_id
            messages = messages.messages
        checked = check_messages(messages, self._count, self._overhead)
        keys = ThreadKeys(thread_id, self._namespace) if thread_id is not None else None
        self._stats.requests += 1
        work = _Work(checked, None if thread_id is None else str(thread_id))
        try:
            if keys is None:
                return await self._compress_uncached(work, force)
            try:
                return await self._compress_cached(work, keys, force)
            except StoreError as exc:
                await self._emit("on_error", exc, [dict(m) for m in checked.messages])
                if self._on_store_error == "raise":
                    raise
                logger.warning("store failed, compressing without the cache: %s", exc)
                return await self._compress_uncached(_Work(checked, work.thread_id), force)
        except SummarizerError as exc:
            self._stats.summarizer_errors += 1
            await self._emit("on_error", exc, [dict(m) for m in checked.messages])
            if self._on_summarizer_error == "raise":
                raise
            logger.warning("summarizer failed, returning the messages uncompressed: %s", exc)
            return CompressionResult(
                [dict(m) for m in checked.messages], "passthrough", thread_id=work.thread_id
            )

    # ------------------------------------------------------------------ the two paths

    async def _compress_uncached(self, work: _Work, force: bool) -> CompressionResult:
        checked = work.checked
        pinned = checked.pinned
        boundary = self._due_boundary(work, pinned, None, force)
        if boundary is None:
            return self._unchanged(work)
        summary = await self._produce(work, None, pinned, boundary)
        self._stats.uncached += 1
        return await self._made(work, summary, pinned, boundary, "uncached", cached=False)

    async def _compress_cached(
        self, work: _Work, keys: ThreadKeys, force: bool
    ) -> CompressionResult:
        checked = work.checked
        pinned, total = checked.pinned, len(checked)
        if total == pinned:
            return self._unchanged(work)
        chain = fingerprint_chain(checked.canonical, pinned)

        def valid(start: int, end: int, fingerprint: str) -> bool:
            return (
                start == pinned
                and pinned <= end < total
                and checked.unit_end[end] == end
                and chain[end - pinned] == fingerprint
            )

        index = ThreadIndex.parse(await self._get(keys.index), thread=keys.encoded)
        view = _View(index)
        state: SummaryEntry | None = None
        from_head = False
        if index is not None:
            # A range is served only if it ends where compressing down to the keep policy
            # could end for this history; one reaching further (a replay of an earlier point,
            # a retried request) is kept, neither served nor dropped.
            limit = self._eviction_boundary(checked, pinned)
            reach = -1 if limit is None else limit
            head = index.head

            def stale(start: int, end: int, fingerprint: str) -> bool:
                return end < total and not valid(start, end, fingerprint)

            head_stale = stale(head.start, head.end, head.fingerprint)
            head_ok = (
                not head_stale
                and head.end <= reach
                and valid(head.start, head.end, head.fingerprint)
            )
            view.head_beyond = not head_stale and head.end > reach
            view.stale = {
                (r.start, r.end) for r in index.ranges if stale(r.start, r.end, r.fingerprint)
            }
            if view.stale or head_stale:
                self._stats.invalidations += 1
                logger.info(
                    "thread %s: cached ranges %s no longer match the history",
                    work.thread_id,
                    sorted(view.stale | ({(head.start, head.end)} if head_stale else set())),
                )
            longer = [
                r
                for r in index.ranges
                if (r.start, r.end) not in view.stale
                and r.end <= reach
                and valid(r.start, r.end, r.fingerprint)
                and (not head_ok or r.end > head.end)
            ]
            gone: set[RangeRef] = set()
            if longer:
                state, gone = await self._fallback(keys, longer)
            if state is None and head_ok:
                state, from_head = head, True
            view.live = [
                r for r in index.ranges if (r.start, r.end) not in view.stale and r not in gone
            ]

        boundary = self._due_boundary(work, pinned, state, force)
        if boundary is None:
            if state is None:
                return self._unchanged(work)
            if not from_head and not view.head_beyond:
                await self._repair_index(keys, state, view)
            return await self._hit(work, state)

        target = RangeRef(pinned, boundary, chain[boundary - pinned])
        return await self._extend_or_summarize(work, keys, state, target, view)

    # ------------------------------------------------------------------ decisions

    def _summary_message(self, summary: str, start: int, end: int) -> dict[str, Any]:
        content = self._summary_template.format(
            summary=summary, start=start, end=end, count=end - start + 1
        )
        return {"role": self._summary_role, "content": content}

    def _due_boundary(
        self, work: _Work, pinned: int, state: SummaryEntry | None, force: bool
    ) -> int | None:
        """Return the last index to summarize now, or ``None`` when nothing is due."""
        checked = work.checked
        window_start = state.end + 1 if state is not None else pinned
        summary_tokens = 0
        if state is not None:
            message = self._summary_message(state.summary, state.start, state.end)
            summary_tokens = count_message_tokens(message, self._count, self._overhead)
        window = WindowState(
            messages=len(checked) - window_start,
            tokens=sum(checked.tokens[window_start:]),
            pinned_tokens=sum(checked.tokens[:pinned]),
            summary_tokens=summary_tokens,
        )
        reason = "forced" if force else self._trigger.reason(window)
        if reason is None:
            return None
        work.reason = reason
        return self._eviction_boundary(checked, window_start)

    def _eviction_boundary(self, checked: CheckedMessages, window_start: int) -> int | None:
        """Evict whole units from the window's front until the keep policy is met.

        The last unit always stays verbatim, and an assistant message with tool calls is never
        separated from its tool results.
        """
        total = len(checked)
        remaining = total - window_start
        remaining_tokens = sum(checked.tokens[window_start:])
        boundary: int | None = None
        position = window_start
        while position < total and not self._keep.satisfied(remaining, remaining_tokens):
            end = checked.unit_end[position]
            if end >= total - 1:
                break
            remaining -= end - position + 1
            remaining_tokens -= sum(checked.tokens[position : end + 1])
            boundary, position = end, end + 1
        return boundary

    # ------------------------------------------------------------------ cache paths

    async def _fallback(
        self, keys: ThreadKeys, candidates: list[RangeRef]
    ) -> tuple[SummaryEntry | None, set[RangeRef]]:
        """Read the longest candidate range that still exists; report the ones that are gone."""
        candidates = sorted(candidates, key=lambda r: r.end, reverse=True)
        raws = await self._get_many([keys.summary(r.start, r.end) for r in candidates])
        gone: set[RangeRef] = set()
        for ref, raw in zip(candidates, raws, strict=True):
            entry = SummaryEntry.parse(raw, thread=keys.encoded, start=ref.start, end=ref.end)
            if entry is not None and entry.fingerprint == ref.fingerprint:
                logger.info("thread %s: using cached range %d-%d", keys.encoded, ref.start, ref.end)
                return entry, gone
            gone.add(ref)
        return None, gone

    async def _hit(self, work: _Work, state: SummaryEntry) -> CompressionResult:
        self._stats.cache_hits += 1
        self._stats.naive_input_tokens += self._naive_tokens(work.checked, state.start, state.end)
        result = await self._made(work, state.summary, state.start, state.end, "hit", cached=True)
        return result

    async def _extend_or_summarize(
        self,
        work: _Work,
        keys: ThreadKeys,
        state: SummaryEntry | None,
        target: RangeRef,
        view: _View,
    ) -> CompressionResult:
        range_key = keys.summary(target.start, target.end)
        previous_raw = await self._get(range_key)
        existing = SummaryEntry.parse(
            previous_raw, thread=keys.encoded, start=target.start, end=target.end
        )
        if existing is not None and existing.fingerprint == target.fingerprint:
            # Another worker (or an earlier request whose index write was lost) made it already.
            await self._repair_index(keys, existing, view)
            return await self._hit(work, existing)

        lock_key = keys.lock(target.start, target.end)
        locked = False
        if self._lock_wait > 0 and isinstance(self._store, SupportsSetIfAbsent):
            locked = await self._set_if_absent(lock_key, uuid.uuid4().hex, ttl=self._lock_ttl)
            if not locked:
                waited = await self._wait_for(keys, target)
                if waited is not None:
                    await self._repair_index(keys, waited, view)
                    return await self._hit(work, waited)
        try:
            summary = await self._produce(work, state, target.start, target.end)
            entry = SummaryEntry(
                thread=keys.encoded,
                start=target.start,
                end=target.end,
                fingerprint=target.fingerprint,
                summary=summary,
                summary_tokens=self._count(summary),
                covered_tokens=sum(work.checked.tokens[target.start : target.end + 1]),
                created_at=time.time(),
                summarizer=self._summarizer_id,
                prompt=self._prompts.digest,
                strategy=self._strategy,
            )
            cached = await self._commit(keys, entry, previous_raw, view)
        finally:
            if locked:
                await self._release(lock_key)
        outcome: Outcome = "extended" if state is not None else "summarized"
        if state is not None:
            self._stats.extensions += 1
        else:
            self._stats.misses += 1
        return await self._made(work, summary, target.start, target.end, outcome, cached=cached)

    async def _wait_for(self, keys: ThreadKeys, target: RangeRef) -> SummaryEntry | None:
        """Poll for a range another worker is summarizing, up to ``lock_wait`` seconds."""
        deadline = time.monotonic() + self._lock_wait
        delay = 0.05
        while time.monotonic() < deadline:
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)
            raw = await self._get(keys.summary(target.start, target.end))
            entry = SummaryEntry.parse(raw, thread=keys.encoded, start=target.start, end=target.end)
            if entry is not None and entry.fingerprint == target.fingerprint:
                return entry
        logger.warning(
            "thread %s: waited %.1fs for range %d-%d, summarizing it here",
            keys.encoded,
            self._lock_wait,
            target.start,
            target.end,
        )
        return None

    async def _commit(
        self,
        keys: ThreadKeys,
        entry: SummaryEntry,
        previous_raw: str | None,
        view: _View,
    ) -> bool:
        """Write the range, then the index (the commit point); undo the range if that fails.

        Returns whether the summary is cached (``False`` only under ``on_store_error="bypass"``).
        """
        range_key = keys.summary(entry.start, entry.end)
        try:
            await self._set(range_key, entry.to_json())
            try:
                await self._write_index(keys, entry, view)
            except StoreError:
                await self._undo(range_key, previous_raw)
                raise
        except StoreError as exc:
            if self._on_store_error == "raise":
                raise
            logger.warning("store failed, serving the summary uncached: %s", exc)
            return False
        return True

    async def _repair_index(self, keys: ThreadKeys, entry: SummaryEntry, view: _View) -> None:
        """Point the index at ``entry`` so the next request is one read again."""
        try:
            await self._write_index(keys, entry, view)
        except StoreError as exc:
            # Serving the valid summary does not depend on this write.
            logger.warning("could not update the index of thread %s: %s", keys.encoded, exc)

    async def _write_index(self, keys: ThreadKeys, entry: SummaryEntry, view: _View) -> None:
        """Add ``entry`` to the index and make it the head; delete ranges that went stale.

        A head reaching past this request's history stays the head: this request is a replay
        of an earlier point of a longer conversation. Ranges dropped from the listing (beyond
        ``checkpoints``) stay in the store, still found by their exact range.
        """
        refs = [r for r in view.live if (r.start, r.end) != (entry.start, entry.end)]
        refs.append(RangeRef(entry.start, entry.end, entry.fingerprint))
        refs = sorted(refs, key=lambda r: r.end)[-self._checkpoints :]
        head = entry
        if view.index is not None and view.head_beyond and view.index.head.end > entry.end:
            head = view.index.head
        await self._set(keys.index, ThreadIndex(keys.encoded, tuple(refs), head).to_json())
        stale = set(view.stale)
        if view.index is not None and not view.head_beyond and view.index.head is not head:
            old = view.index.head
            if (old.start, old.end) not in {(r.start, r.end) for r in refs}:
                stale.add((old.start, old.end))
        for start, end in sorted(stale):
            try:
                await self._delete(keys.summary(start, end))
            except StoreError as exc:
                logger.warning("could not delete stale range %d-%d: %s", start, end, exc)

    async def _undo(self, key: str, previous_raw: str | None) -> None:
        try:
            if previous_raw is None:
                await self._delete(key)
            else:
                await self._set(key, previous_raw)
        except StoreError as exc:
            logger.error("could not restore %s after a failed write: %s", key, exc)

    async def _release(self, lock_key: str) -> None:
        try:
            await self._delete(lock_key)
        except StoreError as exc:
            logger.warning("could not release %s (it expires by itself): %s", lock_key, exc)

    # ------------------------------------------------------------------ summarizing

    async def _produce(self, work: _Work, state: SummaryEntry | None, start: int, end: int) -> str:
        """Summarize messages after ``state`` up to ``end`` with the configured strategy."""
        first = state.end + 1 if state is not None else start
        new = work.checked.messages[first : end + 1]
        previous = state.summary if state is not None else None
        strategy = self._strategy
        if strategy == "extend":
            task: Task = "extend" if previous is not None else "summarize"
            summary = await self._call(work, task, new, previous, first, end)
        else:
            part = await self._call(work, "summarize", new, None, first, end)
            if strategy == "custom":
                summary = await self._custom_merge(previous, part)
            elif strategy == "replace" or previous is None:
                summary = part
            else:
                summary = f"{previous}\n\n{part}"
                if strategy == "hybrid" and self._count(summary) > self._hybrid_max_tokens:
                    summary = await self._call(work, "condense", [], summary, start, end)
        work.new_messages = len(new)
        self._stats.evicted_messages += len(new)
        await self._emit("on_evict", [dict(m) for m in new], work.reason or "forced")
        return summary

    async def _call(
        self,
        work: _Work,
        task: Task,
        messages: Sequence[Message],
        previous: str | None,
        start: int,
        end: int,
    ) -> str:
        prompt = self._prompts.for_task(task).replace("{max_tokens}", str(self._max_summary_tokens))
        context = SummaryContext(
            task=task,
            previous_summary=previous,
            max_tokens=self._max_summary_tokens,
            prompt=prompt,
            thread_id=work.thread_id,
            start=start,
            end=end if messages or task == "condense" else start - 1,
        )
        sent = self._count(prompt) + sum(
            count_message_tokens(m, self._count, self._overhead) for m in messages
        )
        if previous is not None:
            sent += self._count(previous)
        self._stats.summarizer_calls += 1
        self._stats.summarizer_input_tokens += sent
        work.calls += 1
        work.input_tokens += sent
        summary = await call_summarizer(self._summarizer, messages, context, timeout=self._timeout)
        self._stats.summarizer_output_tokens += self._count(summary)
        return summary

    async def _custom_merge(self, previous: str | None, part: str) -> str:
        assert self._merge is not None
        try:
            merged: Any = self._merge(previous, part)
            if inspect.isawaitable(merged):
                merged = await merged
        except Exception as exc:
            raise SummarizerError(f"merge function failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(merged, str) or not merged.strip():
            raise SummarizerError("merge function returned an empty or non-string summary")
        return merged

    # ------------------------------------------------------------------ results

    def _naive_tokens(self, checked: CheckedMessages, start: int, end: int) -> int:
        prompt = self._prompts.summarize.replace("{max_tokens}", str(self._max_summary_tokens))
        return self._count(prompt) + sum(checked.tokens[start : end + 1])

    def _unchanged(self, work: _Work) -> CompressionResult:
        return CompressionResult(
            [dict(m) for m in work.checked.messages], "unchanged", thread_id=work.thread_id
        )

    async def _made(
        self,
        work: _Work,
        summary: str,
        start: int,
        end: int,
        outcome: Outcome,
        *,
        cached: bool,
    ) -> CompressionResult:
        checked = work.checked
        if outcome != "hit":
            self._stats.naive_input_tokens += self._naive_tokens(checked, start, end)
        messages = [dict(m) for m in checked.messages[: checked.pinned]]
        messages.append(self._summary_message(summary, start, end))
        messages.extend(dict(m) for m in checked.messages[end + 1 :])
        event = CompressEvent(
            thread_id=work.thread_id,
            outcome=outcome,
            start=start,
            end=end,
            new_messages=work.new_messages,
            summarizer_calls=work.calls,
            input_tokens=work.input_tokens,
            summary_tokens=self._count(summary),
            elapsed=time.perf_counter() - work.started,
            reason=work.reason,
        )
        await self._emit("on_cache_hit" if outcome == "hit" else "on_compress", event)
        return CompressionResult(
            messages=messages,
            outcome=outcome,
            summary=summary,
            summary_range=(start, end),
            summarizer_calls=work.calls,
            cached=cached,
            thread_id=work.thread_id,
        )

    async def _emit(self, name: str, *args: Any) -> None:
        hook = self._hooks[name]
        if hook is None:
            return
        try:
            result = hook(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            # A broken hook must not lose the user's compression; it is reported, not hidden.
            logger.exception("%s hook raised", name)

    # ------------------------------------------------------------------ store calls

    async def _store_call(self, what: str, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except StoreError:
            self._stats.store_errors += 1
            raise
        except Exception as exc:
            self._stats.store_errors += 1
            raise StoreError(f"store {what} failed: {type(exc).__name__}: {exc}") from exc

    async def _get(self, key: str) -> str | None:
        self._stats.store_reads += 1
        value: str | None = await self._store_call(f"get {key!r}", self._store.get(key))
        return value

    async def _get_many(self, keys: list[str]) -> list[str | None]:
        store = self._store
        if isinstance(store, SupportsGetMany):
            self._stats.store_reads += 1
            values: list[str | None] = await self._store_call(
                f"get_many of {len(keys)} keys", store.get_many(keys)
            )
            if len(values) != len(keys):
                raise StoreError(f"get_many returned {len(values)} values for {len(keys)} keys")
            return values
        return [await self._get(key) for key in keys]

    async def _set(self, key: str, value: str) -> None:
        self._stats.store_writes += 1
        await self._store_call(f"set {key!r}", self._store.set(key, value, ttl=self._ttl))

    async def _set_if_absent(self, key: str, value: str, *, ttl: float) -> bool:
        store = self._store
        assert isinstance(store, SupportsSetIfAbsent)
        self._stats.store_writes += 1
        won: bool = await self._store_call(
            f"set_if_absent {key!r}", store.set_if_absent(key, value, ttl=ttl)
        )
        return won

    async def _delete(self, key: str) -> None:
        self._stats.store_deletes += 1
        await self._store_call(f"delete {key!r}", self._store.delete(key))
