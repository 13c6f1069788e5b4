"""Test wiring: every server module's fixtures, and ``store_factory`` parametrized over stores.

Servers start lazily: ``store_factory[redis]`` asks for ``redis_store_factory`` only when a test
with that parameter runs, so ``pytest -k memory`` never starts a database.
"""

from __future__ import annotations

import pytest

from slimcache.testing import StoreFactory, clear_process_caches
from tests.servers.llm_server import llm_server  # noqa: F401
from tests.servers.memory import memory_store_factory  # noqa: F401
from tests.servers.postgres_server import postgres_server, postgres_store_factory  # noqa: F401
from tests.servers.redis_cluster import redis_cluster, redis_cluster_store_factory  # noqa: F401
from tests.servers.redis_server import redis_server, redis_store_factory  # noqa: F401
from tests.servers.s3_server import s3_server, s3_store_factory  # noqa: F401
from tests.servers.sqlite_files import sqlite_store_factory  # noqa: F401
from tests.servers.sync_stores import open_sync_store  # noqa: F401

STORE_NAMES = ["memory", "sqlite", "postgres", "redis", "s3"]


# The stores the features built on the core (window memory, sliding window, compaction,
# cached_summarizer) are tested on: in-process, a real Redis and a real SQLite file.
CORE_STORE_NAMES = ["memory", "redis", "sqlite"]


@pytest.fixture(params=CORE_STORE_NAMES)
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """``await make_store()``: a fresh store on memory, a real Redis or a real SQLite file."""
    factory: StoreFactory = request.getfixturevalue(f"{request.param}_store_factory")
    return factory


# The stores the window memories' edge cases are tested on: every bundled kind but S3, whose
# round trips to the emulator make tests of hundreds of calls slow.
WINDOW_STORE_NAMES = ["memory", "redis", "sqlite", "postgres"]


@pytest.fixture(params=WINDOW_STORE_NAMES)
def make_window_store(request: pytest.FixtureRequest) -> StoreFactory:
    """``await make_window_store()``: a fresh store on memory, Redis, SQLite or PostgreSQL."""
    factory: StoreFactory = request.getfixturevalue(f"{request.param}_store_factory")
    return factory


@pytest.fixture(params=STORE_NAMES)
def store_factory(request: pytest.FixtureRequest) -> StoreFactory:
    """Resolve ``<name>_store_factory`` for the current parameter."""
    factory: StoreFactory = request.getfixturevalue(f"{request.param}_store_factory")
    return factory


@pytest.fixture(autouse=True)
def nothing_remembered() -> None:
    """Every test starts from a process that remembers nothing of the tests before it."""
    clear_process_caches()
