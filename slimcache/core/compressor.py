"""The summarize compressor: cached, incremental range summaries of a conversation.

It validates its configuration and dispatches: the decision is the planner's (``plan``, run
on each read of the index by ``turns``, which also waits for the lease), the store calls are
the thread cache's (``thread_cache``), the lease is its own module's (``lease``), the write
path is ``commit``'s, and summaries are produced (``producing``) as the strategy combines
them (``strategies``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from slimcache._exceptions import StoreError, SummarizerError
from slimcache.core.commit import CatchUpCommits, leaves_alone
from slimcache.core.lease import Lease
from slimcache.core.lease_wait import PlannedRead, due_range, plan_read, take_turn
from slimcache.core.plan import (
    ExtendCached,
    History,
    ServeCached,
    SummarizeAnew,
    decide,
)
from slimcache.core.recorder import observed
from slimcache.core.refresh import answered_now, offer_refresh, refreshed, stale_answer
from slimcache.core.request import Work
from slimcache.core.results import CompressionResult, Outcome, Stats
from slimcache.core.settings.compressor import (
    CompressorOptions,
    checked_settings,
    signature,
)
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE
from slimcache.core.store_argument import close_owned_store, open_store_argument
from slimcache.core.store_io import StoreIO
from slimcache.core.summarizer import Summarizer
from slimcache.core.thread_cache import ThreadCache
from slimcache.messages import (
    CheckedMessages,
    Conversation,
    Message,
    MessageT,
    check_messages,
)
from slimcache.messages.conversation import split_conversation, with_report
from slimcache.stores.entries import RangeRef, SummaryEntry
from slimcache.stores.keys import ThreadKeys
from slimcache.stores.protocol import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_SUMMARY_TEMPLATE", "SummarizeCompressor"]

logger = logging.getLogger("slimcache")


class SummarizeCompressor:
    """Keeps recent messages verbatim and replaces older ones with a cached summary.

    For a thread, each call (1) serves the cached summary when it still matches the history and
    nothing new needs summarizing, with zero summarizer calls and one store read; (2) otherwise
    extends the longest cached summary that is still valid with only the messages after it;
    (3) otherwise summarizes from scratch. All state lives in the store, so any number of
    stateless servers sharing a store behave as one. Building one per request costs little:
    the arguments are checked, and what follows from them derived, once for each set of
    arguments a process uses (see :mod:`slimcache.core.settings.compressor`).

    Args:
        summarizer: ``(messages, context) -> str``, async or sync; see :class:`SummaryContext`.
        store: Where summaries live: a store, which stays yours; a store URL, opened with
            :func:`open_store` and closed by :meth:`aclose`; or ``None``, which keeps them in
            this process (a :class:`MemoryStore`).
        **settings: Every other setting, by keyword, as listed below. They make one
            :class:`~slimcache.core.settings.compressor.CompressorSettings`, which the
            compressor keeps.

    Keyword Args:
        trigger (Trigger | None): When to compress (default: more than 20 verbatim messages).
        keep (Keep | None): How much stays verbatim after compressing (default: the last 10
            messages).
        strategy (Strategy | StrategyName): How a cached summary and new messages combine:
            ``"tree"`` (the default: parts merged like a binary counter, one call per compaction;
            see the design page), :class:`Extend` (one call given the previous summary and only
            the new messages), :class:`Concat`, :class:`Hybrid`, :class:`Replace`,
            :class:`Custom`, your own :class:`Strategy`, or the names ``"tree"``, ``"extend"``,
            ``"concat"``, ``"hybrid"`` and ``"replace"``.
        max_summary_tokens (int): Token budget of a summary: given to the summarizer, and enforced
            (a summary over 1.25 times the budget is condensed once, then cut to it; see
            ``on_over_budget``).
        max_input_tokens (InputBoundSetting): Tokens one summarizer call may receive: the prompt,
            the previous summary and the messages, counted with ``token_counter`` (plus
            ``message_overhead`` a message) times the ratio of the model's count to it, learned
            (``stats.input_ratio``). More is folded in consecutive calls, each cached as soon as
            it is made; a tool call's messages are never split, a message that does not fit
            alone is sent cut, and a call refused for its length is made again, smaller.
            ``"auto"`` (default): 4 times ``max_summary_tokens``, at least 6,000, which with the
            default budget fits a model with an 8,192-token context. ``None``: no bound.
        prompts (Prompts | None): The default prompts given to the summarizer.
        token_counter (TokenCounter): Counts a text's tokens (default: ``ceil(len / 4)``). Any other
            counter must depend on the text alone: compressors built with the same settings remember
            the counts of the texts they saw (up to 2 million characters of text), so a tokenizer
            reads each text once, however many compressors a server builds.
        message_overhead (int): Tokens added per message for role and framing.
        summary_role (str): Role of the summary message: ``"system"`` (default), ``"developer"``,
            ``"user"`` or ``"assistant"``.
        summary_template (str): Text of the summary message; ``{summary}``, ``{start}``, ``{end}``
            and ``{count}`` are filled in.
        namespace (str): Namespace of every store key (``"myapp"`` gives ``myapp:thread_...``).
        ttl (float | None): Seconds cached entries live (``None``: until deleted). The TTL slides: a
            cache hit more than half the TTL after the thread's index was written gives the index
            and the summary served a fresh TTL (one batch), so a thread in use does not expire and
            one left alone expires ``ttl`` seconds after its last write or refresh.
        checkpoints (int): How many ranges a thread's index lists, so that an edit near the end
            falls back to a recent summary instead of summarizing everything again, and a replay of
            an earlier point is served from the cache.
        summarizer_timeout (float | None): Seconds one summarizer call may take.
        on_summarizer_error (Literal['raise', 'uncompressed']): ``"raise"`` a
            :class:`SummarizerError` (default) or return the messages ``"uncompressed"``. Either way
            the store is left untouched.
        on_store_error (Literal['raise', 'bypass']): ``"raise"`` the :class:`StoreError` (default)
            or ``"bypass"`` the cache and compress without it.
        on_over_budget (OnOverBudget): A summary still over the budget after the condense call:
            ``"cut"`` (default) keeps it cut to the budget at a sentence or word boundary, with a
            warning logged and ``stats.cut_over_budget`` counting it; ``"raise"`` raises
            :class:`SummarizerError` (nothing is stored).
        breaker_failures (int | None): Failed summarizer calls in a row (an error or a timeout,
            not a reply slimcache refused) after which calls of that summarizer, by its
            ``summarizer_id``, fail at once for a cool-down in the whole process (30 s, doubling
            while it keeps failing, up to 10 minutes), one call at a time then trying it again
            (default 2); ``None``: always call it. The failure is handled as
            ``on_summarizer_error`` says; ``stats.breaker_opened``, ``breaker_closed`` and
            ``breaker_refused`` count the breaker's events.
        summarizer_id (str | None): Name recorded in cached entries, a non-empty string (default:
            the function's qualified name). Change it (say, to the model's name) to stop using
            summaries made before.
        reuse_entries (Literal['matching', 'any']): ``"matching"`` (default): a cached summary made
            with another ``summarizer_id``, other prompts or another strategy is not used; the
            thread is summarized again with the current ones. ``"any"``: use whatever is cached.
        lock_wait (float): Seconds to wait for another worker already summarizing for the same
            thread (on stores with ``set_if_absent``) before summarizing anyway; 0 disables waiting.
        lease_ttl (float): Seconds a worker's lease on a thread lives without renewal. It is renewed
            while the summarizer runs (on stores with ``compare_and_set``), so this bounds how long
            a crashed worker's lease can make others wait.
        single_writer (bool): ``True`` when only one worker ever compresses a given thread at a time
            (one process, or requests pinned to a worker per thread): no lease is taken and nothing
            is read twice, so a compression costs two store round trips on stores that run batches
            (read the index; write the range and the index), three on others.
        store_timeout (float | None): Seconds one store call may take before it fails with
            :class:`StoreTimeout` (``None``: no bound beyond the store's own). A store that bounds
            its own calls at most this long (:class:`SupportsCallTimeout`: the Redis and SQL stores
            with their default ``timeout``) is awaited directly, with no second timer.
        fingerprint (Literal['content', 'id']): What identifies a covered message. ``"content"``
            (default): what a summary is made of (role, content, name, tool calls), so any edit is
            seen. ``"id"``: a message's ``id`` alone, when it has one, so a hit hashes ids rather
            than the whole history's text; only for callers whose ids name one content forever (an
            edited message gets a new id), as an edit under the same id is not seen. Messages
            without an id are identified by content. Switching re-summarizes each thread once. It
            pays only for long turns a worker has not hashed before: a fingerprint this process
            computed is checked again by comparing text, which is cheaper.
        refresh (Literal['inline', 'background']): When a due summary is made. ``"inline"``
            (default): before the request is answered. ``"background"``: a request whose answer
            stays within ``ceiling`` is answered at once (outcome ``"stale"``) with the summary
            the store has, or none yet, and every message after it, and the summary is extended
            in the background under the thread's lease, so that a later request is a hit (see
            :mod:`slimcache.background` to wait for it); a request over the ceiling waits, as
            inline. A failed background refresh leaves the cache as it was and is counted,
            logged and given to ``on_error``; it is never raised into a request.
        ceiling (Trigger | None): With ``refresh="background"`` (and required then): the most
            an answer may hold, in the triggers' terms, counting all of it (the pinned messages,
            the summary served and every message after it): ``MessageThreshold(40)`` answers at
            once while the answer holds at most 40 messages, the summary included;
            ``TokenThreshold`` counts their tokens (a trigger of one's own is given the whole
            answer as its window). Above ``trigger`` when of the same kind.
        on_evict (Hook | None): Hook ``(messages, reason)`` called with the messages folded into a
            summary.
        on_compress (Hook | None): Hook ``(CompressEvent)`` called after a summary is made.
        on_cache_hit (Hook | None): Hook ``(CompressEvent)`` called when a cached summary is served.
        on_error (Hook | None): Hook ``(exception, messages)`` called when the summarizer or store
            fails.

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        summarizer: Summarizer,
        store: Store | str | None = None,
        **settings: Unpack[CompressorOptions],
    ) -> None:
        # Checked and derived once per distinct set (see slimcache.core.settings.compressor).
        self._derived = checked_settings.derived(summarizer, settings)
        self._settings = self._derived.settings
        self._store, self._owns_store = open_store_argument(store)
        self._stats = Stats()
        self._io = StoreIO(
            self._store, self._stats, timeout=self._settings.store_timeout, ttl=self._settings.ttl
        )

    # ------------------------------------------------------------------ public API

    @property
    def store(self) -> Store:
        """The store summaries are kept in."""
        return self._store

    async def aclose(self) -> None:
        """Close the store if this compressor opened it (from a URL); a store you passed in is
        left open."""
        await close_owned_store(self._store, self._owns_store)

    async def __aenter__(self) -> SummarizeCompressor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def stats(self) -> Stats:
        """A snapshot of the counters."""
        return copy.copy(self._stats)

    def reset_stats(self) -> None:
        """Zero every counter; the cache is untouched."""
        self._stats = Stats()
        self._io.stats = self._stats

    @overload
    async def compress(
        self, messages: Conversation, *, thread_id: None = None, force: bool = False
    ) -> Conversation: ...

    @overload
    async def compress(
        self,
        messages: Sequence[MessageT],
        *,
        thread_id: str | int | None = None,
        force: bool = False,
    ) -> list[MessageT]: ...

    async def compress(
        self,
        messages: Conversation | Sequence[Message],
        *,
        thread_id: str | int | None = None,
        force: bool = False,
    ) -> Conversation | list[Any]:
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
            report = {
                "outcome": result.outcome,
                "summary_range": list(result.summary_range) if result.summary_range else None,
                "summarizer_calls": result.summarizer_calls,
                "cached": result.cached,
            }
            return with_report(messages, result.messages, report)
        return result.messages

    @observed
    async def compress_detailed(
        self,
        messages: Conversation | Sequence[Message],
        *,
        thread_id: str | int | None = None,
        force: bool = False,
    ) -> CompressionResult:
        """Like :meth:`compress`, returning a :class:`CompressionResult` with what happened."""
        messages, thread_id = split_conversation(messages, thread_id)
        checked = check_messages(messages, self._derived.count, self._settings.message_overhead)
        keys = ThreadKeys(thread_id, self._settings.namespace) if thread_id is not None else None
        self._stats.requests += 1
        work = Work(checked, None if thread_id is None else str(thread_id), self._stats)
        try:
            if keys is None:
                return await self._compress_uncached(work, force)
            try:
                return await self._compress_cached(work, keys, force)
            except StoreError as exc:
                await self._derived.emit("on_error", exc, [dict(m) for m in checked.messages])
                if self._settings.on_store_error == "raise":
                    raise
                logger.warning("store failed, compressing without the cache: %s", exc)
                return await self._compress_uncached(
                    Work(checked, work.thread_id, self._stats), force
                )
        except SummarizerError as exc:
            self._stats.summarizer_errors += 1
            await self._derived.emit("on_error", exc, [dict(m) for m in checked.messages])
            if self._settings.on_summarizer_error == "raise":
                raise
            logger.warning("summarizer failed, returning the messages uncompressed: %s", exc)
            return work.as_given("passthrough")

    # ------------------------------------------------------------------ the two paths

    async def _compress_uncached(self, work: Work, force: bool) -> CompressionResult:
        decision = decide(
            History(work.checked, by_id=self._derived.by_id), None, self._derived.rules, force=force
        )
        if not isinstance(decision, SummarizeAnew):
            return work.as_given("unchanged")
        target = decision.target
        work.reason = decision.reason
        summary = await self._derived.producer.produce(work, None, target)
        work.stats.uncached += 1
        return await self._made(work, summary, target.start, target.end, "uncached", cached=False)

    async def _compress_cached(
        self, work: Work, keys: ThreadKeys, force: bool
    ) -> CompressionResult:
        history = History(work.checked, by_id=self._derived.by_id)
        if history.total == history.pinned:
            return work.as_given("unchanged")
        cache = ThreadCache(self._io, keys)
        plan = await self._plan(cache, history, await cache.read_index(), force, first=True)
        target = due_range(plan.decision)
        if target is None:
            return await self._settle(work, cache, history, plan)
        if (now := await self._answer_now(work, keys, history, plan, force)) is not None:
            return now
        made = await self._take_turn(work, cache, history, plan, target, force, wait=True)
        assert made is not None  # a request that waits always gets its turn
        return made

    async def _take_turn(
        self,
        work: Work,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        target: RangeRef,
        force: bool,
        *,
        wait: bool,
    ) -> CompressionResult | None:
        """Summarize the due ``target`` under the thread's lease, or serve what another worker
        made meanwhile. A request waits for a worker holding the lease (``wait``); a background
        refresh leaves the work to it and returns ``None``."""
        if self._settings.single_writer:
            # Nobody else writes this thread: no lease, and nothing to read again.
            assert isinstance(plan.decision, (ExtendCached, SummarizeAnew))
            return await self._summarize(work, cache, history, plan, plan.decision, None, None)
        io = cache.io
        lease: Lease | None = None
        timeouts = io.timeouts
        reread: tuple[str | None, str | None] | None = None
        if self._settings.lock_wait > 0 and io.atomic:
            lease = Lease(io, cache.keys.lease, self._settings.lease_ttl)
            if wait:
                replan = functools.partial(self._plan, cache, history, force=force)
                plan, reread = await take_turn(
                    cache, plan, lease, target, replan, self._settings.lock_wait, work.stats
                )
                # Waited for another worker: what it made may bring this request within the
                # ceiling. The lease goes first, for the refresh offered to take it.
                if reread is None and answered_now(self._derived, history, plan.decision, force):
                    await lease.release()
                    now = await self._answer_now(work, cache.keys, history, plan, force)
                    assert now is not None
                    return now
            else:
                keys = cache.keys
                read = await lease.acquire_and_read(
                    [keys.index, keys.summary(target.start, target.end)]
                )
                if read is None:
                    return None  # another worker is making it
                reread = (read[0], read[1])
        try:
            previous_raw: str | None = None
            if (due := due_range(plan.decision)) is not None:
                # Read again now that this worker has its turn: another may have just finished,
                # or an earlier request may have written the range and lost its index write.
                # Taking the lease at once read them in the same round trip.
                if reread is None or due != target:
                    reread = await cache.read_index_and_range(due.start, due.end)
                index_raw, previous_raw = reread
                plan = await self._plan(cache, history, index_raw, force)
                existing = cache.parse_range(previous_raw, due.start, due.end)
                if due_range(plan.decision) != due:
                    previous_raw = None
                elif self._derived.rules.serves(existing, due):
                    assert existing is not None
                    await self._derived.writer.repair_index(cache, history, plan, existing)
                    return await self._hit(work, existing)
            decision = plan.decision
            if not isinstance(decision, (ExtendCached, SummarizeAnew)):
                return await self._settle(work, cache, history, plan)
            return await self._summarize(work, cache, history, plan, decision, lease, previous_raw)
        finally:
            if lease is not None:
                if io.timeouts != timeouts:
                    lease.release_later()  # the store is not answering: do not wait on it
                else:
                    await lease.release()

    # ------------------------------------------------------------------ in the background

    async def _answer_now(
        self, work: Work, keys: ThreadKeys, history: History, plan: PlannedRead, force: bool
    ) -> CompressionResult | None:
        """The answer with the summary the store has, its refresh offered; ``None`` when this
        request waits for the summary (see :func:`answered_now`)."""
        if (found := answered_now(self._derived, history, plan.decision, force)) is None:
            return None
        offer_refresh(self._store, work, keys, self._refresh)
        return await stale_answer(self._derived, work, *found)

    async def _refresh(
        self, checked: CheckedMessages, thread_id: str | None, keys: ThreadKeys
    ) -> bool:
        """The background refresh of a request: whatever is due for its messages, made and
        cached as the request would have; counted in the compressor's stats once it ends."""
        spent = Stats()
        cache = ThreadCache(
            StoreIO(self._store, spent, timeout=self._io.timeout, ttl=self._io.ttl), keys
        )
        work = Work(checked, thread_id, spent, background=True)

        async def extend() -> CompressionResult | None:
            history = History(checked, by_id=self._derived.by_id)
            plan = await self._plan(cache, history, await cache.read_index(), False)
            target = due_range(plan.decision)
            if target is None:
                return None  # made meanwhile
            return await self._take_turn(work, cache, history, plan, target, False, wait=False)

        result = await refreshed(self._derived, work, extend, lambda: self._stats)
        if result is not None:
            await self._refreshed(result)
        return spent.background_finished > 0

    async def _refreshed(self, result: CompressionResult) -> None:
        """Called with what a background refresh made (a summary cached, or found made); a
        front door built on the compressor overrides it to follow its refreshes."""

    # ------------------------------------------------------------------ summarizing

    async def _summarize(
        self,
        work: Work,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        decision: ExtendCached | SummarizeAnew,
        lease: Lease | None,
        previous_raw: str | None,
    ) -> CompressionResult:
        base = decision.base if isinstance(decision, ExtendCached) else None
        target = decision.target
        work.reason = decision.reason
        with_lease = lease.kept() if lease is not None else contextlib.nullcontext()
        producer = self._derived.producer
        # A catch-up in several steps caches each on its way, still under the lease.
        steps = CatchUpCommits(
            self._derived.writer,
            cache,
            history,
            plan,
            start=target.start,
            entry=producer.entry,
            bypass=self._settings.on_store_error == "bypass",
        )
        async with with_lease:
            summary = await producer.produce(work, base, target, steps)
        covered = sum(history.checked.tokens[target.start : target.end + 1])
        entry = producer.entry(cache.keys.encoded, target, summary, covered)
        cached = await self._commit(cache, history, steps.plan, entry, previous_raw, lease)
        if base is not None:
            work.stats.extensions += 1
        else:
            work.stats.misses += 1
        outcome: Outcome = "extended" if base is not None else "summarized"
        return await self._made(work, summary, target.start, target.end, outcome, cached=cached)

    async def _settle(
        self, work: Work, cache: ThreadCache, history: History, plan: PlannedRead
    ) -> CompressionResult:
        """Answer a request that needs no summarizer call."""
        decision = plan.decision
        if not isinstance(decision, ServeCached):
            return work.as_given("unchanged")
        entry = decision.entry
        index = plan.view.index
        if (index is None or entry is not index.head) and not plan.view.head_beyond:
            await self._derived.writer.repair_index(cache, history, plan, entry)
        elif index is not None and cache.refresh_due(index):  # a sliding TTL
            await cache.refresh(plan.index_raw, index)
        return await self._hit(work, entry)

    # ------------------------------------------------------------------ planning

    async def _plan(
        self,
        cache: ThreadCache,
        history: History,
        index_raw: str | None,
        force: bool,
        *,
        first: bool = False,
    ) -> PlannedRead:
        """Run the planner on one read of the index; the first read counts an invalidation."""
        plan = await plan_read(cache, history, index_raw, self._derived.rules, force=force)
        if first and plan.view.invalidated:
            cache.io.stats.invalidations += 1
            logger.info("thread %s: cached ranges no longer match the history", cache.keys.encoded)
        return plan

    # ------------------------------------------------------------------ writing

    async def _commit(
        self,
        cache: ThreadCache,
        history: History,
        plan: PlannedRead,
        entry: SummaryEntry,
        previous_raw: str | None,
        lease: Lease | None,
    ) -> bool:
        """Commit ``entry`` (see :meth:`IndexWriter.commit`); return whether it is cached.

        ``False`` when the store failed under ``on_store_error="bypass"``, or the thread holds
        entries of a format version this one does not know (see ``leaves_alone``).
        """
        if leaves_alone(cache.keys.encoded, plan.index_raw, previous_raw):
            return False
        try:
            await self._derived.writer.commit(cache, history, plan, entry, previous_raw, lease)
        except StoreError as exc:
            if self._settings.on_store_error == "raise":
                raise
            logger.warning("store failed, serving the summary uncached: %s", exc)
            return False
        return True

    # ------------------------------------------------------------------ results

    async def _hit(self, work: Work, entry: SummaryEntry) -> CompressionResult:
        work.stats.cache_hits += 1
        # The covered messages are the ones the entry was made from (their fingerprint matched),
        # so their tokens are the ones it recorded: a hit counts none of them again.
        work.naive_tokens = self._derived.prompt_tokens + entry.covered_tokens
        return await self._made(work, entry.summary, entry.start, entry.end, "hit", cached=True)

    def _naive_tokens(self, checked: CheckedMessages, start: int, end: int) -> int:
        return self._derived.prompt_tokens + sum(checked.tokens[start : end + 1])

    async def _made(
        self,
        work: Work,
        summary: str,
        start: int,
        end: int,
        outcome: Outcome,
        *,
        cached: bool,
    ) -> CompressionResult:
        if outcome != "hit":
            work.naive_tokens = self._naive_tokens(work.checked, start, end)
        work.stats.naive_input_tokens += work.naive_tokens
        messages = work.around(self._derived.summary_message(summary, start, end), end)
        hook = "on_cache_hit" if outcome == "hit" else "on_compress"
        # The event is built only for a hook that takes it; a refresh serves no one a hit.
        if self._derived.hooks[hook] is not None and not (work.background and outcome == "hit"):
            event = work.event(outcome, start, end, self._derived.count(summary))
            legacy = hook == "on_compress" and self._derived.legacy_on_compress
            await self._derived.emit(
                hook, *(work.convo_compress_args(event, summary) if legacy else (event,))
            )
        return work.result(messages, outcome, summary, start, end, cached=cached)


SummarizeCompressor.__signature__ = signature()  # type: ignore[attr-defined]
