"""Choosing a store by URL: ``slimcache.open_store`` and the ``slimcache.stores`` entry points.

Stores are opened against the real test servers and used once, so a scheme mapped to the wrong
factory, or a factory that mangles its URL, fails here.

Several tests replace ``slimcache.stores.registry._entry_points``: it is the single function through
which the registry reads installed entry points, so swapping it is how a test sees the registry
as it would be with an adapter missing, or with a third-party adapter installed, without
uninstalling or installing distributions.
"""

from __future__ import annotations

import re
import subprocess
import sys
import types
import uuid
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Literal

import boto3
import botocore.client
import pytest
import redis
import redis.asyncio
from slimcache_dynamodb import DynamoDBStore
from slimcache_redis import RedisStore
from slimcache_s3 import S3Store
from slimcache_sql import SQLStore
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

import slimcache.stores.registry
from slimcache import ConfigurationError, MemoryStore, MissingExtraError, Store, open_store
from slimcache._bundled import BUNDLED, BundledAdapter, ClientType
from slimcache.stores import pip_install
from slimcache.stores.registry import ENTRY_POINT_GROUP, store_schemes
from tests.servers.dynamodb_server import STORE_TIMEOUT, DynamoDBServer, unique_table_name
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_cluster import RedisClusterServers
from tests.servers.redis_server import RedisServer
from tests.servers.s3_server import S3Server
from tests.servers.sqlite_files import sqlite_url

ROOT = Path(__file__).resolve().parents[2]

# Every scheme the adapters shipped with slimcache register, and the extra that installs it.
SHIPPED_SCHEMES = {scheme: row.extra for row in BUNDLED for scheme in row.schemes}


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
    monkeypatch.setattr(slimcache.stores.registry, "_entry_points", dict)


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


async def test_dynamodb_url(dynamodb_server: DynamoDBServer) -> None:
    table = unique_table_name()
    store = open_store(
        f"dynamodb://{table}?endpoint_url={dynamodb_server.endpoint_url}",
        timeout=STORE_TIMEOUT,
        region_name=dynamodb_server.region,
        aws_access_key_id=dynamodb_server.access_key,
        aws_secret_access_key=dynamodb_server.secret_key,
    )
    assert isinstance(store, DynamoDBStore)
    assert store.table == table
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
    assert str(caught.value).endswith(f"run: {pip_install(extra)}")
    assert isinstance(caught.value, ImportError)
    assert isinstance(caught.value, ConfigurationError)


@pytest.mark.usefixtures("no_adapters")
def test_missing_redis_adapter_message() -> None:
    with pytest.raises(MissingExtraError, match="pip install") as caught:
        open_store("redis://localhost:6379/0")
    assert str(caught.value).endswith(f"run: pip install '{ROOT / 'adapters' / 'redis'}'")


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
    monkeypatch.setattr(slimcache.stores.registry, "_entry_points", lambda: {"redis": broken})
    with pytest.raises(MissingExtraError) as caught:
        open_store("redis://localhost:6379/0")
    assert str(caught.value).endswith(f"run: {pip_install('redis')}")
    assert caught.value.__cause__ is None


# -- third-party adapters -----------------------------------------------------------------------


async def test_third_party_entry_point_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    custom = _entry_point("custom", "tests.stores.test_registry:make_store")
    monkeypatch.setattr(slimcache.stores.registry, "_entry_points", lambda: {"custom": custom})
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
    replacement = _entry_point("redis", "tests.stores.test_registry:make_store")
    monkeypatch.setattr(slimcache.stores.registry, "_entry_points", lambda: {"redis": replacement})
    store = open_store("redis://elsewhere:6379/0")
    assert isinstance(store, RecordingStore)
    assert store.url == "redis://elsewhere:6379/0"


def test_third_party_entry_point_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _entry_point("custom", "custom_store_not_installed:make_store")
    monkeypatch.setattr(slimcache.stores.registry, "_entry_points", lambda: {"custom": broken})
    with pytest.raises(MissingExtraError, match="pip install"):
        open_store("custom://host")


