"""Listing and clearing a thread make their store calls as the compressor does.

Each call is bounded by ``store_timeout`` (a frozen Redis server, a SQLite file another
connection holds), and a driver's own exception comes out as ``StoreError``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions
from slimcache_sql import SQLStore

from slimcache import StoreError, StoreTimeout
from slimcache.recipes.maintenance import clear_thread, thread_ranges
from slimcache.stores import ThreadKeys
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex
from tests.servers.redis_server import RedisServer
from tests.servers.sqlite_files import sqlite_url
from tests.stores.test_store_faults import exclusive_lock, frozen

pytestmark = [pytest.mark.servers, pytest.mark.timeout(300)]

# The bound given to the functions, the stores' own (far longer) bound, and the slack allowed
# on a loaded machine.
STORE_TIMEOUT = 1.0
STORES_OWN = 30.0
MARGIN = 1.5
# Only stops a hang; nothing is expected to come near it.
GUARD = 10.0


async def seconds_to_store_timeout(call: Callable[[], Awaitable[object]]) -> float:
    """Run ``call``, which must fail with ``StoreTimeout``; return how long that took."""
    start = time.monotonic()
    with pytest.raises(StoreTimeout):
        await asyncio.wait_for(call(), GUARD)
    return time.monotonic() - start


async def a_cached_thread(store: Any, thread_id: str) -> None:
    """Write an index listing one range, and the range, as the compressor does."""
    keys = ThreadKeys(thread_id)
    entry = SummaryEntry(
        thread=keys.encoded,
        start=0,
        end=3,
        fingerprint="f",
        summary="the summary",
        summary_tokens=3,
        covered_tokens=40,
        created_at=time.time(),
        summarizer="s",
        prompt="p",
        strategy="extend",
    )
    index = ThreadIndex(thread=keys.encoded, ranges=(RangeRef(0, 3, "f"),), head=entry)
    await store.set(keys.summary(0, 3), entry.to_json())
    await store.set(keys.index, index.to_json())


async def test_listing_and_clearing_fail_in_time_on_a_frozen_redis_server(
    redis_server: RedisServer, redis_store_factory: Any
) -> None:
    store = await redis_store_factory(timeout=STORES_OWN)
    await a_cached_thread(store, "t")
    assert [r.summary for r in await thread_ranges(store, "t")] == ["the summary"]
    with frozen(redis_server):
        listing = await seconds_to_store_timeout(
            lambda: thread_ranges(store, "t", store_timeout=STORE_TIMEOUT)
        )
        clearing = await seconds_to_store_timeout(
            lambda: clear_thread(store, "t", store_timeout=STORE_TIMEOUT)
        )
    print(f"seconds to StoreTimeout: listing {listing:.2f}, clearing {clearing:.2f}")
    assert listing <= STORE_TIMEOUT + MARGIN
    assert clearing <= STORE_TIMEOUT + MARGIN


async def test_clearing_fails_in_time_on_a_held_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    async with SQLStore.from_url(sqlite_url(path)) as earlier:
        await a_cached_thread(earlier, "t")
    # Opened while another connection holds the file, WAL index and all: reads wait too.
    url = sqlite_url(path)
    async with SQLStore.from_url(url, timeout=STORES_OWN, busy_timeout=STORES_OWN) as store:
        with exclusive_lock(path, locking_mode_exclusive=True):
            for call in (
                lambda: clear_thread(store, "t", store_timeout=STORE_TIMEOUT),
                lambda: thread_ranges(store, "t", store_timeout=STORE_TIMEOUT),
            ):
                assert await seconds_to_store_timeout(call) <= STORE_TIMEOUT + MARGIN
        # Nothing was lost: the thread is still there, and clears once the file is free.
        assert len(await thread_ranges(store, "t")) == 1
        assert await clear_thread(store, "t") == 2
        assert await thread_ranges(store, "t") == []


class BrokenConnection:
    """A store whose driver reports a lost connection on every call."""

    def __init__(self) -> None:
        self.calls = 0

    def _fail(self) -> None:
        self.calls += 1
        raise redis.exceptions.ConnectionError("Connection reset by peer")

    async def get(self, key: str) -> str | None:
        self._fail()
        return None

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self._fail()

    async def delete(self, key: str) -> None:
        self._fail()


CALLS: dict[str, Callable[[Any], Awaitable[object]]] = {
    "thread_ranges": lambda store: thread_ranges(store, "t"),
    "clear_thread": lambda store: clear_thread(store, "t"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
async def test_a_driver_error_comes_out_as_store_error(call: str) -> None:
    store = BrokenConnection()
    with pytest.raises(StoreError, match="ConnectionError: Connection reset by peer") as caught:
        await CALLS[call](store)
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
    assert not isinstance(caught.value, StoreTimeout)
    assert store.calls == 1
