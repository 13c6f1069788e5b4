"""A store proxy that times every round trip, keeping exactly the abilities of the store."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Sequence
from typing import Any

from slimcache.stores.protocol import (
    Store,
    StoreOp,
    SupportsBatch,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsSetIfAbsent,
)

__all__ = ["TimedStore", "timed_store"]


class TimedStore:
    """A thin proxy recording how long each store round trip takes.

    Build it with :func:`timed_store`, which keeps the optional abilities (``set_if_absent``,
    ``get_many``, ``compare_and_set`` with ``compare_and_delete``, ``batch``) visible only when
    the wrapped store has them, so the compressor behaves on the proxy as on the store itself.
    """

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.samples: list[float] = []

    async def _timed(self, call: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.samples.append(time.perf_counter() - started)

    async def get(self, key: str) -> str | None:
        """Read ``key``."""
        value: str | None = await self._timed(self.inner.get(key))
        return value

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Write ``key``."""
        await self._timed(self.inner.set(key, value, ttl=ttl))

    async def delete(self, key: str) -> None:
        """Delete ``key``."""
        await self._timed(self.inner.delete(key))

    def take_samples(self) -> list[float]:
        """Return the recorded durations (seconds) and start a new list."""
        samples, self.samples = self.samples, []
        return samples


class _TimedSetIfAbsent(TimedStore):
    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        inner = self.inner
        assert isinstance(inner, SupportsSetIfAbsent)
        won: bool = await self._timed(inner.set_if_absent(key, value, ttl=ttl))
        return won


class _TimedGetMany(TimedStore):
    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        inner = self.inner
        assert isinstance(inner, SupportsGetMany)
        values: list[str | None] = await self._timed(inner.get_many(keys))
        return values


class _TimedCompareAndSet(TimedStore):
    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        inner = self.inner
        assert isinstance(inner, SupportsCompareAndSet)
        won: bool = await self._timed(inner.compare_and_set(key, expected, value, ttl=ttl))
        return won

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        inner = self.inner
        assert isinstance(inner, SupportsCompareAndSet)
        deleted: bool = await self._timed(inner.compare_and_delete(key, expected))
        return deleted


class _TimedBatch(TimedStore):
    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        inner = self.inner
        assert isinstance(inner, SupportsBatch)
        results: list[Any] = await self._timed(inner.batch(ops))
        return results


_ABILITIES: tuple[tuple[type, type[TimedStore]], ...] = (
    (SupportsSetIfAbsent, _TimedSetIfAbsent),
    (SupportsGetMany, _TimedGetMany),
    (SupportsCompareAndSet, _TimedCompareAndSet),
    (SupportsBatch, _TimedBatch),
)


@functools.cache
def _timed_class(parts: tuple[type[TimedStore], ...]) -> type[TimedStore]:
    """The proxy class with exactly the abilities ``parts`` add."""
    if not parts:
        return TimedStore
    name = "Timed" + "".join(part.__name__.removeprefix("_Timed") for part in parts)
    made: type[TimedStore] = type(name, parts, {})
    return made


def timed_store(inner: Store) -> TimedStore:
    """Wrap ``inner`` in a :class:`TimedStore` with exactly the optional abilities it has."""
    parts = tuple(part for ability, part in _ABILITIES if isinstance(inner, ability))
    return _timed_class(parts)(inner)
