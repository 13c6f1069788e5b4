"""Every store call is bounded: a frozen server or a locked SQLite file gives StoreTimeout in time.

Each real server is frozen with SIGSTOP (its connections stay open, nothing answers), each call
must fail with ``StoreTimeout`` (a ``StoreError``: whatever gave up first, the store's bound or
the driver's own timeout) within the store's ``timeout`` plus a margin for a busy machine,
and once the server is thawed the same store must work again, with no connection left stuck.
A caller's own ``asyncio.wait_for`` must be able to give up on a call early, too.

The assertions are bounds on how long a failure may take, not measurements of speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import redis.asyncio
from slimcache_redis import RedisStore
from slimcache_sql import SQLStore

from slimcache import StoreError, StoreTimeout
from slimcache.stores import GetOp, SetOp, StoreOp
from slimcache.testing import StoreWithCompareAndSet
from tests.servers.redis_server import RedisServer
from tests.servers.sqlite_files import sqlite_url

pytestmark = [pytest.mark.servers, pytest.mark.timeout(300)]

# The timeout the stores get here, and the slack allowed on top of it for a loaded machine.
TIMEOUT = 1.0
MARGIN = 1.5
# How long a caller's own wait_for waits before giving up on a call.
CALLER_WAIT = 0.3
# Only stops a hang; nothing is expected to come near it.
GUARD = 60.0


class Freezable(Protocol):
    def freeze(self) -> None: ...

    def thaw(self) -> None: ...


class FaultStore(StoreWithCompareAndSet, Protocol):
    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool: ...

    async def get_many(self, keys: list[str]) -> list[str | None]: ...


@contextlib.contextmanager
def frozen(server: Freezable) -> Iterator[None]:
    """Keep ``server`` frozen inside the block; it is always thawed on the way out."""
    server.freeze()
    try:
        yield
    finally:
        server.thaw()


def calls_on(store: FaultStore) -> dict[str, Callable[[], Awaitable[object]]]:
    """One call of each kind, on keys that exist (so a write would change something)."""
    return {
        "get": lambda: store.get("k"),
        "get_many": lambda: store.get_many(["k", "other"]),
        "set": lambda: store.set("k", "during"),
        "set_if_absent": lambda: store.set_if_absent("fresh", "during"),
        "delete": lambda: store.delete("k"),
        "compare_and_set": lambda: store.compare_and_set("k", "before", "during"),
        "compare_and_delete": lambda: store.compare_and_delete("k", "before"),
    }


async def seconds_to_store_timeout(call: Callable[[], Awaitable[object]]) -> float:
    """Run ``call``, which must fail with ``StoreTimeout``; return how long that took."""
    start = time.monotonic()
    with pytest.raises(StoreTimeout):
        await asyncio.wait_for(call(), GUARD)
    return time.monotonic() - start


async def assert_every_call_fails_in_time(
    store: FaultStore, only: tuple[str, ...] | None = None
) -> dict[str, float]:
    taken: dict[str, float] = {}
    for name, call in calls_on(store).items():
        if only is not None and name not in only:
            continue
        taken[name] = await seconds_to_store_timeout(call)
    print(f"seconds to StoreTimeout: {taken}")
    slow = {name: seconds for name, seconds in taken.items() if seconds > TIMEOUT + MARGIN}
    assert not slow, f"calls took longer than timeout={TIMEOUT} s + {MARGIN} s: {slow}"
    return taken


async def eventually_works(store: FaultStore) -> None:
    """Wait until the store answers again (calls abandoned earlier may still be unwinding)."""
    deadline = time.monotonic() + GUARD
    while True:
        try:
            await store.set("probe", "back")
            return
        except StoreError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


def connections_in_use(store: object) -> int | None:
    """How many pooled connections are checked out, where the store's pool tells."""
    if isinstance(store, SQLStore):
        pool: Any = store.engine.pool
        in_use: int = pool.checkedout()
        return in_use
    if isinstance(store, RedisStore):
        return len(store.client.connection_pool._in_use_connections)  # no public count
    return None


