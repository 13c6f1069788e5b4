"""What the in-memory store does beyond the shared conformance suite.

LRU bounding, TTLs under an injected clock (no sleeping), concurrency from tasks and threads,
``from_url`` options and ``snapshot``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from slimcache import ConfigurationError, MemoryStore, Store, StoreError, open_store
from slimcache.stores import SupportsClose, SupportsGetMany, SupportsSetIfAbsent


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_memory_store_has_every_ability() -> None:
    store = MemoryStore()
    assert isinstance(store, Store)
    assert isinstance(store, SupportsSetIfAbsent)
    assert isinstance(store, SupportsGetMany)
    assert isinstance(store, SupportsClose)


# -- LRU bound ----------------------------------------------------------------------------------


async def test_bound_evicts_least_recently_written() -> None:
    store = MemoryStore(max_entries=2)
    await store.set("a", "1")
    await store.set("b", "2")
    await store.set("c", "3")
    assert store.snapshot() == {"b": "2", "c": "3"}
    assert await store.get("a") is None


async def test_read_refreshes_recency() -> None:
    store = MemoryStore(max_entries=2)
    await store.set("a", "1")
    await store.set("b", "2")
    assert await store.get("a") == "1"
    await store.set("c", "3")
    assert store.snapshot() == {"a": "1", "c": "3"}


async def test_get_many_refreshes_recency() -> None:
    store = MemoryStore(max_entries=3)
    for key in ("a", "b", "c"):
        await store.set(key, key.upper())
    assert await store.get_many(["a", "b"]) == ["A", "B"]
    await store.set("d", "D")
    assert set(store.snapshot()) == {"a", "b", "d"}


async def test_overwrite_refreshes_recency() -> None:
    store = MemoryStore(max_entries=2)
    await store.set("a", "1")
    await store.set("b", "2")
    await store.set("a", "1 again")
    await store.set("c", "3")
    assert store.snapshot() == {"a": "1 again", "c": "3"}


async def test_failed_set_if_absent_counts_as_a_use() -> None:
    store = MemoryStore(max_entries=2)
    await store.set("a", "1")
    await store.set("b", "2")
    assert await store.set_if_absent("a", "other") is False
    await store.set("c", "3")
    assert store.snapshot() == {"a": "1", "c": "3"}


async def test_bound_of_one_keeps_only_the_last_write() -> None:
    store = MemoryStore(max_entries=1)
    for index in range(5):
        await store.set(f"k{index}", str(index))
    assert store.snapshot() == {"k4": "4"}
    assert len(store) == 1


async def test_unbounded_store_keeps_everything() -> None:
    store = MemoryStore()
    for index in range(1000):
        await store.set(f"k{index}", str(index))
    assert len(store) == 1000
    assert await store.get("k0") == "0"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_bad_bound_is_rejected(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_entries"):
        MemoryStore(max_entries=bad)


# -- TTL with a fake clock ----------------------------------------------------------------------


async def test_entry_expires_exactly_at_its_ttl(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    await store.set("k", "v", ttl=10)
    clock.advance(9.999)
    assert await store.get("k") == "v"
    clock.advance(0.001)
    assert await store.get("k") is None


async def test_entry_without_ttl_never_expires(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    await store.set("k", "v")
    clock.advance(10**9)
    assert await store.get("k") == "v"


async def test_overwrite_resets_the_ttl(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    await store.set("k", "v1", ttl=10)
    clock.advance(8)
    await store.set("k", "v2", ttl=10)
    clock.advance(8)
    assert await store.get("k") == "v2"
    await store.set("k", "v3")
    clock.advance(100)
    assert await store.get("k") == "v3"


async def test_expired_entries_are_absent_everywhere(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    await store.set("short", "s", ttl=1)
    await store.set("long", "l", ttl=100)
    clock.advance(1)
    assert store.snapshot() == {"long": "l"}
    assert len(store) == 1
    assert await store.get_many(["short", "long"]) == [None, "l"]
    assert await store.get("short") is None


async def test_set_if_absent_over_expired_entry(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    assert await store.set_if_absent("lock", "first", ttl=5) is True
    clock.advance(4)
    assert await store.set_if_absent("lock", "second", ttl=5) is False
    clock.advance(1)
    assert await store.set_if_absent("lock", "third", ttl=5) is True
    assert await store.get("lock") == "third"


async def test_fractional_ttl(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    await store.set("k", "v", ttl=0.25)
    clock.advance(0.2)
    assert await store.get("k") == "v"
    clock.advance(0.05)
    assert await store.get("k") is None


# -- concurrency --------------------------------------------------------------------------------


async def test_many_tasks_on_many_keys() -> None:
    store = MemoryStore()

    async def worker(index: int) -> None:
        for round_ in range(20):
            await store.set(f"k{index}", f"{index}:{round_}")
            await asyncio.sleep(0)
            assert await store.get(f"k{index}") == f"{index}:{round_}"

    await asyncio.gather(*(worker(i) for i in range(50)))
    assert store.snapshot() == {f"k{i}": f"{i}:19" for i in range(50)}


def test_set_if_absent_race_across_threads() -> None:
    store = MemoryStore()
    barrier = threading.Barrier(8)
    results: list[tuple[int, bool]] = []
    results_lock = threading.Lock()

    def contender(index: int) -> None:
        barrier.wait()
        won = asyncio.run(store.set_if_absent("contested", f"thread {index}"))
        with results_lock:
            results.append((index, won))

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [index for index, won in results if won]
    assert len(results) == 8
    assert len(winners) == 1
    assert store.snapshot() == {"contested": f"thread {winners[0]}"}


async def test_bound_holds_under_concurrent_writers() -> None:
    store = MemoryStore(max_entries=10)

    async def writer(index: int) -> None:
        for round_ in range(10):
            await store.set(f"w{index}-{round_}", "v")
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(i) for i in range(20)))
    assert len(store) == 10


# -- from_url -----------------------------------------------------------------------------------


async def test_from_url_plain() -> None:
    store = MemoryStore.from_url("memory://")
    await store.set("k", "v")
    assert await store.get("k") == "v"


async def test_from_url_max_entries() -> None:
    store = MemoryStore.from_url("memory://?max_entries=2")
    for key in ("a", "b", "c"):
        await store.set(key, key)
    assert store.snapshot() == {"b": "b", "c": "c"}


async def test_open_store_memory_url_with_options(clock: FakeClock) -> None:
    store = open_store("memory://?max_entries=2", clock=clock)
    assert isinstance(store, MemoryStore)
    await store.set("k", "v", ttl=1)
    clock.advance(1)
    assert await store.get("k") is None


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("memory://?max_entries=abc", "max_entries"),
        ("memory://?max_entries=0", "max_entries"),
        ("memory://?max_entries=-3", "max_entries"),
        ("memory://?max_entries=2.5", "max_entries"),
        ("memory://?max_size=2", "max_size"),
        ("redis://localhost", "memory://"),
    ],
)
def test_from_url_rejects_bad_urls(url: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        MemoryStore.from_url(url)


def test_from_url_rejects_unknown_keyword() -> None:
    with pytest.raises(ConfigurationError, match="colour"):
        open_store("memory://", colour="blue")


# -- snapshot and close -------------------------------------------------------------------------


async def test_snapshot_is_a_copy() -> None:
    store = MemoryStore()
    await store.set("k", "v")
    snap = store.snapshot()
    snap["k"] = "changed"
    snap["new"] = "x"
    assert store.snapshot() == {"k": "v"}
    assert await store.get("new") is None


async def test_snapshot_of_empty_store() -> None:
    assert MemoryStore().snapshot() == {}
    assert len(MemoryStore()) == 0


async def test_aclose_drops_everything() -> None:
    store = MemoryStore()
    await store.set("a", "1")
    await store.set("b", "2", ttl=60)
    await store.aclose()
    assert store.snapshot() == {}
    # A closed store refuses every call instead of silently working on (or losing) data.
    for call in (store.get("a"), store.set("a", "1"), store.delete("a"), store.get_many(["a"])):
        with pytest.raises(StoreError, match="closed"):
            await call
    await store.aclose()  # idempotent


async def test_async_with_open_store_memory() -> None:
    opened = open_store("memory://")
    assert isinstance(opened, MemoryStore)
    async with opened as store:
        await store.set("k", "v")
        assert await store.get("k") == "v"
    with pytest.raises(StoreError, match="closed"):
        await store.get("k")


async def test_compare_and_set_and_delete(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    assert await store.compare_and_set("k", None, "a", ttl=5) is True
    assert await store.compare_and_set("k", None, "b") is False
    assert await store.compare_and_set("k", "x", "b") is False
    assert await store.compare_and_set("k", "a", "b") is True
    assert await store.get("k") == "b"
    assert await store.compare_and_delete("k", "a") is False
    assert await store.compare_and_delete("k", "b") is True
    assert await store.get("k") is None
    await store.set("t", "old", ttl=1)
    clock.advance(1)
    assert await store.compare_and_set("t", None, "new") is True
