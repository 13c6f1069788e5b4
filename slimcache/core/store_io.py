"""The gateway every front door calls the store through: bounded, counted, ``StoreError``.

:class:`StoreIO` wraps one store call at a time, a batch of operations included (one round trip
where the store can, else one call each), bounds it in time, counts it in the caller's
:class:`~slimcache.core.results.Stats`, and turns whatever the store raises into a
:class:`~slimcache.StoreError`. The compressor, the window memories, compaction and
``cached_summarizer`` all call their stores through it. Beside it: what this process remembers
per store (the entries it read, whether a store's method takes ``ttl``) and the background
clean-ups it runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar, cast

from slimcache._exceptions import ConfigurationError, StoreError, StoreTimeout
from slimcache._process import register
from slimcache.core import recorder as reporting
from slimcache.core.results import Stats
from slimcache.stores.entries import SummaryEntry, ThreadIndex
from slimcache.stores.protocol import (
    CompareAndSetOp,
    GetOp,
    SetOp,
    Store,
    StoreOp,
    SupportsBatch,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsSetIfAbsent,
    abilities,
    call_bound,
    expires_by_itself,
)
from slimcache.stores.toolkit import run_bounded, run_op

__all__ = [
    "KNOWN_ENTRIES",
    "RETRY_FIRST",
    "RETRY_MOST",
    "StoreIO",
    "background_done",
    "bounds_itself",
    "in_background",
    "known_entries",
    "once_the_store_answers",
    "refresh_due",
    "stamped",
    "takes_ttl",
]

logger = logging.getLogger("slimcache")

_T = TypeVar("_T")

KNOWN_ENTRIES = 2048
"""Summary entries a process remembers per store (see :meth:`ThreadCache.known`); all are
forgotten past this."""

# Per store: (thread key prefix, start, end, fingerprint) -> an entry read from it.
_KnownEntries = dict[tuple[str, int, int, str], SummaryEntry]
_KNOWN: weakref.WeakKeyDictionary[Any, _KnownEntries] = register(
    __name__, "known entries", "the entries read per store", weakref.WeakKeyDictionary()
)


def known_entries(store: object) -> _KnownEntries | None:
    """The entries this process read from ``store``; ``None`` for a store that cannot be
    told apart from others (not hashable, or no weak reference to it)."""
    try:
        found = _KNOWN.get(store)
        if found is None:
            found = _KNOWN[store] = {}
    except TypeError:
        return None
    return found


# Clean-ups running in the background, referenced until they finish.
_BACKGROUND: set[asyncio.Task[None]] = set()


def in_background(coro: Coroutine[Any, Any, None]) -> None:
    """Run a clean-up in the background, keeping a reference until it finishes."""
    task = asyncio.get_running_loop().create_task(coro)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


RETRY_FIRST = 0.1
"""Seconds before the first try of :func:`once_the_store_answers`; each wait after doubles it,
up to :data:`RETRY_MOST`."""
RETRY_MOST = 1.0
"""The longest wait between two tries of :func:`once_the_store_answers`."""


async def once_the_store_answers(
    attempt: Callable[[], Awaitable[None]],
    until: float,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Try ``attempt`` until it gets through the store: a clean-up after a store failure, run
    in the background.

    It is tried after :data:`RETRY_FIRST` seconds, then after waits doubling up to
    :data:`RETRY_MOST`, as long as a try would start by ``until`` (on ``clock``). Returns
    whether a try got through: ``False`` when none could start by ``until``.

    Raises:
        StoreError: The last try's, when every try failed.
    """
    delay = RETRY_FIRST
    error: StoreError | None = None
    while clock() + delay <= until:
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MOST)
        try:
            await attempt()
        except StoreError as exc:
            error = exc
            continue
        return True
    if error is not None:
        raise error
    return False


async def background_done() -> None:
    """Wait until the clean-ups running in the background of this event loop have ended,
    those they start included."""
    loop = asyncio.get_running_loop()
    while pending := [task for task in _BACKGROUND if task.get_loop() is loop]:
        await asyncio.wait(pending)


