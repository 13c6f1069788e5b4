"""Choosing a store by URL: ``slimcache.open_store`` and the ``slimcache.stores`` entry points.

Stores are opened against the real test servers and used once, so a scheme mapped to the wrong
factory, or a factory that mangles its URL, fails here.

Several tests replace ``slimcache._registry._entry_points``: it is the single function through
which the registry reads installed entry points, so swapping it is how a test sees the registry
as it would be with an adapter missing, or with a third-party adapter installed, without
uninstalling or installing distributions.
"""

from __future__ import annotations

import re
import uuid
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from slimcache_redis import RedisStore
from slimcache_s3 import S3Store
from slimcache_sql import SQLStore

import slimcache._registry
from slimcache import ConfigurationError, MemoryStore, MissingExtraError, Store, open_store
from slimcache._registry import ENTRY_POINT_GROUP, store_schemes
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_server import RedisServer
from tests.servers.s3_server import S3Server

# Every scheme the adapters shipped with slimcache register, and the extra that installs it.
SHIPPED_SCHEMES = {
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "sqlite+aiosqlite": "sql",
    "postgresql+asyncpg": "postgres",
    "s3": "s3",
}


class RecordingStore:
    """A third-party store that remembers how its factory was called."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url = url
        self.options = options
        self._data: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self._data.get(key)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self._data[key] = value

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)


def make_store(url: str, **options: Any) -> RecordingStore:
    """The factory the third-party entry point in these tests names."""
    return RecordingStore(url, options)


def _entry_point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


@pytest.fixture
def no_adapters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the registry see no installed entry point at all."""
    monkeypatch.setattr(slimcache._registry, "_entry_points", dict)


async def _round_trip(store: Store) -> None:
    key = f"registry-{uuid.uuid4().hex}"
    try:
        await store.set(key, "through open_store")
        assert await store.get(key) == "through open_store"
        await store.delete(key)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


# -- what is installed --------------------------------------------------------------------------


def test_installed_schemes_are_listed() -> None:
    assert store_schemes() == sorted({"memory", *SHIPPED_SCHEMES})


async def test_memory_url() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore)
    await _round_trip(store)


async def test_memory_url_passes_options() -> None:
    store = open_store("memory://?max_entries=1")
    assert isinstance(store, MemoryStore)
    await store.set("a", "1")
    await store.set("b", "2")
    assert store.snapshot() == {"b": "2"}


async def test_redis_url(redis_server: RedisServer) -> None:
    store = open_store(redis_server.url, prefix=f"registry:{uuid.uuid4().hex}:")
    assert isinstance(store, RedisStore)
    await _round_trip(store)


async def test_redis_unix_socket_url(redis_server: RedisServer) -> None:
    store = open_store(redis_server.unix_url, prefix=f"registry:{uuid.uuid4().hex}:")
    assert isinstance(store, RedisStore)
    await _round_trip(store)


async def test_rediss_url_builds_a_redis_store() -> None:
    # No TLS server runs in the tests; constructing opens no connection, so this only checks
    # which class the scheme reaches.
    store = open_store("rediss://127.0.0.1:6380/0")
    assert isinstance(store, RedisStore)
    await store.aclose()


async def test_sqlite_url(tmp_path: Path) -> None:
    store = open_store(f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}")
    assert isinstance(store, SQLStore)
    await _round_trip(store)


async def test_postgres_url(postgres_server: PostgresServer) -> None:
    store = open_store(postgres_server.url, table=f"t_{uuid.uuid4().hex}")
    assert isinstance(store, SQLStore)
    await _round_trip(store)


