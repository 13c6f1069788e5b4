"""Stores for code that does not await: opened from their URLs, closed through slimcache.sync.

Fixtures:
    open_sync_store: ``make(name)`` opens a fresh store (``"memory"``, ``"redis"``,
        ``"sqlite"``, ``"postgres"`` or ``"s3"``) from its URL, as plain sync code would, and
        closes it at teardown through :func:`slimcache.sync.run`. Unlike the async store
        factories, nothing touches an event loop of the test's own: every call the store
        serves runs on slimcache.sync's loop, as in a Flask app. Servers start only when a
        store of theirs is asked for.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slimcache import Store, open_store
from slimcache.sync import run
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_server import RedisServer
from tests.servers.s3_server import S3Server
from tests.servers.sqlite_files import sqlite_url

__all__ = ["SYNC_STORE_NAMES", "open_sync_store"]

SYNC_STORE_NAMES = ["memory", "redis", "sqlite", "postgres", "s3"]


@pytest.fixture
def open_sync_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], Store]]:
    """``make(name)``: a store opened from its URL in sync code, closed through ``run``."""
    made: list[Store] = []

    def url_and_options(name: str) -> tuple[str, dict[str, Any]]:
        if name == "memory":
            return "memory://", {}
        if name == "redis":
            server: RedisServer = request.getfixturevalue("redis_server")
            return server.url, {"prefix": f"sync-{uuid.uuid4().hex}:"}
        if name == "sqlite":
            return sqlite_url(tmp_path / f"sync-{len(made)}.db"), {}
        if name == "postgres":
            postgres: PostgresServer = request.getfixturevalue("postgres_server")
            return postgres.url, {"table": f"t_{uuid.uuid4().hex}"}
        if name == "s3":
            s3: S3Server = request.getfixturevalue("s3_server")
            return f"s3://{s3.create_bucket()}", dict(s3.client_options)
        raise ValueError(f"no store named {name!r}")

    def make(name: str) -> Store:
        url, options = url_and_options(name)
        store = open_store(url, **options)
        made.append(store)
        return store

    yield make
    for store in made:
        close = getattr(store, "aclose", None)
        if close is not None:
            run(close())
