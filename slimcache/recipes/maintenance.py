"""Looking into a thread's cached summaries, and removing them.

These read the same keys the compressor writes (see :class:`~slimcache.stores.ThreadKeys`): the
thread's index, which lists its cached ranges and carries a copy of the newest one, and one
entry per range; or the same pair of keys ``cached_summarizer`` writes beside them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from slimcache._exceptions import ConfigurationError
from slimcache.core.plan import History
from slimcache.core.results import Stats
from slimcache.core.settings.compressor import DEFAULTS, check_fields
from slimcache.core.settings.groups import Fingerprint
from slimcache.core.store_io import StoreIO
from slimcache.messages import Message, check_messages
from slimcache.recipes.summarizer_ranges import WrapHistory
from slimcache.recipes.window_memory import ConversationWindowMemory
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex
from slimcache.stores.keys import (
    HEADS,
    ThreadKeys,
    decode_thread_id,
    normalize_namespace,
    thread_of,
)
from slimcache.stores.protocol import Store, SupportsScanKeys, positive_int

__all__ = [
    "MAX_PAGES",
    "RangeInfo",
    "ThreadListing",
    "clear_thread",
    "list_threads",
    "thread_ranges",
]

MAX_PAGES = 20
"""Pages of keys one :func:`list_threads` call reads at most before it hands back a cursor."""


@dataclass(frozen=True)
class RangeInfo:
    """One cached range of a thread, as listed in its index.

    Attributes:
        start: First message index covered.
        end: Last message index covered (inclusive).
        key: The store key of the range's entry.
        stored: Whether the range's own entry is in the store (the index may outlive it).
        head: Whether it is the newest range, the one the index carries a copy of.
        fingerprint: Hash of exactly the covered messages.
        summary: The summary text, or ``None`` when neither the entry nor the head has it.
        summary_tokens: Tokens of the summary, or ``None``.
        covered_tokens: Tokens of the messages it covers, or ``None``.
        created_at: Unix time the summary was made, or ``None``.
        summarizer: Which summarizer made it, or ``None``.
        strategy: The strategy that produced it, or ``None``.
        valid: Whether it still matches the history given, or ``None`` without one.
    """

    start: int
    end: int
    key: str
    stored: bool
    head: bool
    fingerprint: str
    summary: str | None
    summary_tokens: int | None
    covered_tokens: int | None
    created_at: float | None
    summarizer: str | None
    strategy: str | None
    valid: bool | None

    @property
    def summary_chars(self) -> int | None:
        """Characters of the summary, or ``None``."""
        return None if self.summary is None else len(self.summary)

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the summary was made, or ``None``."""
        if self.created_at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.created_at)


@dataclass(frozen=True)
class ThreadListing:
    """A page of the threads a store holds.

    Attributes:
        threads: Each thread id (``~`` and a hash for an id too long to keep as it is) and
            the front doors that keep it (``compressor``, ``window memory``, ``compaction``,
            ``cached_summarizer``), in key order (Redis: in no order).
        cursor: Where the next page starts, for ``list_threads(cursor=...)``; ``None``: the
            listing is complete.
    """

    threads: dict[str, tuple[str, ...]]
    cursor: str | None


