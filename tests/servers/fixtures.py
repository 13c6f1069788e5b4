"""The real servers of the tests and a store factory for each kind of store, as one pytest plugin.

The repository's root ``conftest.py`` registers it, so that the core's tests (``tests/``) and
each adapter's (``adapters/<name>/tests/``) share the same session-wide servers. Servers start
only when a test asks for one of theirs.
"""

from __future__ import annotations

from tests.servers.dynamodb_server import dynamodb_server
from tests.servers.llm_server import llm_server
from tests.servers.postgres_server import postgres_server
from tests.servers.redis_cluster import redis_cluster
from tests.servers.redis_server import redis_server
from tests.servers.s3_server import s3_server
from tests.servers.store_factories import (
    dynamodb_store_factory,
    memory_store_factory,
    postgres_store_factory,
    redis_cluster_store_factory,
    redis_store_factory,
    s3_store_factory,
    sqlite_store_factory,
)
from tests.servers.sync_stores import open_sync_store

__all__ = [
    "dynamodb_server",
    "dynamodb_store_factory",
    "llm_server",
    "memory_store_factory",
    "open_sync_store",
    "postgres_server",
    "postgres_store_factory",
    "redis_cluster",
    "redis_cluster_store_factory",
    "redis_server",
    "redis_store_factory",
    "s3_server",
    "s3_store_factory",
    "sqlite_store_factory",
]