async def test_s3_url(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    store = open_store(
        f"s3://{bucket}/registry/?endpoint_url={s3_server.endpoint_url}",
        region_name=s3_server.region,
        aws_access_key_id=s3_server.access_key,
        aws_secret_access_key=s3_server.secret_key,
    )
    assert isinstance(store, S3Store)
    assert store.bucket == bucket
    assert store.prefix == "registry/"
    await _round_trip(store)


async def test_scheme_is_case_insensitive() -> None:
    store = open_store("MEMORY://")
    assert isinstance(store, MemoryStore)


# -- bad URLs -----------------------------------------------------------------------------------


def test_unknown_scheme_lists_known_schemes() -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store("ftp://example.com/cache")
    message = str(caught.value)
    assert "'ftp'" in message
    for scheme in ("memory", *SHIPPED_SCHEMES):
        assert f"{scheme}://" in message
    assert not isinstance(caught.value, MissingExtraError)


@pytest.mark.parametrize(
    ("url", "suggestion"),
    [
        ("sqlite:///cache.db", "sqlite+aiosqlite://"),
        ("postgresql://user@localhost/db", "postgresql+asyncpg://"),
        ("postgres://user@localhost/db", "postgresql+asyncpg://"),
    ],
)
def test_driverless_sql_url_suggests_the_driver(url: str, suggestion: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(f"use {suggestion}")) as caught:
        open_store(url)
    assert not isinstance(caught.value, MissingExtraError)


@pytest.mark.parametrize("url", ["", "memory", "localhost:6379", "://nothing"])
def test_url_without_scheme_is_rejected(url: str) -> None:
    with pytest.raises(ConfigurationError, match="no scheme"):
        open_store(url)


@pytest.mark.parametrize("url", [None, 42, b"memory://"])
def test_url_that_is_not_a_string_is_rejected(url: Any) -> None:
    with pytest.raises(ConfigurationError, match="must be a string"):
        open_store(url)


def test_bad_option_for_a_store_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="max_entries"):
        open_store("memory://?max_entries=none")


# -- missing adapters ---------------------------------------------------------------------------


@pytest.mark.usefixtures("no_adapters")
@pytest.mark.parametrize(("scheme", "extra"), sorted(SHIPPED_SCHEMES.items()))
def test_missing_adapter_names_the_extra(scheme: str, extra: str) -> None:
    with pytest.raises(MissingExtraError) as caught:
        open_store(f"{scheme}://somewhere/x")
    assert f"pip install 'slimcache[{extra}]'" in str(caught.value)
    assert isinstance(caught.value, ImportError)
    assert isinstance(caught.value, ConfigurationError)


@pytest.mark.usefixtures("no_adapters")
def test_missing_redis_adapter_message() -> None:
    with pytest.raises(MissingExtraError, match=r"pip install 'slimcache\[redis\]'"):
        open_store("redis://localhost:6379/0")


@pytest.mark.usefixtures("no_adapters")
async def test_memory_needs_no_entry_point() -> None:
    store = open_store("memory://?max_entries=3")
    assert isinstance(store, MemoryStore)
    await _round_trip(store)


@pytest.mark.usefixtures("no_adapters")
def test_without_adapters_only_memory_is_listed() -> None:
    assert store_schemes() == ["memory"]


def test_adapter_that_fails_to_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # The entry point is registered but its module is gone: a broken or partial install.
    broken = _entry_point("redis", "slimcache_redis_not_installed:RedisStore.from_url")
    monkeypatch.setattr(slimcache._registry, "_entry_points", lambda: {"redis": broken})
    with pytest.raises(MissingExtraError, match=r"pip install 'slimcache\[redis\]'") as caught:
        open_store("redis://localhost:6379/0")
    assert caught.value.__cause__ is None


# -- third-party adapters -----------------------------------------------------------------------


async def test_third_party_entry_point_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    custom = _entry_point("custom", "tests.test_registry:make_store")
    monkeypatch.setattr(slimcache._registry, "_entry_points", lambda: {"custom": custom})
    store = open_store("custom://host/path?x=1", flavour="mint", ttl_default=5)
    assert isinstance(store, RecordingStore)
    assert store.url == "custom://host/path?x=1"
    assert store.options == {"flavour": "mint", "ttl_default": 5}
    assert isinstance(store, Store)
    await _round_trip(store)
    assert "custom" in store_schemes()


def test_third_party_entry_point_can_serve_a_shipped_scheme(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replacement = _entry_point("redis", "tests.test_registry:make_store")
    monkeypatch.setattr(slimcache._registry, "_entry_points", lambda: {"redis": replacement})
    store = open_store("redis://elsewhere:6379/0")
    assert isinstance(store, RecordingStore)
    assert store.url == "redis://elsewhere:6379/0"


def test_third_party_entry_point_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _entry_point("custom", "custom_store_not_installed:make_store")
    monkeypatch.setattr(slimcache._registry, "_entry_points", lambda: {"custom": broken})
    with pytest.raises(MissingExtraError, match="pip install"):
        open_store("custom://host")
