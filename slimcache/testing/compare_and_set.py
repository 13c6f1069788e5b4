"""The optional ``compare_and_set`` / ``compare_and_delete`` ability
(:class:`~slimcache.stores.SupportsCompareAndSet`)."""

from __future__ import annotations

import asyncio

import pytest

from slimcache.testing.base import (
    UNUSUAL_VALUES,
    ConformanceBase,
    StoreFactory,
    _unique,
)

__all__ = ["CompareAndSetConformance"]


@pytest.mark.asyncio
class CompareAndSetConformance(ConformanceBase):
    """Cases of ``compare_and_set`` and ``compare_and_delete``; skipped for a store without them."""

    async def test_compare_and_set_on_absent_key(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key, other = _unique("new"), _unique("never")
        assert await store.compare_and_set(other, "anything", "value") is False
        assert await store.get(other) is None
        assert await store.compare_and_set(key, None, "first") is True
        assert await store.get(key) == "first"
        assert await store.compare_and_set(key, None, "second") is False
        assert await store.get(key) == "first"

    async def test_compare_and_set_on_matching_value(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("listing")
        await store.set(key, "version 1")
        assert await store.compare_and_set(key, "version 1", "version 2") is True
        assert await store.get(key) == "version 2"
        # The old value no longer matches; the new one does.
        assert await store.compare_and_set(key, "version 1", "version 3") is False
        assert await store.get(key) == "version 2"
        assert await store.compare_and_set(key, "version 2", "version 2") is True
        assert await store.get(key) == "version 2"

    async def test_compare_and_set_on_mismatching_value(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("held")
        await store.set(key, "current")
        assert await store.compare_and_set(key, "stale", "lost") is False
        assert await store.compare_and_set(key, "curren", "lost") is False
        assert await store.compare_and_set(key, "current ", "lost") is False
        assert await store.compare_and_set(key, "", "lost") is False
        assert await store.compare_and_set(key, None, "lost") is False
        assert await store.get(key) == "current"

    async def test_compare_and_set_unusual_values(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("unusual")
        previous: str | None = None
        for value in UNUSUAL_VALUES:
            assert await store.compare_and_set(key, previous, value) is True, f"value {value!r}"
            assert await store.get(key) == value
            previous = value
        # The empty string is a value, not "absent".
        empty = _unique("empty")
        await store.set(empty, "")
        assert await store.compare_and_set(empty, None, "claimed") is False
        assert await store.compare_and_set(empty, "", "filled") is True
        assert await store.get(empty) == "filled"

    async def test_compare_and_set_over_expired_entry(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        stale, lapsed = _unique("stale"), _unique("lapsed")
        await store.set(stale, "old", ttl=self.short_ttl)
        await store.set(lapsed, "old", ttl=self.short_ttl)
        await self.expire_without_reading(store, stale)
        # An expired entry holds nothing: its old value no longer matches, and None does.
        assert await store.compare_and_set(stale, "old", "revived") is False
        assert await store.compare_and_set(lapsed, None, "fresh") is True
        assert await store.get(lapsed) == "fresh"
        assert await store.get(stale) is None

    async def test_compare_and_set_ttl_is_honoured(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        claimed, replaced, rescued = _unique("claimed"), _unique("replaced"), _unique("rescued")
        assert await store.compare_and_set(claimed, None, "goes", ttl=self.short_ttl) is True
        await store.set(replaced, "forever")
        assert await store.compare_and_set(replaced, "forever", "goes", ttl=self.short_ttl) is True
        await store.set(rescued, "doomed", ttl=self.short_ttl)
        assert await store.compare_and_set(rescued, "doomed", "stays") is True
        assert await store.get(claimed) in ("goes", None)
        assert await self.wait_until_expired(store, claimed), "entry outlived its ttl"
        assert await self.wait_until_expired(store, replaced), "replacement ignored its ttl"
        # The write without a ttl dropped the ttl of the entry it replaced, as set does.
        assert await store.get(rescued) == "stays"

    @pytest.mark.parametrize("start", ["absent", "present"])
    async def test_compare_and_set_race_has_one_winner(
        self, store_factory: StoreFactory, start: str
    ) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("contested")
        expected = None if start == "absent" else "shared starting point"
        if expected is not None:
            await store.set(key, expected)
        gate = asyncio.Event()

        async def contender(index: int) -> bool:
            await gate.wait()
            return await store.compare_and_set(key, expected, f"contender {index}")

        tasks = [asyncio.ensure_future(contender(i)) for i in range(self.race_tasks)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        winners = [i for i, won in enumerate(results) if won]
        assert len(winners) == 1, f"{len(winners)} winners: {winners}"
        assert await store.get(key) == f"contender {winners[0]}"

    async def test_compare_and_delete(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key, kept, missing = _unique("claim"), _unique("kept"), _unique("missing")
        await store.set(key, "mine")
        await store.set(kept, "theirs")
        assert await store.compare_and_delete(kept, "mine") is False
        assert await store.get(kept) == "theirs"
        assert await store.compare_and_delete(missing, "mine") is False
        assert await store.get(missing) is None
        assert await store.compare_and_delete(key, "mine") is True
        assert await store.get(key) is None
        assert await store.compare_and_delete(key, "mine") is False
        # A deleted key can be claimed again.
        assert await store.compare_and_set(key, None, "later") is True
        assert await store.get(key) == "later"

    async def test_compare_and_delete_leaves_expired_entry_alone(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("lapsed-lease")
        await store.set(key, "mine", ttl=self.short_ttl)
        await self.expire_without_reading(store, key)
        assert await store.compare_and_delete(key, "mine") is False
        assert await store.get(key) is None

    async def test_compare_and_delete_race_has_one_winner(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("released")
        await store.set(key, "claimed")
        gate = asyncio.Event()

        async def releaser() -> bool:
            await gate.wait()
            return await store.compare_and_delete(key, "claimed")

        tasks = [asyncio.ensure_future(releaser()) for _ in range(self.race_tasks)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        assert results.count(True) == 1, f"{results.count(True)} releasers deleted the entry"
        assert await store.get(key) is None
