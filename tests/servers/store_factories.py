"""The store factories of the tests: one fixture of one shape for every kind of store.

Each ``<kind>_store_factory`` fixture yields ``make``: ``await make(**options)`` opens a fresh
store, kept apart from the test's other stores, and every store it made is closed at teardown.
``options`` go to the store's ``from_url`` (to ``MemoryStore`` for memory), over the default
that keeps the store apart; a test that wants two stores on the same data names it.

- ``memory_store_factory``: in the process; each store is a dict of its own.
- ``sqlite_store_factory``: each store on a new SQLite file under ``tmp_path``.
- ``postgres_store_factory``: on the session's PostgreSQL (``postgres_server``), each store
  on a new table ``t_<uuid hex>`` unless ``table`` is given.
- ``redis_store_factory``: on the session's Redis (``redis_server``), each store under a key
  prefix of its own unless ``prefix`` is given.
- ``redis_cluster_store_factory``: the same on the session's Redis Cluster (``redis_cluster``).
- ``s3_store_factory``: on the session's moto S3 (``s3_server``), each store in a new bucket
  unless ``bucket`` is given (the URL's bucket; other options go to ``S3Store.from_url``).
- ``shared_by_processes``: not a fixture: the URL and options of a Redis or SQLite store that
  several worker processes and the test open.
- ``dynamodb_store_factory``: on the session's moto DynamoDB (``dynamodb_server``), each store
  on a new table, created on first use, unless ``table`` is given.

Servers start only when a factory of theirs is asked for.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import pytest_asyncio
from slimcache_dynamodb import DynamoDBStore
from slimcache_redis import RedisStore
from slimcache_s3 import S3Store
from slimcache_sql import SQLStore

from slimcache import MemoryStore
from tests.servers.dynamodb_server import STORE_TIMEOUT, DynamoDBServer, unique_table_name
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_cluster import RedisClusterServers
from tests.servers.redis_server import RedisServer
from tests.servers.s3_server import S3Server
from tests.servers.sqlite_files import sqlite_url

__all__ = [
    "StoreFactoryOf",
    "closing_stores",
    "dynamodb_store_factory",
    "memory_store_factory",
    "postgres_store_factory",
    "redis_cluster_store_factory",
    "redis_store_factory",
    "s3_store_factory",
    "shared_by_processes",
    "sqlite_store_factory",
]


class _Closable(Protocol):
    async def aclose(self) -> None: ...


_S = TypeVar("_S", bound=_Closable)
_S_co = TypeVar("_S_co", covariant=True)


class StoreFactoryOf(Protocol[_S_co]):
    """The ``make`` a store factory fixture yields (``StoreFactoryOf[RedisStore]``, ...)."""

    async def __call__(self, **options: Any) -> _S_co:
        """Open a fresh store; ``options`` go to the store's ``from_url``."""
        ...


@asynccontextmanager
async def closing_stores(
    open_store: Callable[..., Awaitable[_S]],
) -> AsyncIterator[StoreFactoryOf[_S]]:
    """A ``make`` opening stores with ``open_store(**options)``; all closed on the way out."""
    made: list[_S] = []

    async def make(**options: Any) -> _S:
        store = await open_store(**options)
        made.append(store)
        return store

    try:
        yield make
    finally:
        for store in made:
            await store.aclose()


def _unique_prefix() -> str:
    return f"slimcache-test:{uuid.uuid4().hex}:"


@pytest_asyncio.fixture
async def memory_store_factory() -> AsyncIterator[StoreFactoryOf[MemoryStore]]:
    """``MemoryStore(**options)`` s: each its own dict, apart without any prefix."""

    async def open_store(**options: Any) -> MemoryStore:
        return MemoryStore(**options)

    async with closing_stores(open_store) as make:
        yield make