async def list_threads(
    store: Store,
    *,
    namespace: str = DEFAULTS.namespace,
    cursor: str | None = None,
    limit: int = 100,
    page_size: int = 500,
) -> ThreadListing:
    """List the threads ``store`` holds under ``namespace``, a bounded page at a time.

    The store's keys are read ``page_size`` at a time (a Redis ``SCAN``, one SQL ``SELECT``,
    one S3 listing) until ``limit`` threads are found, the keys run out, or
    :data:`MAX_PAGES` pages were read; the cursor returned goes on from there. A thread listed
    at the end of one page may be listed again at the start of the next (Redis: anywhere).

    Args:
        store: A store with ``scan_keys`` (:class:`~slimcache.stores.SupportsScanKeys`).
        namespace: The namespace the front doors were given.
        cursor: ``None`` for the first page, then the cursor the previous one returned.
        limit: Threads to list, at least (all those of the last page of keys read).
        page_size: Keys one read of the store returns, about.

    Raises:
        ConfigurationError: The store cannot list its keys, or an argument is invalid.
        StoreError: The store failed.
    """
    if not isinstance(store, SupportsScanKeys):
        raise ConfigurationError(
            f"{type(store).__name__} cannot list its keys (it has no scan_keys), so its "
            "threads cannot be listed"
        )
    positive_int("limit", limit)
    positive_int("page_size", page_size)
    prefix = f"{normalize_namespace(namespace)}thread_"
    found: dict[str, list[str]] = {}
    for _ in range(MAX_PAGES):
        keys, cursor = await store.scan_keys(prefix, cursor=cursor, count=page_size)
        for key in keys:
            parsed = thread_of(key, namespace)
            if parsed is not None and parsed[1] in HEADS:
                thread = decode_thread_id(parsed[0]) or parsed[0]
                kinds = found.setdefault(thread, [])
                if HEADS[parsed[1]] not in kinds:
                    kinds.append(HEADS[parsed[1]])
        if cursor is None or len(found) >= limit:
            break
    return ThreadListing({thread: tuple(kinds) for thread, kinds in found.items()}, cursor)


def _store_io(store: Store, store_timeout: float | None) -> StoreIO:
    """Calls to ``store`` as the compressor makes them: bounded, counted, errors translated."""
    if not isinstance(store, Store):
        raise ConfigurationError(
            f"store must have async get, set and delete methods, got {type(store).__name__}"
        )
    timeout = check_fields(store_timeout=store_timeout)["store_timeout"]
    return StoreIO(store, Stats(), timeout=timeout, ttl=None)


async def thread_ranges(
    store: Store,
    thread_id: str | int,
    *,
    namespace: str = DEFAULTS.namespace,
    messages: Sequence[Message] | None = None,
    fingerprint: Fingerprint = DEFAULTS.fingerprint,
    source: Literal["compressor", "wrapped"] = "compressor",
    store_timeout: float | None = DEFAULTS.store_timeout,
) -> list[RangeInfo]:
    """List the cached ranges of a thread, oldest first.

    Args:
        store: The store the compressor writes to.
        thread_id: The thread.
        namespace: The compressor's key namespace.
        messages: The conversation's current history; when given, each range says whether
            it still matches it.
        fingerprint: The compressor's ``fingerprint`` setting, which ``messages`` are
            checked by.
        source: Whose summaries to list: ``"compressor"``, those of
            :class:`~slimcache.SummarizeCompressor` (and of everything built on it), or
            ``"wrapped"``, those of a :func:`~slimcache.cached_summarizer` function, whose
            ranges start at the first message and are checked by content.
        store_timeout: Seconds one store call may take before it fails with
            :class:`StoreTimeout` (``None``: no bound beyond the store's own).

    Returns:
        One :class:`RangeInfo` per range in the thread's index; empty when the thread has
        no (usable) index.

    Raises:
        ConfigurationError: ``fingerprint`` or ``source`` is not one of the values above,
            ``fingerprint="id"`` is given with ``source="wrapped"``, or the store or
            ``store_timeout`` is invalid.
        InvalidInput: The thread id or a message is malformed.
        StoreError: The store failed (:class:`StoreTimeout`: a call ran out of time).
    """
    by_id = check_fields(fingerprint=fingerprint)["fingerprint"] == "id"
    if source not in ("compressor", "wrapped"):
        raise ConfigurationError(f"source must be 'compressor' or 'wrapped', got {source!r}")
    if source == "wrapped" and by_id:
        raise ConfigurationError(
            "cached_summarizer checks messages by content: fingerprint='id' does not apply"
        )
    io = _store_io(store, store_timeout)
    keys = ThreadKeys(thread_id, namespace)
    index_key, range_key = keys.index, keys.summary
    matches: Callable[[int, int, str], bool] | None = None
    if source == "wrapped":
        index_key, range_key = keys.wrapped.index, keys.wrapped.summary
        if messages is not None:
            matches = WrapHistory(check_messages(messages)).matches
    elif messages is not None:
        matches = History(check_messages(messages), by_id=by_id).matches
    index = ThreadIndex.parse(await io.get(index_key), thread=keys.encoded)
    if index is None:
        return []
    range_keys = [range_key(r.start, r.end) for r in index.ranges]
    raws = await io.get_many(range_keys) if range_keys else []
    infos = [
        _range_info(ref, key, raw, index.head, keys.encoded, matches)
        for ref, key, raw in zip(index.ranges, range_keys, raws, strict=True)
    ]
    return sorted(infos, key=lambda info: (info.end, info.start))


