"""The basic protocol: ``get``, ``set`` and ``delete``, whatever the keys and values."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from slimcache.stores.protocol import (
    Store,
)
from slimcache.testing.base import (
    UNUSUAL_KEYS,
    UNUSUAL_VALUES,
    ConformanceBase,
    StoreFactory,
    _large_value,
    _unique,
)

__all__ = ["BasicConformance"]


@pytest.mark.asyncio
class BasicConformance(ConformanceBase):
    """Cases of the basic protocol every store has: reads, writes, deletes, unusual keys and values,
    a large value and concurrent writers."""

    async def test_store_satisfies_protocol(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        assert isinstance(store, Store)
        for name in ("get", "set", "delete"):
            assert inspect.iscoroutinefunction(getattr(store, name)), f"{name} must be async"

    async def test_missing_key_reads_none(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        assert await store.get(_unique("never-written")) is None

    async def test_set_then_get(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("greeting")
        await store.set(key, "hello")
        assert await store.get(key) == "hello"

    async def test_overwrite_replaces_value(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("counter")
        await store.set(key, "first")
        await store.set(key, "second")
        assert await store.get(key) == "second"
        await store.set(key, "a much longer third value than either before it")
        assert await store.get(key) == "a much longer third value than either before it"
        await store.set(key, "4")
        assert await store.get(key) == "4"

    async def test_delete_removes_key(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key, kept = _unique("doomed"), _unique("kept")
        await store.set(key, "value")
        await store.set(kept, "other")
        await store.delete(key)
        assert await store.get(key) is None
        assert await store.get(kept) == "other"

    async def test_delete_missing_key_is_not_an_error(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("absent")
        await store.delete(key)
        await store.delete(key)
        assert await store.get(key) is None

    async def test_set_after_delete(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("phoenix")
        await store.set(key, "before")
        await store.delete(key)
        await store.set(key, "after")
        assert await store.get(key) == "after"

    async def test_empty_value_is_not_missing(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("empty")
        await store.set(key, "")
        assert await store.get(key) == ""

    async def test_unusual_keys_round_trip(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        for index, key in enumerate(UNUSUAL_KEYS):
            await store.set(key, f"value #{index} for {key}")
        for index, key in enumerate(UNUSUAL_KEYS):
            assert await store.get(key) == f"value #{index} for {key}", f"key {key!r}"
        # Keys that differ only in ways a lossy encoding might fold together stay distinct.
        assert await store.get("with:colons:in") is None
        assert await store.get("with/slashes/in") is None
        assert await store.get("leading-slash") is None
        assert await store.get("trailing-slash") is None
        for key in UNUSUAL_KEYS:
            await store.delete(key)
            assert await store.get(key) is None, f"key {key!r} survived delete"

    async def test_unusual_values_round_trip(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        keys = [_unique(f"value-{i}") for i in range(len(UNUSUAL_VALUES))]
        for key, value in zip(keys, UNUSUAL_VALUES, strict=True):
            await store.set(key, value)
        for key, value in zip(keys, UNUSUAL_VALUES, strict=True):
            assert await store.get(key) == value, f"value {value!r}"

    async def test_large_value_round_trips_exactly(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("large")
        value = _large_value(self.large_value_size)
        await store.set(key, value)
        got = await store.get(key)
        assert got is not None
        assert len(got) == len(value)
        assert got == value

    async def test_concurrent_writers_on_distinct_keys(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        keys = [_unique(f"parallel-{i}") for i in range(self.race_tasks)]

        async def write_then_read(index: int, key: str) -> str | None:
            await store.set(key, f"value {index}")
            return await store.get(key)

        results = await asyncio.gather(*(write_then_read(i, k) for i, k in enumerate(keys)))
        assert results == [f"value {i}" for i in range(len(keys))]