# -- clients, engines and stores already at hand ------------------------------------------------


async def test_redis_client(redis_server: RedisServer) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        store = open_store(client, prefix=f"registry:{uuid.uuid4().hex}:", timeout=2)
        assert isinstance(store, RedisStore)
        assert store.client is client
        assert not store.cluster
        assert store.timeout == 2.0
        await _round_trip(store)
        assert await client.ping() is True  # a client passed in stays the caller's
    finally:
        await client.aclose()


async def test_redis_cluster_client(redis_cluster: RedisClusterServers) -> None:
    client = redis_cluster.client()
    try:
        store = open_store(client, prefix=f"registry:{uuid.uuid4().hex}:")
        assert isinstance(store, RedisStore)
        assert store.client is client
        assert store.cluster
        await _round_trip(store)
    finally:
        await client.aclose()


async def test_sqlalchemy_async_engine(tmp_path: Path) -> None:
    engine = create_async_engine(sqlite_url(tmp_path / "engine.db"))
    try:
        store = open_store(engine, table="from_engine")
        assert isinstance(store, SQLStore)
        assert store.engine is engine
        await _round_trip(store)
        # The store made its table in the engine's database, and left the engine open.
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT count(*) FROM from_engine"))
            assert rows.scalar_one() == 0
    finally:
        await engine.dispose()


async def test_boto3_s3_client_with_a_bucket(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    store = open_store(s3_server.client(), bucket=bucket, prefix="objects/")
    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix) == (bucket, "objects/")
    await _round_trip(store)


async def test_boto3_dynamodb_client_with_a_table(dynamodb_server: DynamoDBServer) -> None:
    table = unique_table_name()
    store = open_store(dynamodb_server.client(), table=table)
    assert isinstance(store, DynamoDBStore)
    assert store.table == table
    await _round_trip(store)


def test_boto3_dynamodb_client_needs_a_table(dynamodb_server: DynamoDBServer) -> None:
    client = dynamodb_server.client()
    try:
        with pytest.raises(ConfigurationError, match=r"table=\.\.\."):
            open_store(client)
    finally:
        client.close()


def test_boto3_s3_client_needs_a_bucket(s3_server: S3Server) -> None:
    client = s3_server.client()
    try:
        with pytest.raises(ConfigurationError, match=r"bucket=\.\.\."):
            open_store(client)
    finally:
        client.close()