def _range_info(
    ref: RangeRef,
    key: str,
    raw: str | None,
    head: SummaryEntry,
    thread: str,
    matches: Callable[[int, int, str], bool] | None,
) -> RangeInfo:
    """One range of an index, with what its entry (or else the index's head) says of it."""
    entry = SummaryEntry.parse(raw, thread=thread, start=ref.start, end=ref.end)
    is_head = (head.start, head.end, head.fingerprint) == (ref.start, ref.end, ref.fingerprint)
    known = entry if entry is not None else (head if is_head else None)
    return RangeInfo(
        start=ref.start,
        end=ref.end,
        key=key,
        stored=raw is not None,
        head=is_head,
        fingerprint=ref.fingerprint,
        summary=known.summary if known else None,
        summary_tokens=known.summary_tokens if known else None,
        covered_tokens=known.covered_tokens if known else None,
        created_at=known.created_at if known else None,
        summarizer=known.summarizer if known else None,
        strategy=known.strategy if known else None,
        valid=None if matches is None else matches(ref.start, ref.end, ref.fingerprint),
    )


async def clear_thread(
    store: Store,
    thread_id: str | int,
    *,
    namespace: str = DEFAULTS.namespace,
    store_timeout: float | None = DEFAULTS.store_timeout,
) -> int:
    """Delete everything slimcache keeps for a thread.

    That is the compressor's index and every range it lists (ranges first and the index last,
    so an interrupted clear leaves an index that still names what remains), and then the
    thread's lease, its window-memory history, its compaction session record and link, and
    the entries of ``cached_summarizer``.

    Args:
        store: The store the compressor writes to.
        thread_id: The thread.
        namespace: The compressor's key namespace.
        store_timeout: Seconds one store call may take before it fails with
            :class:`StoreTimeout` (``None``: no bound beyond the store's own).

    Returns:
        How many of the compressor's keys were deleted: the index plus its ranges (0 when
        there is no index).

    Raises:
        ConfigurationError: The store or ``store_timeout`` is invalid.
        InvalidInput: The thread id is malformed.
        StoreError: The store failed (:class:`StoreTimeout`: a call ran out of time).
    """
    io = _store_io(store, store_timeout)
    keys = ThreadKeys(thread_id, namespace)
    deleted = await _clear_ranges(io, keys, keys.index, keys.summary)
    wrapped = keys.wrapped
    await _clear_ranges(io, keys, wrapped.index, wrapped.summary)
    for key in (keys.lease, keys.session, keys.link):
        await io.delete(key)
    memory = ConversationWindowMemory(store, 1, namespace=namespace, store_timeout=io.timeout)
    await memory.clear(thread_id)
    return deleted


async def _clear_ranges(
    io: StoreIO, keys: ThreadKeys, index_key: str, range_key: Callable[[int, int], str]
) -> int:
    raw = await io.get(index_key)
    if raw is None:
        return 0
    index = ThreadIndex.parse(raw, thread=keys.encoded)
    targets: set[str] = set()
    if index is not None:
        targets.update(range_key(r.start, r.end) for r in index.ranges)
        targets.add(range_key(index.head.start, index.head.end))
    for key in sorted(targets):
        await io.delete(key)
    await io.delete(index_key)
    return len(targets) + 1
