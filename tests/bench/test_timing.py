"""The timing proxy keeps exactly the abilities of the store it wraps."""

from __future__ import annotations

from collections.abc import Sequence

from slimcache import MemoryStore
from slimcache.bench.timing import timed_store
from slimcache.stores import SupportsCompareAndSet, SupportsGetMany, SupportsSetIfAbsent
from tests.fakes import CountingStore


class GetManyOnly(CountingStore):
    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        return [self.data.get(k) for k in keys]


async def test_timed_store_shows_only_the_abilities_of_the_store() -> None:
    plain = timed_store(CountingStore())
    every = timed_store(MemoryStore())
    get_many_only = timed_store(GetManyOnly())
    assert not isinstance(plain, (SupportsSetIfAbsent, SupportsGetMany, SupportsCompareAndSet))
    assert isinstance(every, SupportsSetIfAbsent)
    assert isinstance(every, SupportsGetMany)
    assert isinstance(every, SupportsCompareAndSet)
    assert isinstance(get_many_only, SupportsGetMany)
    assert not isinstance(get_many_only, (SupportsSetIfAbsent, SupportsCompareAndSet))
    assert type(every) is type(timed_store(MemoryStore()))

    await every.set("k", "v")
    assert await every.get("k") == "v"
    assert isinstance(every, SupportsGetMany)
    assert await every.get_many(["k", "x"]) == ["v", None]
    assert isinstance(every, SupportsSetIfAbsent)
    assert not await every.set_if_absent("k", "w")
    assert isinstance(every, SupportsCompareAndSet)
    assert not await every.compare_and_set("k", "other", "w")
    assert await every.compare_and_set("k", "v", "w")
    assert not await every.compare_and_delete("k", "v")
    assert await every.compare_and_delete("k", "w")
    await every.delete("k")
    assert len(every.take_samples()) == 9
    assert every.take_samples() == []
