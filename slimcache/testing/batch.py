"""The optional ``batch`` ability (:class:`~slimcache.stores.SupportsBatch`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from slimcache._exceptions import ConfigurationError
from slimcache.stores.protocol import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
)
from slimcache.testing.base import (
    UNUSUAL_KEYS,
    UNUSUAL_VALUES,
    ConformanceBase,
    StoreFactory,
    _unique,
)

__all__ = ["BatchConformance"]


@pytest.mark.asyncio
class BatchConformance(ConformanceBase):
    """Cases of ``batch``; skipped for a store without it."""

    async def test_batch_runs_in_order_with_each_operations_meaning(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_batch(await store_factory())
        lease, index = _unique("claim"), _unique("listing")
        summary, stale = _unique("summary"), _unique("stale")
        await store.set(index, "index v1")
        await store.set(stale, "old range")
        # Take a lease, then read what it guards: as slimcache does once it has its turn.
        taken = await store.batch([SetIfAbsentOp(lease, "token-1"), GetOp(index), GetOp(summary)])
        assert taken == [True, "index v1", None]
        assert await store.batch([SetIfAbsentOp(lease, "token-2"), GetOp(lease)]) == [
            False,
            "token-1",
        ]
        # Commit: the range, the index if unchanged, stale ranges gone, the lease released.
        committed = await store.batch(
            [
                SetOp(summary, "range"),
                CompareAndSetOp(index, "index v1", "index v2"),
                DeleteOp(stale),
                CompareAndDeleteOp(lease, "token-1"),
                GetOp(index),
            ]
        )
        assert committed == [None, True, None, True, "index v2"]
        stored = [await store.get(k) for k in (summary, index, stale, lease)]
        assert stored == ["range", "index v2", None, None]
        # Conditions that do not hold leave their keys alone, and later operations still run.
        refused = await store.batch(
            [
                CompareAndSetOp(index, "index v1", "lost"),
                CompareAndSetOp(summary, None, "lost"),
                CompareAndDeleteOp(index, "index v1"),
                SetOp(stale, "written after"),
            ]
        )
        assert refused == [False, False, False, None]
        assert await store.get(index) == "index v2"
        assert await store.get(summary) == "range"
        assert await store.get(stale) == "written after"
        assert await store.batch([]) == []

    async def test_batch_unusual_keys_and_values(self, store_factory: StoreFactory) -> None:
        store = self.require_batch(await store_factory())
        values = [UNUSUAL_VALUES[i % len(UNUSUAL_VALUES)] for i in range(len(UNUSUAL_KEYS))]
        writes: list[StoreOp] = [SetOp(k, v) for k, v in zip(UNUSUAL_KEYS, values, strict=True)]
        assert await store.batch(writes) == [None] * len(writes)
        reads: list[StoreOp] = [GetOp(key) for key in UNUSUAL_KEYS]
        assert await store.batch(reads) == values
        key = UNUSUAL_KEYS[-1]
        assert await store.batch([CompareAndSetOp(key, values[-1], "later")]) == [True]
        assert await store.batch([CompareAndDeleteOp(key, "later")]) == [True]

    async def test_batch_ttls_are_honoured(self, store_factory: StoreFactory) -> None:
        store = self.require_batch(await store_factory())
        short, claimed, kept = _unique("short"), _unique("claimed"), _unique("kept")
        await store.batch(
            [
                SetOp(short, "goes", ttl=self.short_ttl),
                SetIfAbsentOp(claimed, "goes", ttl=self.short_ttl),
                SetOp(kept, "stays"),
            ]
        )
        assert await self.wait_until_expired(store, short), "batched set ignored its ttl"
        assert await self.wait_until_expired(store, claimed), "batched claim ignored its ttl"
        assert await store.get(kept) == "stays"

    async def test_batch_rejects_malformed_operations_before_running_any(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_batch(await store_factory())
        key = _unique("untouched")
        malformed: list[Any] = [
            "GET key",
            SetOp(key, 42),  # type: ignore[arg-type]
            SetOp(key, "v", ttl=-1),
            CompareAndDeleteOp(key, None),  # type: ignore[arg-type]
        ]
        for bad in malformed:
            with pytest.raises(ConfigurationError):
                await store.batch([SetOp(key, "written?"), bad])
            assert await store.get(key) is None

    async def test_batch_race_on_a_lease_has_one_winner(self, store_factory: StoreFactory) -> None:
        store = self.require_batch(await store_factory())
        lease, guarded = _unique("claim"), _unique("guarded")
        await store.set(guarded, "state")
        gate = asyncio.Event()

        async def contender(index: int) -> list[Any]:
            await gate.wait()
            return await store.batch([SetIfAbsentOp(lease, f"token {index}"), GetOp(guarded)])

        tasks = [asyncio.ensure_future(contender(i)) for i in range(self.race_tasks)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        winners = [i for i, (won, _) in enumerate(results) if won]
        assert len(winners) == 1, f"{len(winners)} winners: {winners}"
        assert all(seen == "state" for _, seen in results)
        assert await store.get(lease) == f"token {winners[0]}"