# Whether a store type's method takes ``ttl=``, found once per type and method.
_TAKES_TTL: dict[tuple[type, str], bool] = register(
    __name__, "ttl keywords", "whether a store type's method takes ttl", {}
)


def takes_ttl(store: object, method: str) -> bool:
    """Whether ``store``'s ``method`` accepts a ``ttl`` keyword (or any keyword).

    A store written to the minimal interface (``set(key, value)``) does not: slimcache then
    never passes one, and refuses a configured TTL it could not honour.
    """
    found = _TAKES_TTL.get((type(store), method))
    if found is None:
        try:
            parameters = inspect.signature(getattr(store, method)).parameters.values()
        except (TypeError, ValueError):  # no signature to read (a builtin): assume it does
            found = True
        else:
            found = any(
                (p.name == "ttl" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD
                for p in parameters
            )
        _TAKES_TTL[(type(store), method)] = found
    return found


def refresh_due(index: ThreadIndex, ttl: float | None) -> bool:
    """Whether a hit on ``index`` should give it a fresh TTL: entries have one, and half of it
    has passed since the index was written (by this worker's clock), so a thread in use never
    expires, for a write every half TTL instead of one per hit."""
    if ttl is None:
        return False
    return index.written_at is None or time.time() - index.written_at > ttl / 2


def stamped(index: ThreadIndex, ttl: float | None) -> ThreadIndex:
    """``index`` recording when it is written, where entries have a TTL."""
    if ttl is None:
        return index
    return dataclasses.replace(index, written_at=round(time.time(), 3))


def bounds_itself(store: object, timeout: float | None) -> bool:
    """Whether ``store``'s own bound on a call is enough: no longer than ``timeout``."""
    own = call_bound(store)
    return timeout is None or (own is not None and own <= timeout)


def _words(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


# What asyncio and the drivers say when a connection is used from another event loop than the
# one it was opened in (asyncio.run per request, with a store made once).
_OTHER_LOOP = ("Event loop is closed", "attached to a different loop", "different event loop")

_OTHER_LOOP_HINT = (
    "; the store's connections belong to an event loop that has closed or is not this one "
    "(asyncio.run on each request opens a new loop): from synchronous code, call slimcache "
    "through slimcache.sync.run, which keeps one loop for the process"
)
"""Added to a store error that came of a connection used from another event loop."""


def _from_another_loop(exc: BaseException) -> bool:
    """Whether ``exc``, or the driver error it wraps, says its connection has another loop."""
    for error in (exc, exc.__cause__):
        if isinstance(error, RuntimeError) and any(text in str(error) for text in _OTHER_LOOP):
            return True
    return False


class StoreIO:
    """Calls the store, each call bounded by ``timeout`` seconds and counted in ``stats``.

    A store that bounds its own calls within ``timeout`` (:class:`SupportsCallTimeout`) is
    awaited directly; any other call runs under :func:`run_bounded`, which returns at the
    bound whatever the store does.

    Args:
        store: The store.
        stats: The counters to update.
        timeout: Seconds one call may take; ``None`` for no bound.
        ttl: TTL of the entries written.

    Raises:
        ConfigurationError: ``ttl`` is set but the store's ``set`` takes no ``ttl``.
    """

    def __init__(
        self, store: Store, stats: Stats, *, timeout: float | None, ttl: float | None
    ) -> None:
        if ttl is not None and not takes_ttl(store, "set"):
            raise ConfigurationError(
                f"ttl={ttl!r} needs a store whose set() takes a ttl keyword; "
                f"{type(store).__name__}.set() does not (leave ttl unset with this store)"
            )
        self.store = store
        self.stats = stats
        self.timeout = timeout
        self.ttl = ttl
        self.timeouts = 0  # calls that ran out of time, so far
        # The bound this object enforces itself: none when the store's own is enough.
        self._bound = None if bounds_itself(store, timeout) else timeout
        # The store's abilities, looked up once per type of store (see abilities).
        can = abilities(store)
        self.atomic = can.set_if_absent
        """Whether the store has an atomic ``set_if_absent``."""
        self.batches = can.batch
        """Whether the store runs several operations in one round trip (``batch``)."""
        self.compares = can.compare_and_set
        """Whether the store has ``compare_and_set`` and ``compare_and_delete``."""
        self.expires_itself = expires_by_itself(store)
        """Whether the store times every TTL by a clock of its own (``expiry_clock``)."""
        self._reads_many = can.get_many
        # Entries expire with a TTL: none is then served from this process's memory.
        self.known = known_entries(store) if ttl is None else None

    async def _call(
        self,
        what: str | Callable[[], str],
        method: Callable[..., Awaitable[_T]],
        *args: Any,
        **kwargs: Any,
    ) -> _T:
        """``method(*args, **kwargs)``, bounded and counted, with every failure a
        ``StoreError``: whatever a user's store raises, even before it returns a coroutine.
        ``what`` may be a function, called only when the call fails."""
        try:
            call = method(*args, **kwargs)
            if self._bound is not None:
                call = run_bounded(call, self._bound)
            if reporting.recorder is not None:  # process-wide metrics and a span, when turned on
                call = reporting.recorder.store_call(self.store, method, call)
            return await call
        except asyncio.TimeoutError as exc:
            self.stats.store_errors += 1
            self.timeouts += 1
            after = "" if self.timeout is None else f" after {self.timeout:g}s"
            raise StoreTimeout(f"store {_words(what)} timed out{after}") from exc
        except StoreTimeout:  # the store's own bound
            self.stats.store_errors += 1
            self.timeouts += 1
            raise
        except StoreError as exc:
            self.stats.store_errors += 1
            if _from_another_loop(exc):
                raise StoreError(f"{exc}{_OTHER_LOOP_HINT}") from exc.__cause__
            raise
        except Exception as exc:
            self.stats.store_errors += 1
            hint = _OTHER_LOOP_HINT if _from_another_loop(exc) else ""
            failed = f"store {_words(what)} failed: {type(exc).__name__}: {exc}{hint}"
            raise StoreError(failed) from exc

    def _ttl(self, method: str, ttl: float | None) -> dict[str, float]:
        """The ``ttl`` keyword to pass: none when there is no TTL, or the store takes none."""
        return {} if ttl is None or not takes_ttl(self.store, method) else {"ttl": ttl}

    async def get(self, key: str) -> str | None:
        """Read one key."""
        self.stats.store_reads += 1
        value: Any = await self._call(lambda: f"get {key!r}", self.store.get, key)
        return value if isinstance(value, str) else None

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Read several keys, in one round trip where the store can."""
        store = self.store
        if not self._reads_many:
            return [await self.get(key) for key in keys]
        self.stats.store_reads += 1
        values: Any = await self._call(
            f"get_many of {len(keys)} keys",
            cast(SupportsGetMany, store).get_many,
            keys,
        )
        if not isinstance(values, list) or len(values) != len(keys):
            raise StoreError(f"get_many returned {values!r:.80} for {len(keys)} keys")
        return [value if isinstance(value, str) else None for value in values]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Write one key (``ttl`` defaults to the entries' TTL)."""
        self.stats.store_writes += 1
        ttl_kw = self._ttl("set", ttl or self.ttl)
        await self._call(f"set {key!r}", self.store.set, key, value, **ttl_kw)

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None) -> bool:
        """Write one key if absent; the store must have the ability."""
        assert self.atomic, "set_if_absent on a store without it"
        store = cast(SupportsSetIfAbsent, self.store)
        self.stats.store_writes += 1
        ttl_kw = self._ttl("set_if_absent", ttl)
        won: bool = await self._call(
            f"set_if_absent {key!r}", store.set_if_absent, key, value, **ttl_kw
        )
        return won

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Write one key if it holds ``expected``; the store must have the ability."""
        assert self.compares, "compare-and-set on a store without it"
        store = cast(SupportsCompareAndSet, self.store)
        self.stats.store_writes += 1
        ttl_kw = self._ttl("compare_and_set", ttl or self.ttl)
        won: bool = await self._call(
            f"compare_and_set {key!r}", store.compare_and_set, key, expected, value, **ttl_kw
        )
        return won

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Delete one key if it holds ``expected``; the store must have the ability."""
        assert self.compares, "compare-and-set on a store without it"
        store = cast(SupportsCompareAndSet, self.store)
        self.stats.store_deletes += 1
        done: bool = await self._call(
            f"compare_and_delete {key!r}", store.compare_and_delete, key, expected
        )
        return done

    async def delete(self, key: str) -> None:
        """Delete one key."""
        self.stats.store_deletes += 1
        await self._call(f"delete {key!r}", self.store.delete, key)

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        """Run ``ops`` in order: one round trip on a store with ``batch``, else one call each.

        Conditional operations need the store's abilities (``set_if_absent``,
        ``compare_and_set``) when it has no ``batch``.
        """
        store = self.store
        if not self.batches:
            return [await run_op(self, op) for op in ops]
        self.stats.store_batches += 1
        results: Any = await self._call(
            f"batch of {len(ops)} operations",
            cast(SupportsBatch, store).batch,
            ops,
        )
        if not isinstance(results, list) or len(results) != len(ops):
            raise StoreError(f"batch returned {results!r:.80} for {len(ops)} operations")
        return [
            (result if isinstance(result, str) else None) if isinstance(op, GetOp) else result
            for op, result in zip(ops, results, strict=True)
        ]

    def index_op(self, key: str, expected_raw: str | None, index: ThreadIndex) -> StoreOp:
        """Writing the index under ``key``: with compare-and-set where the store can, against
        ``expected_raw``, so that a newer index another worker wrote is never overwritten.

        With a TTL the index records when it was written (see :func:`refresh_due`)."""
        value = stamped(index, self.ttl).to_json()
        if self.compares:
            return CompareAndSetOp(key, expected_raw, value, self.ttl)
        return SetOp(key, value, self.ttl)

    async def write_index(self, key: str, expected_raw: str | None, index: ThreadIndex) -> bool:
        """Write the index under ``key``; with compare-and-set, only if it still holds
        ``expected_raw``.

        Returns:
            Whether it was written (``False``: another worker wrote it in between).
        """
        op = self.index_op(key, expected_raw, index)
        written = await run_op(self, op)
        return bool(written) if isinstance(op, CompareAndSetOp) else True

    async def undo(self, key: str, written: str, previous: str | None) -> None:
        """Put ``key`` back to ``previous`` (``None``: absent) after this process wrote
        ``written`` there, unless another worker has overwritten it since (where the store
        compares). A failure is logged: the write it undoes had already failed."""
        try:
            if self.compares:
                if previous is None:
                    await self.compare_and_delete(key, written)
                else:
                    await self.compare_and_set(key, written, previous)
            elif previous is None:
                await self.delete(key)
            else:
                await self.set(key, previous)
        except StoreError as exc:
            logger.error("could not restore %s after a failed write: %s", key, exc)

    async def refresh(
        self,
        range_key: str,
        entry: SummaryEntry,
        index_key: str,
        index_raw: str | None,
        index: ThreadIndex,
    ) -> None:
        """Give a served range and its index a fresh TTL: one batch where the store runs them.

        The index is written against ``index_raw`` (see :meth:`index_op`). A failure is
        logged: the hit it follows is served all the same.
        """
        ops = [
            SetOp(range_key, entry.to_json(), self.ttl),
            self.index_op(index_key, index_raw, index),
        ]
        try:
            await self.batch(ops)
        except StoreError as exc:
            logger.warning("could not refresh the TTL of thread %s: %s", entry.thread, exc)
