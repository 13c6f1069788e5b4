"""Caching for a summarize function you already have: ``@cached_summarizer(store)``.

The wrapped function summarizes *all* the messages it is given, like the original, but keeps
each thread's summary in the store with a fingerprint of the messages it covers. A repeated
call is served from the store; a call with more messages asks the original function only
about the new ones, handing it the previous summary as a leading system message.

Keys: ``ThreadKeys(thread_id, namespace).wrapped`` (see :mod:`slimcache.stores.keys`), an index
of the ranges cached for the thread with a copy of the newest summary, and one entry per range
(ranges always start at message 0 here).

They are apart from the keys ``SummarizeCompressor`` writes, so both can share a store,
a namespace and thread ids.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Union

from slimcache._exceptions import ConfigurationError, InvalidInput, StoreError, SummarizerError
from slimcache.core.commit import leaves_alone
from slimcache.core.plan import listed_with
from slimcache.core.results import Stats
from slimcache.core.settings.checks import check_store
from slimcache.core.settings.compressor import DEFAULTS, CompressorOptions, check_fields
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE, OnStoreError
from slimcache.core.store_argument import close_owned_store, open_store_argument
from slimcache.core.store_io import StoreIO, refresh_due
from slimcache.core.summarizer import (
    Summarizer,
    SummaryContext,
    Task,
    _is_async,
    call_summarizer,
    summarizer_name,
)
from slimcache.messages import CheckedMessages, Message, approx_tokens, check_messages
from slimcache.recipes.summarizer_ranges import WrapHistory
from slimcache.stores.entries import SummaryEntry, ThreadIndex
from slimcache.stores.keys import ThreadKeys, WrappedKeys
from slimcache.stores.protocol import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedSummarizer", "ExtendFunction", "PlainSummarizer", "cached_summarizer"]

logger = logging.getLogger("slimcache")

PlainSummarizer = Callable[[list[dict[str, Any]]], Union[Awaitable[str], str]]  # noqa: UP007
"""A summarize function as you may already have one: ``(messages) -> str``, sync or async."""

ExtendFunction = Callable[[str, list[dict[str, Any]]], Union[Awaitable[str], str]]  # noqa: UP007
"""``(previous_summary, new_messages) -> summary`` covering both; sync or async."""

# Index writes retried when other workers write the same thread's index in between.
_INDEX_ATTEMPTS = 8

CHECKPOINTS = 16
"""The summaries a thread keeps listed by default: below the compressor's, so that threads
cached before it had the setting keep their store use (see :func:`cached_summarizer`)."""


class CachedSummarizer:
    """A summarize function whose results are cached per thread in a store.

    Made by :func:`cached_summarizer`; call it as ``await summarize(messages, thread_id=...)``.

    Attributes:
        __wrapped__: The original function (its name and docstring are copied over too).
    """

    __wrapped__: PlainSummarizer
    __name__: str

    def __init__(
        self,
        summarize: PlainSummarizer,
        store: Store | str | None = None,
        *,
        namespace: str = DEFAULTS.namespace,
        ttl: float | None = DEFAULTS.ttl,
        extend: ExtendFunction | None = None,
        summarizer_id: str | None = DEFAULTS.summarizer_id,
        checkpoints: int = CHECKPOINTS,
        summarizer_timeout: float | None = DEFAULTS.summarizer_timeout,
        store_timeout: float | None = DEFAULTS.store_timeout,
        on_store_error: OnStoreError = DEFAULTS.on_store_error,
    ) -> None:
        checked = _check_settings(
            store,
            extend,
            namespace=namespace,
            ttl=ttl,
            summarizer_id=summarizer_id,
            checkpoints=checkpoints,
            summarizer_timeout=summarizer_timeout,
            store_timeout=store_timeout,
            on_store_error=on_store_error,
        )
        if not callable(summarize):
            raise ConfigurationError("summarize must be a callable (messages) -> str")
        self.__wrapped__ = summarize
        functools.update_wrapper(self, summarize)
        self._store, self._owns_store = open_store_argument(store)
        self._namespace = checked["namespace"]
        self._ttl = checked["ttl"]
        self._extend = extend
        self._summarizer_id = checked["summarizer_id"] or summarizer_name(summarize)
        self._extend_name = "extend" if extend is None else f"custom:{summarizer_name(extend)}"
        self._checkpoints = checked["checkpoints"]
        self._timeout = checked["summarizer_timeout"]
        self._on_store_error = checked["on_store_error"]
        self._stats = Stats()
        self._io = StoreIO(
            self._store, self._stats, timeout=checked["store_timeout"], ttl=self._ttl
        )
        self._original = _adapt_plain(summarize)
        self._extender = _adapt_extend(extend) if extend is not None else None

    @property
    def store(self) -> Store:
        """The store summaries are kept in."""
        return self._store

    async def aclose(self) -> None:
        """Close the store if this function opened it from a URL; a store passed in stays open."""
        await close_owned_store(self._store, self._owns_store)

    async def __aenter__(self) -> CachedSummarizer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def stats(self) -> Stats:
        """A snapshot of the counters (``summarizer_calls`` counts calls to your functions)."""
        return replace(self._stats)

    def reset_stats(self) -> None:
        """Zero every counter; the cache is untouched."""
        self._stats = Stats()
        self._io.stats = self._stats

    async def __call__(
        self, messages: Sequence[Message], *, thread_id: str | int | None = None
    ) -> str:
        """Return the summary of all ``messages``, from the store when it can.

        Args:
            messages: The conversation to summarize, oldest first.
            thread_id: The conversation's id. Without one, the original function is called on
                all the messages and nothing is cached.

        Returns:
            The summary of all the messages.

        Raises:
            InvalidInput: A message or the thread id is malformed, or there are no messages
                (nothing is called and nothing is written).
            SummarizerError: Your function (or ``extend``) raised, timed out or returned an
                empty or non-string result; its exception is the ``__cause__``. Nothing is
                written.
            StoreError: The store failed (unless ``on_store_error="bypass"``); a range written
                before the failure is removed again.
        """
        checked = check_messages(messages)
        if not len(checked):
            raise InvalidInput("messages must not be empty: there is nothing to summarize")
        keys = ThreadKeys(thread_id, self._namespace).wrapped if thread_id is not None else None
        self._stats.requests += 1
        if keys is None:
            return await self._uncached(checked, None)
        history = WrapHistory(checked)
        try:
            found = await self._lookup(keys, history)
        except StoreError as exc:
            if self._on_store_error == "raise":
                raise
            logger.warning("store failed, summarizing without the cache: %s", exc)
            return await self._uncached(checked, str(thread_id))
        index_raw, index, exact_raw, base = found
        if base is not None and base.end == history.last:
            # The entry records the tokens of the very messages it covers: a hit counts none.
            self._stats.naive_input_tokens += base.covered_tokens
            self._stats.cache_hits += 1
            if index is not None and refresh_due(index, self._ttl):  # a sliding TTL
                await self._io.refresh(
                    keys.summary(base.start, base.end), base, keys.index, index_raw, index
                )
            return base.summary
        tokens = sum(checked.tokens)
        self._stats.naive_input_tokens += tokens
        summary = await self._summarize(history, base, str(thread_id), tokens)
        entry = SummaryEntry(
            thread=keys.encoded,
            start=0,
            end=history.last,
            fingerprint=history.fingerprint(),
            summary=summary,
            summary_tokens=approx_tokens(summary),
            covered_tokens=tokens,
            created_at=time.time(),
            summarizer=self._summarizer_id,
            prompt="",
            strategy=self._extend_name,
        )
        try:
            await self._commit(keys, history, entry, index_raw, index, exact_raw)
        except StoreError as exc:
            if self._on_store_error == "raise":
                raise
            logger.warning("store failed, returning the summary uncached: %s", exc)
        return summary

    # ------------------------------------------------------------------ reading

    def _usable(self, entry: SummaryEntry) -> bool:
        return entry.summarizer == self._summarizer_id

    async def _lookup(
        self, keys: WrappedKeys, history: WrapHistory
    ) -> tuple[str | None, ThreadIndex | None, str | None, SummaryEntry | None]:
        """Read the index and the exact range; return them and the summary to build on."""
        index_raw, exact_raw = await self._io.get_many([keys.index, keys.summary(0, history.last)])
        index = ThreadIndex.parse(index_raw, thread=keys.encoded)
        exact = SummaryEntry.parse(exact_raw, thread=keys.encoded, start=0, end=history.last)
        if (
            exact is not None
            and self._usable(exact)
            and history.matches(0, history.last, exact.fingerprint)
        ):
            return index_raw, index, exact_raw, exact
        if index is None:
            return index_raw, index, exact_raw, None
        head = index.head
        if history.stale(index):
            self._stats.invalidations += 1
            logger.info("thread %s: cached summaries no longer match the messages", keys.encoded)
        base: SummaryEntry | None = None
        if history.matches(head.start, head.end, head.fingerprint) and self._usable(head):
            base = head
        # Longer valid ranges than the head (a replay after an edit, say), longest first; the
        # exact range was read already.
        candidates = sorted(
            (
                r
                for r in index.ranges
                # The cheap tests first: most listed ranges end at or before the head.
                if r.end < history.last
                and (base is None or r.end > base.end)
                and history.matches(r.start, r.end, r.fingerprint)
            ),
            key=lambda r: r.end,
            reverse=True,
        )
        if candidates:
            raws = await self._io.get_many([keys.summary(r.start, r.end) for r in candidates])
            for ref, raw in zip(candidates, raws, strict=True):
                entry = SummaryEntry.parse(raw, thread=keys.encoded, start=ref.start, end=ref.end)
                if (
                    entry is not None
                    and entry.fingerprint == ref.fingerprint
                    and self._usable(entry)
                ):
                    base = entry
                    break
        return index_raw, index, exact_raw, base

    # ------------------------------------------------------------------ summarizing

    async def _uncached(self, checked: CheckedMessages, thread_id: str | None) -> str:
        self._stats.uncached += 1
        tokens = sum(checked.tokens)
        self._stats.naive_input_tokens += tokens
        return await self._call(
            self._original, "summarize", checked, 0, None, thread_id, tokens=tokens
        )

    async def _summarize(
        self, history: WrapHistory, base: SummaryEntry | None, thread: str, tokens: int
    ) -> str:
        """Summarize all the messages (``tokens`` in all), or extend ``base`` with the rest."""
        checked = history.checked
        if base is None:
            self._stats.misses += 1
            return await self._call(
                self._original, "summarize", checked, 0, None, thread, tokens=tokens
            )
        self._stats.extensions += 1
        first = base.end + 1
        sent = approx_tokens(base.summary) + sum(checked.tokens[first:])
        if self._extender is not None:
            return await self._call(
                self._extender, "extend", checked, first, base.summary, thread, tokens=sent
            )
        return await self._call(
            self._original, "extend", checked, first, base.summary, thread, tokens=sent
        )

    async def _call(
        self,
        function: Summarizer,
        task: Task,
        checked: CheckedMessages,
        first: int,
        previous: str | None,
        thread_id: str | None,
        *,
        tokens: int,
    ) -> str:
        """Call one of the user's functions on messages ``first..`` (and ``previous``)."""
        new = [dict(m) for m in checked.messages[first:]]
        if previous is not None and function is self._original:
            # The extension convention: the previous summary leads, as a system message.
            content = DEFAULT_SUMMARY_TEMPLATE.format(
                summary=previous, start=0, end=first - 1, count=first
            )
            new.insert(0, {"role": "system", "content": content})
        context = SummaryContext(
            task=task,
            previous_summary=previous,
            max_tokens=0,
            prompt="",
            thread_id=thread_id,
            start=first,
            end=len(checked) - 1,
        )
        self._stats.summarizer_calls += 1
        self._stats.summarizer_requests += 1
        self._stats.summarizer_request_tokens += tokens
        self._stats.summarizer_input_tokens += tokens
        self._stats.evicted_messages += len(checked) - first
        try:
            summary = await call_summarizer(function, new, context, timeout=self._timeout)
        except SummarizerError:
            self._stats.summarizer_errors += 1
            raise
        self._stats.summarizer_output_tokens += approx_tokens(summary)
        return summary

    # ------------------------------------------------------------------ writing

    async def _commit(
        self,
        keys: WrappedKeys,
        history: WrapHistory,
        entry: SummaryEntry,
        index_raw: str | None,
        index: ThreadIndex | None,
        exact_raw: str | None,
    ) -> None:
        """Write the range, then the index (the commit point); undo the range if that fails.

        Nothing is written over a record of a format version this one does not know."""
        if leaves_alone(keys.encoded, index_raw, exact_raw):
            return
        range_key = keys.summary(entry.start, entry.end)
        written = entry.to_json()
        await self._io.set(range_key, written)
        try:
            await self._write_index(keys, history, entry, index_raw, index)
        except StoreError:
            await self._io.undo(range_key, written, exact_raw)
            raise

    async def _write_index(
        self,
        keys: WrappedKeys,
        history: WrapHistory,
        entry: SummaryEntry,
        expected: str | None,
        stored: ThreadIndex | None,
    ) -> None:
        """Make ``entry`` the head; on compare-and-set stores, merge with concurrent writes."""
        for _ in range(_INDEX_ATTEMPTS):
            index, delete = self._next_index(keys, history, entry, stored)
            if await self._io.write_index(keys.index, expected, index):
                for start, end in delete:
                    try:
                        await self._io.delete(keys.summary(start, end))
                    except StoreError as exc:
                        logger.warning("could not delete stale range %d-%d: %s", start, end, exc)
                return
            expected = await self._io.get(keys.index)
            if leaves_alone(keys.encoded, expected):
                return
            stored = ThreadIndex.parse(expected, thread=keys.encoded)
        logger.warning(
            "thread %s: the index kept changing; range 0-%d is cached but not listed",
            keys.encoded,
            entry.end,
        )

    def _next_index(
        self,
        keys: WrappedKeys,
        history: WrapHistory,
        entry: SummaryEntry,
        stored: ThreadIndex | None,
    ) -> tuple[ThreadIndex, tuple[tuple[int, int], ...]]:
        """The index listing ``entry``, and the ranges to delete once it is written.

        As the compressor's (:func:`slimcache.core.plan.next_index`): ranges these messages
        contradict are dropped, the listing keeps the ``checkpoints`` longest, and a longer
        head that still matches (or reaches past these messages) stays the head, so a replay
        of an earlier point never moves the thread back.
        """
        stale = history.stale(stored) if stored is not None else set()
        old = stored.head if stored is not None else None
        update = listed_with(
            stored,
            entry,
            thread=keys.encoded,
            checkpoints=self._checkpoints,
            stale=stale,
            head_stays=old is not None
            and old.end > entry.end
            and (old.start, old.end) not in stale
            and self._usable(old),
        )
        return update.index, update.delete


