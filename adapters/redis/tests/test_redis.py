"""Redis-specific behaviour of ``RedisStore``, against a real redis-server.

The store-independent contract is covered by the shared conformance suite; these tests look at
what only Redis does: URL forms, key layout, ``PX`` expiry, ``SET NX``, ``MGET``, and failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
import redis.asyncio
import slimcache_redis
from redis.asyncio.connection import SSLConnection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from slimcache_redis import RedisStore

from slimcache import ConfigurationError, StoreError, StoreTimeout, open_store
from slimcache.stores import CompareAndSetOp, GetOp, SetOp
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT
from tests.servers.redis_server import RedisServer
from tests.servers.store_factories import StoreFactoryOf

pytestmark = [pytest.mark.servers, pytest.mark.timeout(60)]

# A guard against hangs, far above how long any of these operations should take.
GUARD = 30.0


def unique(label: str) -> str:
    return f"slimcache-test:{label}:{uuid.uuid4().hex}:"


def refused_port() -> int:
    """Return a loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest_asyncio.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """A plain client on database 0, to look at what the store wrote."""
    client = redis.asyncio.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


async def poll_until(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait until ``check()`` is true; callers bound the wait with ``asyncio.wait_for``."""
    while True:
        if await check():
            return
        await asyncio.sleep(0.02)


async def wait_until_absent(store: RedisStore, key: str) -> None:
    async def absent() -> bool:
        return await store.get(key) is None

    await poll_until(absent)


# --- public surface -------------------------------------------------------------------------


def test_public_names() -> None:
    assert slimcache_redis.__all__ == ["RedisStore"]
    assert slimcache_redis.RedisStore is RedisStore


# --- URL forms ------------------------------------------------------------------------------


async def test_redis_url_with_db_number_uses_that_database(redis_server: RedisServer) -> None:
    prefix = unique("db")
    url = f"redis://{redis_server.host}:{redis_server.port}/5"
    async with RedisStore.from_url(url, prefix=prefix) as store:
        await store.set("k", "in five")
        assert await store.get("k") == "in five"
    db5 = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port, db=5)
    db0 = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port, db=0)
    try:
        assert await db5.get(f"{prefix}k") == b"in five"
        assert await db0.get(f"{prefix}k") is None
    finally:
        await db5.aclose()
        await db0.aclose()


async def test_db_and_prefix_in_query_string(
    redis_server: RedisServer, raw: redis.asyncio.Redis
) -> None:
    prefix = unique("query")
    url = f"redis://{redis_server.host}:{redis_server.port}?db=0&prefix={prefix}"
    async with RedisStore.from_url(url) as store:
        assert store.prefix == prefix
        await store.set("k", "v")
    assert await raw.get(f"{prefix}k") == b"v"


async def test_unix_socket_url(redis_server: RedisServer, raw: redis.asyncio.Redis) -> None:
    prefix = unique("unix")
    url = f"unix://{redis_server.unix_socket}?db=0&prefix={prefix}"
    async with RedisStore.from_url(url) as store:
        assert store.client.connection_pool.connection_class is UnixDomainSocketConnection
        await store.set("k", "over the socket")
        assert await store.get("k") == "over the socket"
    # The same server answers on TCP, so the value is visible there.
    assert await raw.get(f"{prefix}k") == b"over the socket"


async def test_rediss_url_selects_tls_connections() -> None:
    # Building the store opens no connection, so no TLS server is needed to check the choice.
    store = RedisStore.from_url("rediss://127.0.0.1:6380/0")
    try:
        assert store.client.connection_pool.connection_class is SSLConnection
    finally:
        await store.aclose()


async def test_open_store_finds_the_adapter_by_scheme(redis_server: RedisServer) -> None:
    prefix = unique("registry")
    store = open_store(redis_server.url, prefix=prefix)
    assert isinstance(store, RedisStore)
    async with store:
        assert store.prefix == prefix
        await store.set("k", "v")
        assert await store.get("k") == "v"


def test_socket_timeouts_default_to_half_the_call_timeout() -> None:
    store = RedisStore.from_url("redis://127.0.0.1:1/0?timeout=3")
    kwargs = store.client.connection_pool.connection_kwargs
    assert store.timeout == 3.0
    assert kwargs["socket_timeout"] == 1.5
    assert kwargs["socket_connect_timeout"] == 1.5
    default = RedisStore.from_url("redis://127.0.0.1:1/0")
    assert default.timeout == DEFAULT_STORE_TIMEOUT
    assert default.client.connection_pool.connection_kwargs["socket_timeout"] == (
        DEFAULT_STORE_TIMEOUT / 2
    )
    assert RedisStore(store.client, timeout=0.25).timeout == 0.25


def test_timeouts_and_pool_size_reach_the_client() -> None:
    store = RedisStore.from_url(
        "redis://127.0.0.1:1/0", socket_timeout=1.5, socket_connect_timeout=0.5, max_connections=7
    )
    kwargs = store.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 1.5
    assert kwargs["socket_connect_timeout"] == 0.5
    assert store.client.connection_pool.max_connections == 7


@pytest.mark.parametrize(
    ("url", "options", "named"),
    [
        ("http://127.0.0.1:6379/0", {}, "url"),
        ("127.0.0.1:6379", {}, "url"),
        ("redis://127.0.0.1:notaport/0", {}, "Redis URL"),
        ("redis://127.0.0.1:6379/0?prefix=a&prefix=b", {}, "prefix"),
        ("redis://127.0.0.1:6379/0", {"prefix": 3}, "prefix"),
        ("redis://127.0.0.1:6379/0", {"socket_timeout": 0}, "socket_timeout"),
        ("redis://127.0.0.1:6379/0", {"socket_timeout": "soon"}, "socket_timeout"),
        ("redis://127.0.0.1:6379/0?socket_timeout=-1", {}, "socket_timeout"),
        ("redis://127.0.0.1:6379/0", {"socket_connect_timeout": -1}, "socket_connect_timeout"),
        ("redis://127.0.0.1:6379/0", {"max_connections": 0}, "max_connections"),
        ("redis://127.0.0.1:6379/0?max_connections=many", {}, "max_connections"),
        ("redis://127.0.0.1:6379/0", {"timeout": 0}, "timeout"),
        ("redis://127.0.0.1:6379/0?timeout=never", {}, "timeout"),
        ("redis://127.0.0.1:6379/0", {"timeout": 2, "socket_timeout": 3}, "socket_timeout"),
        ("redis://127.0.0.1:6379/0?socket_connect_timeout=9", {}, "socket_connect_timeout"),
    ],
)
def test_bad_url_or_option_is_a_configuration_error(
    url: str, options: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        RedisStore.from_url(url, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "keyword"),
    [
        ("prefix=a", {"prefix": "b"}),
        ("prefix=same", {"prefix": "same"}),
        ("socket_timeout=1", {"socket_timeout": 2.0}),
        ("socket_connect_timeout=1", {"socket_connect_timeout": 1.0}),
        ("max_connections=3", {"max_connections": 4}),
        ("client_name=a", {"client_name": "b"}),
        ("health_check_interval=10", {"health_check_interval": 10}),
    ],
)
def test_an_option_in_the_url_and_as_a_keyword_is_a_configuration_error(
    query: str, keyword: dict[str, object]
) -> None:
    name = next(iter(keyword))
    with pytest.raises(ConfigurationError, match=f"{name}.*both in the URL"):
        RedisStore.from_url(f"redis://127.0.0.1:6379/0?{query}", **keyword)  # type: ignore[arg-type]


def test_options_in_the_url_reach_the_client() -> None:
    store = RedisStore.from_url(
        "redis://127.0.0.1:1/3?prefix=app:&socket_timeout=1.5&socket_connect_timeout=0.5"
        "&max_connections=7&client_name=cache"
    )
    kwargs = store.client.connection_pool.connection_kwargs
    assert store.prefix == "app:"
    assert kwargs["socket_timeout"] == 1.5
    assert kwargs["socket_connect_timeout"] == 0.5
    assert kwargs["client_name"] == "cache"
    assert kwargs["db"] == 3
    assert store.client.connection_pool.max_connections == 7


def test_client_must_be_an_asyncio_redis() -> None:
    with pytest.raises(ConfigurationError, match="client"):
        RedisStore(object())  # type: ignore[arg-type]


# --- key layout and prefixes ----------------------------------------------------------------


async def test_prefix_isolates_stores(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    first = await redis_store_factory()
    second = await redis_store_factory()
    assert first.prefix != second.prefix

    await first.set("shared", "one")
    await second.set("shared", "two")
    assert await first.get("shared") == "one"
    assert await second.get("shared") == "two"
    assert await first.get_many(["shared", "other"]) == ["one", None]

    await first.delete("shared")
    assert await first.get("shared") is None
    assert await second.get("shared") == "two"
    assert await second.set_if_absent("shared", "three") is False
    assert await first.set_if_absent("shared", "three") is True

    assert await raw.get(f"{first.prefix}shared") == b"three"
    assert await raw.get(f"{second.prefix}shared") == b"two"


async def test_values_round_trip_exactly(redis_store_factory: StoreFactoryOf[RedisStore]) -> None:
    store = await redis_store_factory()
    values = {
        "unicode": "żółw 🐢 日本語 \u0000 \r\n\t \u200b\ufeff",
        "lone-surrogate": "a\ud800b",
        "empty": "",
        "megabyte": ("0123456789abcdé" * 70_000)[:1_048_576],
    }
    for key, value in values.items():
        await store.set(key, value)
    for key, value in values.items():
        assert await store.get(key) == value
    assert await store.get_many(list(values)) == list(values.values())


async def test_keys_are_stored_under_prefix_in_utf8(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await store.set("clé 🔑", "v")
    assert await raw.get(f"{store.prefix}clé 🔑".encode()) == b"v"


async def test_client_with_decoded_responses_works(redis_server: RedisServer) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    store = RedisStore(client, prefix=unique("decoded"))
    try:
        await store.set("k", "żółw")
        assert await store.get("k") == "żółw"
        assert await store.get_many(["k", "missing"]) == ["żółw", None]
    finally:
        await store.aclose()
        await client.aclose()


# --- expiry ---------------------------------------------------------------------------------


async def test_ttl_is_sent_as_px_and_expires(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await store.set("short", "v", ttl=0.3)
    pttl = await raw.pttl(f"{store.prefix}short")
    assert 0 < pttl <= 300
    await asyncio.wait_for(wait_until_absent(store, "short"), GUARD)
    assert await raw.exists(f"{store.prefix}short") == 0


async def test_sub_millisecond_ttl_rounds_up_to_one_millisecond(
    redis_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    store = await redis_store_factory()
    await store.set("tiny", "v", ttl=0.0001)
    await asyncio.wait_for(wait_until_absent(store, "tiny"), GUARD)


async def test_set_without_ttl_clears_an_earlier_ttl(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await store.set("k", "old", ttl=60)
    assert await raw.pttl(f"{store.prefix}k") > 0
    await store.set("k", "new")
    assert await raw.pttl(f"{store.prefix}k") == -1
    assert await store.get("k") == "new"


async def test_set_if_absent_with_ttl_expires_then_can_be_taken_again(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    assert await store.set_if_absent("lock", "first", ttl=0.3) is True
    assert 0 < await raw.pttl(f"{store.prefix}lock") <= 300
    assert await store.set_if_absent("lock", "second", ttl=0.3) is False
    await asyncio.wait_for(wait_until_absent(store, "lock"), GUARD)
    assert await store.set_if_absent("lock", "third") is True
    assert await store.get("lock") == "third"
    assert await raw.pttl(f"{store.prefix}lock") == -1


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), "5", True, 1e300])
async def test_bad_ttl_is_rejected_before_any_io(ttl: object) -> None:
    # Nothing listens on this port: reaching the network would raise StoreError instead.
    store = RedisStore.from_url(f"redis://127.0.0.1:{refused_port()}/0")
    try:
        with pytest.raises(ConfigurationError, match="ttl"):
            await store.set("k", "v", ttl=ttl)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="ttl"):
            await store.set_if_absent("k", "v", ttl=ttl)  # type: ignore[arg-type]
    finally:
        await store.aclose()


# --- compare-and-set scripts ----------------------------------------------------------------


async def test_compare_and_set_sends_the_ttl_as_px(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    assert await store.compare_and_set("k", None, "first", ttl=0.3) is True
    assert 0 < await raw.pttl(f"{store.prefix}k") <= 300
    assert await store.compare_and_set("k", "first", "second") is True
    assert await raw.pttl(f"{store.prefix}k") == -1
    assert await store.compare_and_set("k", "second", "third", ttl=60) is True
    assert 59_000 < await raw.pttl(f"{store.prefix}k") <= 60_000
    assert await raw.get(f"{store.prefix}k") == b"third"


async def test_compare_and_set_scripts_are_reloaded_after_a_flush(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    assert await store.compare_and_set("k", None, "v") is True
    # A restarted or flushed server has forgotten the scripts: EVALSHA fails, and the store
    # loads them again instead of failing.
    await raw.script_flush()
    assert await store.compare_and_set("k", "v", "w") is True
    await raw.script_flush()
    assert await store.compare_and_delete("k", "w") is True
    assert await raw.exists(f"{store.prefix}k") == 0


async def test_compare_and_set_only_matches_strings(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await raw.rpush(f"{store.prefix}list", "x")
    with pytest.raises(StoreError, match=r"compare-and-set.*'list'") as caught:
        await store.compare_and_set("list", "x", "v")
    assert isinstance(caught.value.__cause__, ResponseError)
    assert await raw.type(f"{store.prefix}list") == b"list"


async def test_compare_and_set_with_a_decoding_client(redis_server: RedisServer) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    store = RedisStore(client, prefix=unique("decoded-cas"))
    try:
        assert await store.compare_and_set("k", None, "żółw") is True
        assert await store.compare_and_set("k", "żółw", "🐢") is True
        assert await store.compare_and_delete("k", "żółw") is False
        assert await store.compare_and_delete("k", "🐢") is True
        assert await store.get("k") is None
    finally:
        await store.aclose()
        await client.aclose()


# --- SET NX and MGET ------------------------------------------------------------------------


async def test_set_if_absent_race_has_exactly_one_winner(
    redis_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    store = await redis_store_factory(max_connections=60)
    contenders = [f"writer-{i}" for i in range(50)]
    results = await asyncio.gather(
        *(store.set_if_absent("contended", value) for value in contenders)
    )
    assert results.count(True) == 1
    winner = contenders[results.index(True)]
    assert await store.get("contended") == winner


async def test_a_call_cancelled_during_its_round_trip_raises_cancelled_error(
    redis_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    # redis-py can finish a command whose caller was cancelled meanwhile, losing the
    # cancellation; the store hands it back. The cancel lands at each point of the round
    # trip in turn: after 0 to 6 turns of the event loop, while the call is still running.
    store = await redis_store_factory()
    await store.set("k", "v")
    calls = {
        "get": lambda: store.get("k"),
        "get_many": lambda: store.get_many(["k", "other"]),
        "set": lambda: store.set("k", "v"),
        "batch": lambda: store.batch([GetOp("k"), SetOp("k", "v")]),
    }
    lost: list[str] = []
    for name, call in calls.items():
        for turns in range(7):
            went_on: list[bool] = []

            async def caller(call: Callable[[], Awaitable[object]], went_on: list[bool]) -> None:
                await call()
                went_on.append(True)  # only a caller whose cancellation was lost gets here

            task = asyncio.create_task(caller(call, went_on))
            for _ in range(turns):
                await asyncio.sleep(0)
            if task.done():  # the round trip took fewer turns: nothing left to cancel
                await task
                continue
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if went_on:
                lost.append(f"{name} after {turns} turns")
    assert lost == []


async def test_get_many_keeps_order_and_duplicates(
    redis_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    store = await redis_store_factory()
    await store.set("a", "1")
    await store.set("b", "2")
    assert await store.get_many(["b", "missing", "a", "b"]) == ["2", None, "1", "2"]
    assert await store.get_many(("a",)) == ["1"]


async def test_get_many_of_nothing_sends_nothing() -> None:
    store = RedisStore.from_url(f"redis://127.0.0.1:{refused_port()}/0")
    try:
        assert await store.get_many([]) == []
    finally:
        await store.aclose()


async def test_get_many_reads_keys_of_other_types_as_absent(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await raw.rpush(f"{store.prefix}list", "x")
    await store.set("str", "v")
    assert await store.get_many(["list", "str"]) == [None, "v"]


# --- errors ---------------------------------------------------------------------------------


async def test_refused_connection_is_a_store_error_naming_operation_and_key() -> None:
    store = RedisStore.from_url(f"redis://127.0.0.1:{refused_port()}/0")
    try:
        with pytest.raises(StoreError) as caught:
            await asyncio.wait_for(store.get("the-key"), GUARD)
        assert "GET" in str(caught.value)
        assert "'the-key'" in str(caught.value)
        assert isinstance(caught.value.__cause__, RedisConnectionError)

        with pytest.raises(StoreError, match=r"SET.*'k1'") as caught_set:
            await asyncio.wait_for(store.set("k1", "v"), GUARD)
        assert caught_set.value.__cause__ is not None
        with pytest.raises(StoreError, match=r"SET NX.*'k2'"):
            await asyncio.wait_for(store.set_if_absent("k2", "v"), GUARD)
        with pytest.raises(StoreError, match=r"MGET.*'a', 'b'"):
            await asyncio.wait_for(store.get_many(["a", "b"]), GUARD)
        with pytest.raises(StoreError, match=r"DEL.*'k3'"):
            await asyncio.wait_for(store.delete("k3"), GUARD)
    finally:
        await store.aclose()


async def test_server_error_reply_is_a_store_error(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await raw.rpush(f"{store.prefix}list", "x")
    with pytest.raises(StoreError, match=r"GET.*'list'") as caught:
        await store.get("list")
    assert isinstance(caught.value.__cause__, ResponseError)
    assert "WRONGTYPE" in str(caught.value)


@pytest.mark.parametrize("decode_responses", [False, True])
async def test_bytes_that_are_not_utf8_read_as_text_with_a_warning(
    redis_server: RedisServer,
    raw: redis.asyncio.Redis,
    caplog: pytest.LogCaptureFixture,
    decode_responses: bool,
) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=decode_responses)
    store = RedisStore(client, prefix=unique("foreign"))
    try:
        await raw.set(f"{store.prefix}binary", b"ok \xff\xfe\x00 end")
        await store.set("text", "fine")
        with caplog.at_level(logging.WARNING, logger="slimcache"):
            got = await store.get("binary")
        assert got == "ok \ufffd\ufffd\x00 end"
        assert "binary" in caplog.text
        assert "not UTF-8" in caplog.text
        assert await store.get_many(["binary", "text", "missing"]) == [got, "fine", None]
        # What get showed is what compare_and_set and compare_and_delete match against.
        assert await store.compare_and_set("binary", "ok \ufffd\ufffd", "x") is False
        assert await store.compare_and_set("binary", got, "repaired") is True
        assert await raw.get(f"{store.prefix}binary") == b"repaired"
        await raw.set(f"{store.prefix}binary", b"\xc3")
        assert await store.compare_and_delete("binary", "\ufffd") is True
        assert await raw.exists(f"{store.prefix}binary") == 0
        # In a batch too, as a compressor's commit compares its index against what it read.
        await raw.set(f"{store.prefix}binary", b"\xff index")
        assert await store.batch([GetOp("binary")]) == ["\ufffd index"]
        assert await store.batch(
            [SetOp("range", "r"), CompareAndSetOp("binary", "\ufffd index", "new index")]
        ) == [None, True]
        assert await raw.get(f"{store.prefix}binary") == b"new index"
    finally:
        await store.aclose()
        await client.aclose()


async def test_a_stored_replacement_character_is_matched_as_written(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await store.set("k", "real \ufffd")
    assert await store.compare_and_set("k", "real \ufffd", "next") is True
    assert await store.compare_and_set("k", "next", "real \ufffd") is True
    assert await raw.get(f"{store.prefix}k") == "real \ufffd".encode()
    assert await store.compare_and_delete("k", "real \ufffd") is True


async def test_database_out_of_range_is_a_store_error(redis_server: RedisServer) -> None:
    # The test server has 16 databases; SELECT 99 fails while the connection is set up.
    url = f"redis://{redis_server.host}:{redis_server.port}/99"
    async with RedisStore.from_url(url) as store:
        with pytest.raises(StoreError, match=r"SET.*'k'") as caught:
            await asyncio.wait_for(store.set("k", "v"), GUARD)
        assert "DB index is out of range" in str(caught.value)


async def test_non_string_key_or_value_is_a_configuration_error(
    redis_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    store = await redis_store_factory()
    with pytest.raises(ConfigurationError, match="key"):
        await store.get(b"k")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="value"):
        await store.set("k", b"v")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="key"):
        await store.get_many(["a", 1])  # type: ignore[list-item]


async def test_server_stopped_mid_run_then_restarted(
    redis_server: RedisServer, redis_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_store_factory()
    await store.set("before", "kept")
    running = asyncio.Event()

    async def keep_working() -> int:
        # Reads and writes without pause until the store fails; returns how many succeeded.
        done = 0
        while True:
            await store.set(f"busy-{done % 10}", "x")
            assert await store.get("before") == "kept"
            done += 1
            running.set()

    worker = asyncio.create_task(keep_working())
    try:
        await asyncio.wait_for(running.wait(), GUARD)
        # Stopping blocks, so it runs in a thread while the worker keeps sending commands.
        await asyncio.to_thread(redis_server.stop)
        with pytest.raises(StoreError, match=r"(GET|SET) of key") as caught:
            await asyncio.wait_for(worker, GUARD)
        assert isinstance(caught.value.__cause__, RedisConnectionError)

        with pytest.raises(StoreError, match=r"GET of key 'before'"):
            await asyncio.wait_for(store.get("before"), GUARD)
        with pytest.raises(StoreError, match=r"SET of key 'during'"):
            await asyncio.wait_for(store.set("during", "lost"), GUARD)
    finally:
        worker.cancel()
        redis_server.start()

    # The pooled connections died with the server; the store reconnects on its own, and
    # the server saved its data on the way down.
    assert await asyncio.wait_for(store.get("before"), GUARD) == "kept"
    await store.set("after", "written")
    assert await store.get_many(["before", "during", "after"]) == ["kept", None, "written"]


def test_from_url_retries_a_bounded_number_of_times() -> None:
    # A server that is down must fail fast, not be retried with growing back-off, and a
    # server that does not answer is not asked again: that would double the call's time.
    store = RedisStore.from_url("redis://127.0.0.1:1/0")
    retry = store.client.connection_pool.connection_kwargs["retry"]
    assert 0 <= retry.get_retries() <= 1
    assert RedisConnectionError in retry._supported_errors
    assert not any(issubclass(error, RedisTimeoutError) for error in retry._supported_errors)


# --- closing --------------------------------------------------------------------------------


async def connections_named(raw: redis.asyncio.Redis, name: str) -> int:
    return sum(1 for info in await raw.client_list() if info.get("name") == name)


async def wait_for_connections(raw: redis.asyncio.Redis, name: str, count: int) -> None:
    # The server notices a closed socket a moment after the client drops it.
    async def reached() -> bool:
        return await connections_named(raw, name) == count

    await poll_until(reached)


async def test_from_url_store_closes_its_client(
    redis_server: RedisServer, raw: redis.asyncio.Redis
) -> None:
    name = f"slimcache-close-{uuid.uuid4().hex}"
    store = RedisStore.from_url(redis_server.url, prefix=unique("close"), client_name=name)
    async with store as entered:
        assert entered is store
        await store.set("k", "v")
        assert await connections_named(raw, name) == 1
    await asyncio.wait_for(wait_for_connections(raw, name, 0), GUARD)
    with pytest.raises(StoreError, match="closed"):
        await store.get("k")
    await store.aclose()  # a second close does nothing


async def test_injected_client_stays_open_after_store_closes(
    redis_server: RedisServer, raw: redis.asyncio.Redis
) -> None:
    name = f"slimcache-injected-{uuid.uuid4().hex}"
    client = redis.asyncio.Redis.from_url(redis_server.url, client_name=name)
    try:
        async with RedisStore(client, prefix=unique("injected")) as store:
            await store.set("k", "v")
        assert await connections_named(raw, name) == 1
        assert await client.ping() is True
    finally:
        await client.aclose()


async def test_owned_injected_client_is_closed_with_the_store(
    redis_server: RedisServer, raw: redis.asyncio.Redis
) -> None:
    name = f"slimcache-owned-{uuid.uuid4().hex}"
    client = redis.asyncio.Redis.from_url(redis_server.url, client_name=name)
    store = RedisStore(client, prefix=unique("owned"), owns_client=True)
    await store.set("k", "v")
    assert await connections_named(raw, name) == 1
    await store.aclose()
    await asyncio.wait_for(wait_for_connections(raw, name, 0), GUARD)


# -- reads of one turn of the event loop go out together ---------------------------------------


async def test_concurrent_reads_share_one_connection(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    # One connection at most: forty reads at once, each sent on a connection of its own,
    # would need forty. Sent together, they need one, and each caller gets its own value.
    store = await redis_store_factory(max_connections=1)
    for i in range(40):
        await raw.set(f"{store.prefix}k{i}", f"v{i}")
    gets = [store.get(f"k{i}") for i in range(40)]
    many = [store.get_many([f"k{i}", f"k{i + 1}", "absent"]) for i in range(0, 38, 2)]
    values = await asyncio.wait_for(asyncio.gather(*gets, *many), GUARD)
    assert values[:40] == [f"v{i}" for i in range(40)]
    assert values[40:] == [[f"v{i}", f"v{i + 1}", None] for i in range(0, 38, 2)]


async def test_a_read_that_redis_refuses_fails_alone(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await raw.rpush(f"{store.prefix}list", "x")
    await raw.set(f"{store.prefix}a", "1")
    outcomes = await asyncio.wait_for(
        asyncio.gather(store.get("a"), store.get("list"), store.get("b"), return_exceptions=True),
        GUARD,
    )
    assert outcomes[0] == "1"
    assert outcomes[2] is None
    refused = outcomes[1]
    assert isinstance(refused, StoreError)
    assert "GET of key 'list'" in str(refused)
    assert isinstance(refused.__cause__, ResponseError)


async def test_a_cancelled_read_leaves_the_others_of_its_turn_alone(
    redis_store_factory: StoreFactoryOf[RedisStore], raw: redis.asyncio.Redis
) -> None:
    store = await redis_store_factory()
    await raw.set(f"{store.prefix}a", "1")
    await raw.set(f"{store.prefix}b", "2")
    first = asyncio.ensure_future(store.get("a"))
    second = asyncio.ensure_future(store.get("b"))
    await asyncio.sleep(0)  # both are waiting on the same pipeline
    first.cancel()
    assert await asyncio.wait_for(second, GUARD) == "2"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await store.get("a") == "1"


async def test_reads_of_a_frozen_server_end_at_the_bound_and_recover(
    redis_server: RedisServer,
    redis_store_factory: StoreFactoryOf[RedisStore],
    raw: redis.asyncio.Redis,
) -> None:
    store = await redis_store_factory(timeout=1.0)
    for i in range(10):
        await raw.set(f"{store.prefix}k{i}", f"v{i}")
    redis_server.freeze()
    try:
        started = asyncio.get_running_loop().time()
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(store.get(f"k{i}") for i in range(10)), return_exceptions=True),
            GUARD,
        )
        waited = asyncio.get_running_loop().time() - started
    finally:
        redis_server.thaw()
    assert all(isinstance(o, StoreTimeout) for o in outcomes), outcomes
    assert waited < 1.0 + 1.0  # the store's bound, and slack for a loaded machine
    # Nothing of the abandoned pipeline is read as another call's reply afterwards.
    again = await asyncio.wait_for(asyncio.gather(*(store.get(f"k{i}") for i in range(10))), GUARD)
    assert again == [f"v{i}" for i in range(10)]