async def assert_store_works(store: FaultStore, label: str) -> None:
    await eventually_works(store)
    await store.set(label, "after")
    assert await store.get(label) == "after"
    assert await store.compare_and_set(label, "after", "swapped") is True
    assert await store.compare_and_delete(label, "swapped") is True
    # Calls given up on hand their connection back (or drop it) once the driver lets go.
    deadline = time.monotonic() + GUARD
    while connections_in_use(store):
        assert time.monotonic() < deadline, "a connection stayed checked out"
        await asyncio.sleep(0.05)
    # More calls at once than any pool here holds. A busy machine may make a batch miss the
    # bound, so a few tries are allowed; threads or connections stuck for good would fail
    # every one.
    keys = [f"{label}-{i}" for i in range(20)]
    for attempt in range(5):
        try:
            await asyncio.gather(*(store.set(key, key) for key in keys))
            assert await asyncio.gather(*(store.get(key) for key in keys)) == keys
            break
        except StoreError:
            if attempt == 4:
                raise
            await asyncio.sleep(0.5)


async def prepared(store: Any) -> FaultStore:
    """Write the keys the calls use, while the server still answers."""
    await store.set("k", "before")
    await store.set("other", "before")
    fault_store: FaultStore = store
    return fault_store


ServerAndStore = tuple[Freezable, FaultStore]


@pytest.fixture(params=["redis", "postgres", "s3"])
def server_and_factory(request: pytest.FixtureRequest) -> tuple[Freezable, Any]:
    """A real server, and the factory of stores on it."""
    server: Freezable = request.getfixturevalue(f"{request.param}_server")
    return server, request.getfixturevalue(f"{request.param}_store_factory")


async def frozen_target(server_and_factory: tuple[Freezable, Any]) -> ServerAndStore:
    """The server, and a store on it with ``timeout=TIMEOUT`` holding a few keys."""
    server, factory = server_and_factory
    return server, await prepared(await factory(timeout=TIMEOUT))


# -- frozen servers ---------------------------------------------------------------------------


async def test_every_call_fails_in_time_on_a_frozen_server(
    server_and_factory: tuple[Freezable, Any],
) -> None:
    server, store = await frozen_target(server_and_factory)
    with frozen(server):
        await assert_every_call_fails_in_time(store)
        # Still frozen, and calls keep failing in time (nothing queues up behind the first).
        await assert_every_call_fails_in_time(store, only=("get", "set"))
    await assert_store_works(store, "recovered")
    assert await store.get("other") == "before"


async def test_a_caller_can_give_up_early_on_a_frozen_server(
    server_and_factory: tuple[Freezable, Any],
) -> None:
    server, store = await frozen_target(server_and_factory)
    with frozen(server):
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.set("k", "given up"),
            lambda: store.get("k"),
        ]
        for call in calls:
            start = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(call(), CALLER_WAIT)
            waited = time.monotonic() - start
            print(f"seconds until the caller's wait_for returned: {waited:.2f}")
            assert waited <= CALLER_WAIT + MARGIN
    await assert_store_works(store, "after-cancel")


async def test_many_calls_at_once_on_a_frozen_server_all_fail_in_time(
    server_and_factory: tuple[Freezable, Any],
) -> None:
    server, store = await frozen_target(server_and_factory)
    with frozen(server):
        start = time.monotonic()
        results = await asyncio.wait_for(
            asyncio.gather(*(store.get(f"k{i}") for i in range(25)), return_exceptions=True),
            GUARD,
        )
        waited = time.monotonic() - start
    assert all(isinstance(result, StoreTimeout) for result in results), results
    assert waited <= TIMEOUT + MARGIN
    await assert_store_works(store, "after-crowd")