@pytest_asyncio.fixture
async def sqlite_store_factory(tmp_path: Path) -> AsyncIterator[StoreFactoryOf[SQLStore]]:
    """``SQLStore`` s on SQLite, each on a new database file under ``tmp_path``."""
    numbers = itertools.count()

    async def open_store(**options: Any) -> SQLStore:
        path = tmp_path / f"slimcache-{next(numbers)}.db"
        return SQLStore.from_url(sqlite_url(path), **options)

    async with closing_stores(open_store) as make:
        yield make


@pytest_asyncio.fixture
async def postgres_store_factory(
    postgres_server: PostgresServer,
) -> AsyncIterator[StoreFactoryOf[SQLStore]]:
    """``SQLStore`` s on the session's PostgreSQL, each on a new table (``t_<uuid hex>``)."""

    async def open_store(**options: Any) -> SQLStore:
        options.setdefault("table", f"t_{uuid.uuid4().hex}")
        return SQLStore.from_url(postgres_server.url, **options)

    async with closing_stores(open_store) as make:
        yield make


@pytest_asyncio.fixture
async def redis_store_factory(
    redis_server: RedisServer,
) -> AsyncIterator[StoreFactoryOf[RedisStore]]:
    """``RedisStore`` s on the session's Redis, each under a key prefix of its own."""

    async def open_store(**options: Any) -> RedisStore:
        options.setdefault("prefix", _unique_prefix())
        return RedisStore.from_url(redis_server.url, **options)

    async with closing_stores(open_store) as make:
        yield make


@pytest_asyncio.fixture
async def redis_cluster_store_factory(
    redis_cluster: RedisClusterServers,
) -> AsyncIterator[StoreFactoryOf[RedisStore]]:
    """``RedisStore`` s on the session's Redis Cluster, each under a key prefix of its own."""

    async def open_store(**options: Any) -> RedisStore:
        options.setdefault("prefix", _unique_prefix())
        return RedisStore.from_url(redis_cluster.url, **options)

    async with closing_stores(open_store) as make:
        yield make


@pytest_asyncio.fixture
async def s3_store_factory(s3_server: S3Server) -> AsyncIterator[StoreFactoryOf[S3Store]]:
    """``S3Store`` s on the session's moto server, each in a new bucket of its own."""

    async def open_store(bucket: str | None = None, **options: Any) -> S3Store:
        if bucket is None:
            bucket = await asyncio.to_thread(s3_server.create_bucket)
        for name, value in s3_server.client_options.items():
            options.setdefault(name, value)
        # The store's timeout (5 s unless given) bounds every call, so a dead endpoint fails a
        # test quickly; the client's connect and read timeouts are derived from it.
        return S3Store.from_url(f"s3://{bucket}", **options)

    async with closing_stores(open_store) as make:
        yield make


@pytest_asyncio.fixture
async def dynamodb_store_factory(
    dynamodb_server: DynamoDBServer,
) -> AsyncIterator[StoreFactoryOf[DynamoDBStore]]:
    """``DynamoDBStore`` s on the session's moto server, each on a new table of its own."""

    async def open_store(table: str | None = None, **options: Any) -> DynamoDBStore:
        for name, value in dynamodb_server.client_options.items():
            options.setdefault(name, value)
        options.setdefault("timeout", STORE_TIMEOUT)
        return DynamoDBStore.from_url(f"dynamodb://{table or unique_table_name()}", **options)

    async with closing_stores(open_store) as make:
        yield make


def shared_by_processes(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, prefix: str
) -> tuple[str, dict[str, Any]]:
    """The URL and options of a store several worker processes and the test open: ``redis``,
    the session's Redis under a fresh key prefix beginning with ``prefix``, or ``sqlite``, a new
    file whose table is made here (two processes making it at once would race)."""
    if kind == "redis":
        url: str = request.getfixturevalue("redis_server").url
        return url, {"prefix": f"{prefix}:{uuid.uuid4().hex}:"}
    url = sqlite_url(tmp_path / "shared.db")

    async def create() -> None:
        store = SQLStore.from_url(url)
        try:
            await store.setup()
        finally:
            await store.aclose()

    asyncio.run(create())
    return url, {}
