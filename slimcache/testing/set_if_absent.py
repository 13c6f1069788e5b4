"""The optional ``set_if_absent`` ability (:class:`~slimcache.stores.SupportsSetIfAbsent`)."""

from __future__ import annotations

import asyncio

import pytest

from slimcache.testing.base import (
    ConformanceBase,
    StoreFactory,
    _unique,
)

__all__ = ["SetIfAbsentConformance"]


@pytest.mark.asyncio
class SetIfAbsentConformance(ConformanceBase):
    """Cases of ``set_if_absent``; skipped for a store without it."""

    async def test_set_if_absent_writes_only_once(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("claim")
        assert await store.set_if_absent(key, "first") is True
        assert await store.set_if_absent(key, "second") is False
        assert await store.get(key) == "first"

    async def test_set_if_absent_after_plain_set_fails(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("taken")
        await store.set(key, "plain")
        assert await store.set_if_absent(key, "claim") is False
        assert await store.get(key) == "plain"

    async def test_set_if_absent_after_delete_succeeds(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("freed")
        await store.set(key, "old")
        await store.delete(key)
        assert await store.set_if_absent(key, "new") is True
        assert await store.get(key) == "new"

    async def test_set_if_absent_race_has_one_winner(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("contested")
        start = asyncio.Event()

        async def contender(index: int) -> bool:
            await start.wait()
            return await store.set_if_absent(key, f"contender {index}")

        tasks = [asyncio.ensure_future(contender(i)) for i in range(self.race_tasks)]
        await asyncio.sleep(0)
        start.set()
        results = await asyncio.gather(*tasks)
        winners = [i for i, won in enumerate(results) if won]
        assert len(winners) == 1, f"{len(winners)} winners: {winners}"
        assert await store.get(key) == f"contender {winners[0]}"

    async def test_set_if_absent_after_expiry_succeeds(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key, witness = _unique("claim"), _unique("witness")
        assert await store.set_if_absent(key, "first lease", ttl=self.short_ttl) is True
        # Never read the key before the claim: a read may clean the expired entry up and hide
        # a set_if_absent that treats an expired-but-present entry as taken.
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.set_if_absent(key, "second lease") is True
        assert await store.get(key) == "second lease"

    async def test_set_if_absent_over_expired_plain_set(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key, witness = _unique("stale"), _unique("witness")
        await store.set(key, "stale", ttl=self.short_ttl)
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.set_if_absent(key, "fresh") is True
        assert await store.get(key) == "fresh"

    async def test_set_if_absent_ttl_expires(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key, forever = _unique("claim"), _unique("forever")
        assert await store.set_if_absent(forever, "stays") is True
        assert await store.set_if_absent(key, "goes", ttl=self.short_ttl) is True
        assert await self.wait_until_expired(store, key), "entry outlived its ttl"
        assert await store.get(forever) == "stays"