class StallingRedisStore(RedisStore):
    """Before each read or write, the server stops answering for ``STALL`` s, then answers: a
    slow server, not a dead one; every call alone stays within the timeout."""

    server: RedisServer

    def _stall(self) -> None:
        self.server.freeze()
        asyncio.get_running_loop().call_later(STALL, self.server.thaw)

    async def get(self, key: str) -> str | None:
        self._stall()
        return await super().get(key)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self._stall()
        await super().set(key, value, ttl=ttl)


STALL = 0.6


async def test_a_batch_sent_one_call_at_a_time_is_bounded_as_one_call(
    redis_server: RedisServer,
) -> None:
    # A client that decodes replies makes the store send a batch's operations one call at a
    # time. The batch is still one call to its caller: bounded once, not once per operation.
    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    store = StallingRedisStore(client, prefix=f"one-by-one:{uuid.uuid4().hex}:", timeout=TIMEOUT)
    store.server = redis_server
    ops: list[StoreOp] = [
        GetOp("k"),
        SetOp("k", "during"),
        GetOp("other"),
        SetOp("other", "x"),
        GetOp("k"),
    ]
    assert len(ops) * STALL > TIMEOUT + MARGIN
    try:
        try:
            waited = await seconds_to_store_timeout(lambda: store.batch(ops))
        finally:
            redis_server.thaw()
        print(f"seconds to StoreTimeout: {waited:.2f}")
        assert waited <= TIMEOUT + MARGIN
        await asyncio.sleep(STALL)  # the last stall's thaw
        async with RedisStore(client, prefix=store.prefix) as plain:
            await assert_store_works(plain, "after-batch")
    finally:
        await store.aclose()
        await client.aclose()


# -- a locked SQLite file --------------------------------------------------------------------


@contextlib.contextmanager
def exclusive_lock(path: Path, *, locking_mode_exclusive: bool = False) -> Iterator[None]:
    """Hold ``path`` in an exclusive transaction of another connection inside the block."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=GUARD)
    try:
        if locking_mode_exclusive:
            # The lock covers the WAL index too: no other connection may even read.
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO slimcache_entries VALUES ('held', 'x', NULL)")
        try:
            yield
        finally:
            holder.execute("COMMIT")
            if locking_mode_exclusive:
                holder.execute("PRAGMA locking_mode = NORMAL")
                holder.execute("SELECT count(*) FROM slimcache_entries").fetchall()
    finally:
        holder.close()


WRITES = ("set", "set_if_absent", "delete", "compare_and_set", "compare_and_delete")


async def test_writes_fail_in_time_on_a_locked_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    async with SQLStore.from_url(sqlite_url(path), timeout=TIMEOUT) as sql_store:
        store = await prepared(sql_store)
        with exclusive_lock(path):
            await assert_every_call_fails_in_time(store, only=WRITES)
            # WAL mode: a writer's lock does not hold readers up.
            assert await store.get("k") == "before"
            assert await store.get_many(["k", "other"]) == ["before", "before"]
        await assert_store_works(store, "unlocked")
        assert await store.get("held") == "x"


async def test_reads_and_writes_fail_in_time_on_an_exclusively_held_file(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    async with SQLStore.from_url(sqlite_url(path)) as earlier:
        await prepared(earlier)
    # A store that opens its connections while another connection holds the file, WAL index
    # and all: even reading has to wait for it.
    async with SQLStore.from_url(sqlite_url(path), timeout=TIMEOUT) as sql_store:
        store: FaultStore = sql_store
        with exclusive_lock(path, locking_mode_exclusive=True):
            await assert_every_call_fails_in_time(store)
        await assert_store_works(store, "released")
        assert await store.get("k") == "before"


async def test_a_caller_can_give_up_early_on_a_locked_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "waiting.db"
    async with SQLStore.from_url(sqlite_url(path), timeout=TIMEOUT) as sql_store:
        store = await prepared(sql_store)
        with exclusive_lock(path):
            start = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(store.set("k", "given up"), CALLER_WAIT)
            waited = time.monotonic() - start
            print(f"seconds until the caller's wait_for returned: {waited:.2f}")
            assert waited <= CALLER_WAIT + MARGIN
        await assert_store_works(store, "after-cancel")