def _boto3_client(service: Literal["sns", "sqs"]) -> Any:
    """A boto3 client of another service than S3 (it is never called)."""
    return boto3.session.Session().client(
        service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


async def test_a_boto3_client_goes_to_the_adapter_of_its_service(
    monkeypatch: pytest.MonkeyPatch, s3_server: S3Server
) -> None:
    # Another bundled adapter taking botocore's clients, for another service, listed first.
    queue = BundledAdapter(
        extra="sqs",
        schemes=("sqs",),
        distribution="slimcache-sqs",
        folder="adapters/sqs",
        module="slimcache_sqs_not_installed",
        store="SQSStore",
        clients=(ClientType("botocore.client", "BaseClient", "boto3 SQS client", service="sqs"),),
    )
    monkeypatch.setattr(slimcache.stores.registry, "BUNDLED", (queue, *BUNDLED))
    store = open_store(s3_server.client(), bucket=s3_server.create_bucket())
    assert isinstance(store, S3Store)
    await _round_trip(store)
    sns = _boto3_client("sns")
    try:
        with pytest.raises(ConfigurationError, match="for sqs, s3 or dynamodb, got one for 'sns'"):
            open_store(sns, bucket="b")
    finally:
        sns.close()


def test_boto3_client_for_another_service_is_refused() -> None:
    client = _boto3_client("sqs")
    try:
        with pytest.raises(ConfigurationError, match="for s3 or dynamodb, got one for 'sqs'"):
            open_store(client, bucket="b")
    finally:
        client.close()


async def test_a_store_comes_back_as_it_is(redis_server: RedisServer) -> None:
    memory = MemoryStore()
    assert open_store(memory) is memory
    plain = RecordingStore("", {})
    assert open_store(plain) is plain
    redis_store = RedisStore.from_url(redis_server.url)
    try:
        assert open_store(redis_store) is redis_store
    finally:
        await redis_store.aclose()


def test_a_store_takes_no_options() -> None:
    with pytest.raises(ConfigurationError, match=r"no options.*prefix"):
        open_store(MemoryStore(), prefix="p:")


class SyncStore:
    """Has the three methods of a store, but not async ones."""

    def get(self, key: str) -> str | None:
        return None

    def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        return None

    def delete(self, key: str) -> None:
        return None


def test_lookalikes_are_refused_with_what_to_pass_instead(tmp_path: Path) -> None:
    sync_redis = redis.Redis()
    with pytest.raises(ConfigurationError, match=r"synchronous redis\.Redis.*redis\.asyncio"):
        open_store(sync_redis)
    sync_engine = create_engine(f"sqlite:///{tmp_path / 'sync.db'}")
    try:
        with pytest.raises(ConfigurationError, match="synchronous SQLAlchemy Engine"):
            open_store(sync_engine)
    finally:
        sync_engine.dispose()
    with pytest.raises(ConfigurationError, match="must be async"):
        open_store(SyncStore())


def test_an_aiobotocore_client_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # aiobotocore's client class derives from botocore's; a stand-in module with such a class
    # plays its part without installing it.
    module = types.ModuleType("aiobotocore.client")

    class AioBaseClient(botocore.client.BaseClient):
        pass

    module.AioBaseClient = AioBaseClient  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aiobotocore.client", module)
    client = AioBaseClient.__new__(AioBaseClient)  # the check looks at the type only
    with pytest.raises(ConfigurationError, match="aiobotocore client; pass a boto3 S3 client"):
        open_store(client, bucket="b")


@pytest.mark.parametrize("thing", [object(), 3.5, ["memory://"]])
def test_unsupported_object_names_what_is_supported(thing: object) -> None:
    with pytest.raises(ConfigurationError, match="AsyncEngine") as caught:
        open_store(thing)
    assert str(caught.value) == (
        "store URL must be a string, or else a slimcache store or a client slimcache has an "
        "adapter for (redis.asyncio.Redis or RedisCluster, SQLAlchemy AsyncEngine, boto3 S3 "
        f"client, boto3 DynamoDB client); got {type(thing).__name__}"
    )
    assert not isinstance(caught.value, MissingExtraError)


async def test_an_option_the_adapter_does_not_take(redis_server: RedisServer) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        with pytest.raises(ConfigurationError, match="flavour"):
            open_store(client, flavour="mint")
    finally:
        await client.aclose()


async def test_a_client_whose_adapter_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer
) -> None:
    # An entry of None in sys.modules makes importing that module fail, as if not installed.
    monkeypatch.setitem(sys.modules, "slimcache_redis", None)
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        with pytest.raises(MissingExtraError, match="pip install") as caught:
            open_store(client)
        # Installed from this checkout: the hint is the adapter's folder in it, which an index
        # does not hold ('slimcache[redis]' names a distribution of the workspace).
        assert str(caught.value).endswith(f"run: pip install '{ROOT / 'adapters' / 'redis'}'")
    finally:
        await client.aclose()


def test_telling_objects_apart_imports_no_driver() -> None:
    # In a fresh interpreter: nothing has imported a driver, and open_store must not either.
    script = """
import sys
from slimcache import ConfigurationError, MemoryStore, open_store
store = MemoryStore()
assert open_store(store) is store
try:
    open_store(object())
except ConfigurationError:
    pass
drivers = ("redis", "sqlalchemy", "boto3", "botocore", "aiobotocore")
print(sorted(name for name in sys.modules if name.split(".")[0] in drivers))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