def _check_settings(
    store: object, extend: object, **settings: Unpack[CompressorOptions]
) -> CompressorOptions:
    """Check every argument but the function, saying what a store passed as the function
    means (``@cached_summarizer`` without parentheses); return the compressor settings among
    them as the compressor checks them. A URL is opened by :class:`CachedSummarizer`, once
    every other argument is checked."""
    if callable(store) and not isinstance(store, Store):
        raise ConfigurationError(
            "cached_summarizer takes a store, not the function: use it with parentheses, "
            "@cached_summarizer() or @cached_summarizer(store)"
        )
    if not isinstance(store, str):
        check_store(store)
    if extend is not None and not callable(extend):
        raise ConfigurationError("extend must be a callable (previous_summary, messages) -> str")
    return check_fields(**settings)


def _adapt_plain(summarize: PlainSummarizer) -> Summarizer:
    """``(messages) -> str`` as a slimcache summarizer, keeping it sync or async."""
    if _is_async(summarize):

        async def call_async(messages: Sequence[Message], context: SummaryContext) -> str:
            result: Any = summarize([dict(m) for m in messages])
            while inspect.isawaitable(result):
                result = await result
            return result  # type: ignore[no-any-return]

        return call_async

    def call(messages: Sequence[Message], context: SummaryContext) -> Any:
        return summarize([dict(m) for m in messages])

    return call


