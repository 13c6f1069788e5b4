"""The optional ``get_many`` ability (:class:`~slimcache.stores.SupportsGetMany`)."""

from __future__ import annotations

import pytest

from slimcache.testing.base import (
    UNUSUAL_KEYS,
    ConformanceBase,
    StoreFactory,
    _unique,
)

__all__ = ["GetManyConformance"]


@pytest.mark.asyncio
class GetManyConformance(ConformanceBase):
    """Cases of ``get_many``; skipped for a store without it."""

    async def test_get_many_keeps_order_and_reports_missing(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_get_many(await store_factory())
        a, b, c, missing = _unique("a"), _unique("b"), _unique("c"), _unique("missing")
        await store.set(a, "A")
        await store.set(b, "B")
        await store.set(c, "C")
        assert await store.get_many([c, missing, a, b]) == ["C", None, "A", "B"]
        assert await store.get_many([b]) == ["B"]
        assert await store.get_many([missing]) == [None]
        assert await store.get_many([a, a, missing, a]) == ["A", "A", None, "A"]
        assert await store.get_many((b, c)) == ["B", "C"]

    async def test_get_many_of_nothing_is_empty(self, store_factory: StoreFactory) -> None:
        store = self.require_get_many(await store_factory())
        assert await store.get_many([]) == []

    async def test_get_many_unusual_keys(self, store_factory: StoreFactory) -> None:
        store = self.require_get_many(await store_factory())
        for index, key in enumerate(UNUSUAL_KEYS):
            await store.set(key, f"value #{index}")
        expected: list[str | None] = [f"value #{i}" for i in range(len(UNUSUAL_KEYS))]
        assert await store.get_many(list(UNUSUAL_KEYS)) == expected

    async def test_get_many_skips_expired_entries(self, store_factory: StoreFactory) -> None:
        store = self.require_get_many(await store_factory())
        kept, short, witness = _unique("kept"), _unique("short"), _unique("witness")
        await store.set(kept, "stays")
        await store.set(short, "goes", ttl=self.short_ttl)
        # get_many is the first read of the expired key, so it must do its own expiry check.
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.get_many([short, kept]) == [None, "stays"]
