"""Isolation between stores and closing (:class:`~slimcache.stores.SupportsClose`)."""

from __future__ import annotations

import pytest

from slimcache.stores.protocol import (
    SupportsClose,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsSetIfAbsent,
)
from slimcache.testing.base import (
    ConformanceBase,
    StoreFactory,
    _unique,
)

__all__ = ["LifecycleConformance"]


@pytest.mark.asyncio
class LifecycleConformance(ConformanceBase):
    """Cases of isolation between the factory's stores and of ``aclose``."""

    async def test_stores_from_factory_are_isolated(self, store_factory: StoreFactory) -> None:
        first = await store_factory()
        second = await store_factory()
        key = _unique("shared-name")
        await first.set(key, "from first")
        assert await second.get(key) is None
        await second.set(key, "from second")
        assert await first.get(key) == "from first"
        assert await second.get(key) == "from second"
        await second.delete(key)
        assert await first.get(key) == "from first"
        assert await second.get(key) is None
        if isinstance(second, SupportsGetMany):
            assert await second.get_many([key]) == [None]
        if isinstance(second, SupportsSetIfAbsent):
            assert await second.set_if_absent(key, "claimed by second") is True
            assert await first.get(key) == "from first"
        if isinstance(second, SupportsCompareAndSet):
            assert await second.compare_and_set(key, "from first", "not mine") is False
            assert await second.compare_and_delete(key, "from first") is False
            assert await first.get(key) == "from first"

    async def test_aclose_is_clean_and_idempotent(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        if not isinstance(store, SupportsClose):
            pytest.skip(f"{type(store).__name__} has no aclose")
        await store.set(_unique("before-close"), "value")
        await store.aclose()
        # Factories close what they made at teardown, and user code may close twice.
        await store.aclose()

    async def test_closing_one_store_leaves_others_working(
        self, store_factory: StoreFactory
    ) -> None:
        closed = await store_factory()
        if not isinstance(closed, SupportsClose):
            pytest.skip(f"{type(closed).__name__} has no aclose")
        other = await store_factory()
        key = _unique("survivor")
        await other.set(key, "before")
        await closed.aclose()
        await other.set(key, "after")
        assert await other.get(key) == "after"