def _adapt_extend(extend: ExtendFunction) -> Summarizer:
    """``(previous, messages) -> str`` as a slimcache summarizer, keeping it sync or async."""
    if _is_async(extend):

        async def call_async(messages: Sequence[Message], context: SummaryContext) -> str:
            result: Any = extend(context.previous_summary or "", [dict(m) for m in messages])
            while inspect.isawaitable(result):
                result = await result
            return result  # type: ignore[no-any-return]

        return call_async

    def call(messages: Sequence[Message], context: SummaryContext) -> Any:
        return extend(context.previous_summary or "", [dict(m) for m in messages])

    return call


def cached_summarizer(
    store: Store | str | None = None,
    *,
    namespace: str = DEFAULTS.namespace,
    ttl: float | None = DEFAULTS.ttl,
    extend: ExtendFunction | None = None,
    summarizer_id: str | None = DEFAULTS.summarizer_id,
    checkpoints: int = CHECKPOINTS,
    summarizer_timeout: float | None = DEFAULTS.summarizer_timeout,
    store_timeout: float | None = DEFAULTS.store_timeout,
    on_store_error: OnStoreError = DEFAULTS.on_store_error,
) -> Callable[[PlainSummarizer], CachedSummarizer]:
    """Cache an existing ``summarize(messages) -> str`` (sync or async) per thread in a store.

    Use it as a decorator, ``@cached_summarizer(store)``, and call the result as
    ``await summarize(messages, thread_id="t")``. It returns the summary of all the messages:

    - the same messages again: the stored summary, with no call to your function;
    - more messages (the conversation went on): your function is called only on
      ``[previous summary as a system message, *new messages]`` (the previous summary in
      ``DEFAULT_SUMMARY_TEMPLATE``: ``"Summary of the earlier conversation:\\n..."``), or
      ``extend(previous_summary, new_messages)`` is, when given;
    - an earlier message edited, removed or reordered: the stored summary no longer matches,
      and the longest stored summary that still does is extended (or everything summarized
      again).

    Every stored summary carries a fingerprint of exactly the messages it covers; editing a
    message's ``metadata`` or ``id`` does not count as an edit. Concurrent first calls for one
    thread may each call your function; the results agree and the longest summary is kept.

    Args:
        store: Where summaries live: a store, a store URL (``"redis://localhost:6379/0"``,
            opened with :func:`~slimcache.open_store` for each function decorated, and closed
            by its ``aclose()``), or ``None`` to keep them in this process (a
            :class:`MemoryStore`).
        namespace: Namespace of every store key.
        ttl: Seconds stored summaries live (``None``: until deleted). It slides: a hit past
            half the TTL refreshes it, so a thread in use never expires.
        extend: ``(previous_summary, new_messages) -> str``, sync or async, to use instead of
            calling your function on the summary and the new messages.
        summarizer_id: Recorded with each stored summary (default: the function's qualified
            name); a summary recorded under another id is not used. Change it (say, to the
            model's name) to stop serving summaries made before.
        checkpoints: How many summaries a thread keeps listed, so an edit near the end falls
            back to a recent one instead of summarizing everything again. The default, 16, is
            below ``SummarizeCompressor``'s 64 so that existing threads keep their store use.
        summarizer_timeout: Seconds one call of your function may take.
        store_timeout: Seconds one store call may take (``None``: no bound beyond the store's).
        on_store_error: ``"raise"`` the :class:`StoreError` (default) or ``"bypass"`` the store:
            summarize without it when it cannot be read, return the summary when it cannot be
            written.

    Returns:
        A decorator turning ``summarize`` into a :class:`CachedSummarizer`.

    Raises:
        ConfigurationError: For any invalid argument (including ``@cached_summarizer`` used
            without parentheses).
    """
    # The settings CachedSummarizer takes, as the compressor takes them.
    settings: dict[str, Any] = {
        "namespace": namespace,
        "ttl": ttl,
        "summarizer_id": summarizer_id,
        "checkpoints": checkpoints,
        "summarizer_timeout": summarizer_timeout,
        "store_timeout": store_timeout,
        "on_store_error": on_store_error,
    }
    # Checked here, so that a mistake is reported where the decorator is written.
    _check_settings(store, extend, **settings)

    def decorate(summarize: PlainSummarizer) -> CachedSummarizer:
        return CachedSummarizer(summarize, store, extend=extend, **settings)

    return decorate
