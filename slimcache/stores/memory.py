"""The in-process store: a dict with TTLs, the embedded default and reference implementation."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from slimcache._exceptions import ConfigurationError, StoreError
from slimcache.stores.protocol import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    DatabaseTarget,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
    check_ops,
    positive_int,
    validate_ttl,
)

__all__ = ["MemoryStore"]

_IN_MEMORY = DatabaseTarget("memory")


class MemoryStore:
    """A dict-backed store for one process: TTLs honoured, optionally bounded (LRU).

    It is the embedded default and the reference implementation of every optional ability.
    Safe under concurrent asyncio tasks and threads: each operation runs under one lock and
    never awaits while holding it.

    Args:
        max_entries: When set, the least recently used entries are dropped beyond this count.
        clock: Monotonic clock in seconds, replaceable in tests.
    """

    expiry_clock = "store"
    """Entries expire by this store's own clock (see :class:`SupportsOwnExpiry`)."""

    def __init__(
        self,
        *,
        max_entries: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries is not None:
            positive_int("max_entries", max_entries)
        self._max_entries = max_entries
        self._clock = clock
        self._data: OrderedDict[str, tuple[str, float | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryStore:
        """Build a store from ``memory://`` (optionally ``memory://?max_entries=1000``)."""
        parts = urlsplit(url)
        if parts.scheme != "memory":
            raise ConfigurationError(f"MemoryStore needs a memory:// URL, got {url!r}")
        for name, value in parse_qsl(parts.query, strict_parsing=False):
            if name != "max_entries":
                raise ConfigurationError(f"unknown memory:// option {name!r} (known: max_entries)")
            try:
                options.setdefault("max_entries", int(value))
            except ValueError:
                raise ConfigurationError(f"max_entries must be an integer, got {value!r}") from None
        unknown = sorted(set(options) - {"max_entries", "clock"})
        if unknown:
            raise ConfigurationError(
                f"unknown MemoryStore option(s) {', '.join(unknown)} (known: max_entries, clock)"
            )
        return cls(**options)

    @property
    def call_timeout(self) -> float | None:
        """``0``: a call never waits (one lock, held for a dict operation, never across an await).

        ``None`` for a subclass, which may override a call with one that waits: it is bounded
        by the compressor as any store is (see :class:`SupportsCallTimeout`).
        """
        return 0.0 if type(self) is MemoryStore else None

    async def scan_keys(
        self, prefix: str, *, cursor: str | None = None, count: int = 100
    ) -> tuple[list[str], str | None]:
        """Up to ``count`` live keys that start with ``prefix``, in order, after ``cursor``
        (see :class:`~slimcache.stores.SupportsScanKeys`)."""
        positive_int("count", count)
        with self._lock:
            self._check_open()
            now = self._clock()
            found = sorted(
                key
                for key, (_, expires) in self._data.items()
                if key.startswith(prefix)
                and (cursor is None or key > cursor)
                and (expires is None or expires > now)
            )
        page = found[:count]
        return page, page[-1] if len(found) > count else None

    @property
    def database_target(self) -> DatabaseTarget:
        """``db.system.name="memory"``: this process's memory (see :class:`DatabaseTarget`)."""
        return _IN_MEMORY

    def _live(self, key: str, now: float) -> str | None:
        item = self._data.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and expires <= now:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def _put(self, key: str, value: str, ttl: float | None, now: float) -> None:
        self._data[key] = (value, None if ttl is None else now + ttl)
        self._data.move_to_end(key)
        if self._max_entries is not None:
            while len(self._data) > self._max_entries:
                self._data.popitem(last=False)

    async def get(self, key: str) -> str | None:
        """Return the value under ``key``, or ``None``."""
        value: str | None = self._locked(GetOp(key))
        return value

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in order."""
        with self._lock:
            self._check_open()
            now = self._clock()
            return [self._live(key, now) for key in keys]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (forever if ``None``)."""
        self._locked(SetOp(key, value, validate_ttl(ttl)))

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is absent; return whether it was written."""
        written: bool = self._locked(SetIfAbsentOp(key, value, validate_ttl(ttl)))
        return written

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` holds ``expected`` (``None``: is absent)."""
        written: bool = self._locked(CompareAndSetOp(key, expected, value, validate_ttl(ttl)))
        return written

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected``."""
        deleted: bool = self._locked(CompareAndDeleteOp(key, expected))
        return deleted

    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self._locked(DeleteOp(key))

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        """Run ``ops`` in order under one lock: atomically (see :class:`SupportsBatch`)."""
        checked = check_ops(ops)
        with self._lock:
            self._check_open()
            now = self._clock()
            return [self._apply(op, now) for op in checked]

    def _locked(self, op: StoreOp) -> Any:
        """Carry out one operation under the lock (every method but ``get_many`` and
        ``batch`` is one)."""
        with self._lock:
            self._check_open()
            return self._apply(op, self._clock())

    def _apply(self, op: StoreOp, now: float) -> Any:
        # The TTL was checked before the lock: by the method that made ``op``, or by check_ops.
        if isinstance(op, GetOp):
            return self._live(op.key, now)
        if isinstance(op, DeleteOp):
            self._data.pop(op.key, None)
            return None
        if isinstance(op, CompareAndDeleteOp):
            if self._live(op.key, now) != op.expected:
                return False
            del self._data[op.key]
            return True
        if isinstance(op, SetOp):
            self._put(op.key, op.value, op.ttl, now)
            return None
        expected = op.expected if isinstance(op, CompareAndSetOp) else None
        if self._live(op.key, now) != expected:
            return False
        self._put(op.key, op.value, op.ttl, now)
        return True

    async def aclose(self) -> None:
        """Drop every entry; the store refuses every call afterwards. Idempotent."""
        with self._lock:
            self._closed = True
            self._data.clear()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("MemoryStore is closed")

    def snapshot(self) -> dict[str, str]:
        """Return a copy of the live entries (for tests and inspection)."""
        with self._lock:
            now = self._clock()
            return {k: v for k, (v, exp) in self._data.items() if exp is None or exp > now}

    def __len__(self) -> int:
        return len(self.snapshot())
