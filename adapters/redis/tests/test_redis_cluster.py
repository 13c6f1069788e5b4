"""``RedisStore`` on a Redis Cluster: hash-tagged keys, URL forms, and a real three-node cluster.

The key tagging is a pure function, checked with hypothesis against redis-py's own slot
computation (``redis.crc.key_slot``): every key of one thread lands in one slot, and no two keys
share a name. Everything else runs against the cluster the ``redis_cluster`` fixture starts,
and asks the servers themselves (``CLUSTER KEYSLOT``, ``INFO commandstats``, ``SCAN``) what
happened.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import redis
import redis.asyncio
from hypothesis import assume, example, given
from hypothesis import strategies as st
from redis.asyncio.connection import SSLConnection
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, ResponseError
from slimcache_redis import RedisStore
from slimcache_redis._cluster import cluster_key, defeats_hash_tags, original_key

from slimcache import (
    ConfigurationError,
    KeepMessages,
    MessageThreshold,
    StoreError,
    SummarizeCompressor,
    open_store,
)
from slimcache.recipes.maintenance import list_threads
from slimcache.stores import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    ThreadKeys,
)
from slimcache.testing import StoreConformance, StoreFactory
from tests.fakes import RecordingSummarizer
from tests.servers.redis_cluster import ClusterNodeServer, RedisClusterServers
from tests.servers.store_factories import StoreFactoryOf

ROOT = Path(__file__).resolve().parents[3]  # adapters/redis/tests/ is three folders down
GUIDE = ROOT / "docs" / "guides" / "redis-cluster.md"
EXAMPLE = ROOT / "examples" / "redis_cluster.py"

# A guard against hangs, far above how long any of these operations should take.
GUARD = 30.0

# Every per-thread suffix slimcache writes: the compressor's index, ranges and lease, the
# window memory's messages, the compaction session and link, and the wrapped summaries.
CORE_SUFFIXES = [
    "index",
    "lease",
    "summary:0-3",
    "summary:12-40",
    "messages",
    "messages:2:17",
    "session",
    "next",
    "wrapped:index",
    "wrapped:summary:0-9",
]


def stored(key: str, prefix: str = "") -> bytes:
    """The Redis key a cluster store with ``prefix`` writes ``key`` under."""
    return (prefix + cluster_key(key)).encode("utf-8", "surrogatepass")


def unique(label: str) -> str:
    return f"slimcache-test:{label}:{uuid.uuid4().hex}:"


async def poll_until(check: Callable[[], bool]) -> None:
    """Run the blocking ``check`` in a thread until it is true; callers bound the wait."""
    while True:
        if await asyncio.to_thread(check):
            return
        await asyncio.sleep(0.05)


# --- the key mapping, without a server -------------------------------------------------------

# Thread ids as slimcache allows them: not empty, not only white space.
THREAD_IDS = st.one_of(
    st.text(min_size=1).filter(str.strip),
    st.text(alphabet=":/%~{}\x00\n summary_thread-0123456789", min_size=1).filter(str.strip),
    st.text(min_size=1).filter(str.strip).map(lambda s: s * 200),  # "~" + SHA-256 when encoded
    st.integers(min_value=-(10**12), max_value=10**12),
)
# Namespaces as slimcache allows them (no newline or NUL), braces left out: a namespace with
# braces is stored untagged on purpose (see test_keys_with_braces_are_stored_untagged).
NAMESPACES = st.one_of(
    st.just(""),
    st.text(alphabet=st.characters(blacklist_characters="\r\n\x00{}")),
    st.text(alphabet=":_thread-abc%7E0123456789"),
)
SUFFIXES = st.one_of(
    st.sampled_from(CORE_SUFFIXES),
    st.text(alphabet=st.characters(blacklist_characters="{}\x00")),
)
PREFIXES = st.one_of(
    st.just(""),
    st.text(alphabet=st.characters(blacklist_characters="{}")),
    st.text(alphabet="{}:ab"),
)


def test_examples() -> None:
    assert cluster_key("ns:thread_abc:summary:1-2") == "ns:{thread_abc}:summary:1-2"
    assert cluster_key("thread_123:index") == "{thread_123}:index"
    assert cluster_key("app:thread_a%3Ab:lease") == "app:{thread_a%3Ab}:lease"
    assert cluster_key("a:b:thread_x:messages:2:17") == "a:b:{thread_x}:messages:2:17"
    digest = "~" + "0f" * 32
    assert cluster_key(f"thread_{digest}:index") == f"{{thread_{digest}}}:index"
    # Keys of another form are left alone.
    for key in ("plain", "thread_a", "thread_:index", "xthread_a:index", "thread_a%zz:index", ""):
        assert cluster_key(key) == key
    # A key that is already another key's tagged form, or starts with NUL, gets a NUL in front.
    assert cluster_key("ns:{thread_abc}:index") == "\x00ns:{thread_abc}:index"
    assert cluster_key("\x00thread_a:index") == "\x00\x00thread_a:index"
    assert cluster_key("{thread_a}:x:thread_b:index") == "\x00{thread_a}:x:thread_b:index"
    # Braces the key does not owe to a tag leave it as it is.
    assert cluster_key("{a}:thread_b:index") == "{a}:thread_b:index"
    assert cluster_key("ns:{thread_a}") == "ns:{thread_a}"


def test_the_first_thread_segment_is_tagged() -> None:
    # A namespace holding a thread segment of its own puts its threads in one slot: still one
    # slot per thread, whatever the suffix.
    keys = ThreadKeys("b", namespace="tenant:thread_1")
    assert cluster_key(keys.index) == "tenant:{thread_1}:thread_b:index"
    assert cluster_key(keys.summary(0, 3)) == "tenant:{thread_1}:thread_b:summary:0-3"


@given(THREAD_IDS, NAMESPACES, PREFIXES, st.lists(SUFFIXES, min_size=1, max_size=5))
@example("chat-42", "docs", "myapp:", CORE_SUFFIXES)
@example("x", "", "{app}:", ["index"])
@example("x", "", "a{", ["index", "lease"])
def test_all_keys_of_a_thread_share_one_slot(
    thread_id: str | int, namespace: str, prefix: str, suffixes: list[str]
) -> None:
    assume(not defeats_hash_tags(prefix))
    keys = ThreadKeys(thread_id, namespace)
    names = [keys.index, keys.lease, keys.summary(0, 3), keys.summary(4, 1000)]
    names += [keys.prefix + suffix for suffix in suffixes]
    slots = {key_slot(stored(name, prefix)) for name in names}
    assert len(slots) == 1
    if "{" not in prefix and "thread_" not in namespace:
        # Redis hashes exactly the thread segment.
        assert slots == {key_slot(f"thread_{keys.encoded}".encode())}


@given(THREAD_IDS, NAMESPACES)
def test_every_key_slimcache_writes_for_a_thread_is_tagged(
    thread_id: str | int, namespace: str
) -> None:
    keys = ThreadKeys(thread_id, namespace)
    for suffix in CORE_SUFFIXES:
        name = cluster_key(keys.prefix + suffix)
        assert name.count("{") == 1
        assert name.count("}") == 1
        assert original_key(name) == keys.prefix + suffix


@given(THREAD_IDS, NAMESPACES, THREAD_IDS, NAMESPACES)
def test_distinct_threads_never_share_a_name(
    first_id: str | int, first_ns: str, second_id: str | int, second_ns: str
) -> None:
    first, second = ThreadKeys(first_id, first_ns), ThreadKeys(second_id, second_ns)
    assume(first.prefix != second.prefix)
    first_names = {cluster_key(first.prefix + suffix) for suffix in CORE_SUFFIXES}
    second_names = {cluster_key(second.prefix + suffix) for suffix in CORE_SUFFIXES}
    assert not first_names & second_names


def _lookalikes(key: str) -> list[str]:
    """Keys built to collide with ``key``'s tagged form."""
    tagged = cluster_key(key)
    return [tagged, "\x00" + tagged, "\x00" + key, tagged.replace("{", "").replace("}", "")]


ANY_KEYS = st.one_of(
    st.text(),
    st.text(alphabet="{}:\x00thread_a%7E~01-summary"),
    st.builds(
        lambda keys, suffix: keys.prefix + suffix,
        st.builds(ThreadKeys, THREAD_IDS, NAMESPACES),
        SUFFIXES,
    ),
)


@given(ANY_KEYS)
@example("ns:{thread_abc}:index")
@example("\x00")
@example("\x00\x00thread_a:index")
@example("}thread_a{:index")
def test_the_mapping_can_be_undone(key: str) -> None:
    for candidate in [key, *_lookalikes(key)]:
        assert original_key(cluster_key(candidate)) == candidate


@given(st.lists(ANY_KEYS, max_size=8))
def test_distinct_keys_get_distinct_names(keys: list[str]) -> None:
    family = set(keys)
    for key in keys:
        family.update(_lookalikes(key))
    assert len({cluster_key(key) for key in family}) == len(family)


def test_keys_with_braces_are_stored_untagged() -> None:
    keys = ThreadKeys("t", namespace="a{b}")
    assert cluster_key(keys.index) == keys.index
    # Redis applies the namespace's own tag: the whole namespace shares one slot.
    assert key_slot(stored(keys.index)) == key_slot(b"b") == key_slot(stored(keys.lease))


@pytest.mark.parametrize(
    ("text", "defeats"),
    [
        ("", False),
        ("app:", False),
        ("{app}:", False),
        ("a{", False),
        ("{}", True),
        ("x{}{y}", True),
    ],
)
def test_empty_hash_tags_are_recognised(text: str, defeats: bool) -> None:
    assert defeats_hash_tags(text) is defeats


# --- URL forms, without a server -------------------------------------------------------------


def nodes_of(store: RedisStore) -> list[tuple[str, int]]:
    return [(node.host, node.port) for node in store.client.startup_nodes]


async def test_cluster_url_names_every_node() -> None:
    async with RedisStore.from_url(
        "redis+cluster://10.0.0.1:7000,10.0.0.2,[::1]:7002/?prefix=app:&client_name=c1"
    ) as store:
        assert store.cluster
        assert isinstance(store.client, redis.asyncio.RedisCluster)
        assert nodes_of(store) == [("10.0.0.1", 7000), ("10.0.0.2", 6379), ("::1", 7002)]
        assert store.prefix == "app:"
        assert store.client.connection_kwargs["client_name"] == "c1"


async def test_cluster_url_takes_credentials_tls_and_timeouts() -> None:
    async with RedisStore.from_url(
        "rediss+cluster://alice:p%40ss@cache.internal:6380/?timeout=3", max_connections=7
    ) as store:
        kwargs = store.client.connection_kwargs
        assert kwargs["connection_class"] is SSLConnection
        assert (kwargs["username"], kwargs["password"]) == ("alice", "p@ss")
        assert store.timeout == 3.0
        assert kwargs["socket_timeout"] == 1.5
        assert kwargs["socket_connect_timeout"] == 1.5
        assert kwargs["max_connections"] == 7
        # One quick retry at most: a node that does not answer is not asked again and again.
        assert store.client.retry.get_retries() == 1


def test_open_store_and_scheme_case() -> None:
    store = open_store("REDIS+CLUSTER://127.0.0.1:7000/")
    assert isinstance(store, RedisStore)
    assert store.cluster


@pytest.mark.parametrize(
    ("url", "options", "named"),
    [
        ("redis+cluster://127.0.0.1:7000/3", {}, "database 0"),
        ("redis+cluster://127.0.0.1:7000/?db=2", {}, "db"),
        ("redis+cluster:///", {}, "no cluster node"),
        ("redis+cluster://127.0.0.1:notaport/", {}, "port"),
        ("redis+cluster://127.0.0.1:70000/", {}, "port"),
        ("redis+cluster://:7000/", {}, "host"),
        ("redis+cluster://127.0.0.1:7000/?prefix=a", {"prefix": "b"}, "both in the URL"),
        ("redis+cluster://127.0.0.1:7000/", {"prefix": "x{}:"}, "empty hash tag"),
        ("redis+cluster://127.0.0.1:7000/?timeout=0", {}, "timeout"),
        ("redis+cluster://127.0.0.1:7000/", {"socket_timeout": 9}, "socket_timeout"),
    ],
)
def test_bad_cluster_url_or_option_is_a_configuration_error(
    url: str, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        RedisStore.from_url(url, **options)


def test_a_prefix_with_an_empty_hash_tag_is_refused_only_on_a_cluster() -> None:
    cluster = redis.asyncio.RedisCluster(host="127.0.0.1", port=7000)
    with pytest.raises(ConfigurationError, match="empty hash tag"):
        RedisStore(cluster, prefix="{}:")
    single = RedisStore(redis.asyncio.Redis(), prefix="{}:")
    assert not single.cluster
    assert single.prefix == "{}:"


async def test_an_unreachable_cluster_is_a_store_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with RedisStore.from_url(f"redis+cluster://127.0.0.1:{port}/", timeout=2) as store:
        with pytest.raises(StoreError, match=r"GET of key 'k'") as caught:
            await asyncio.wait_for(store.get("k"), GUARD)
        assert isinstance(caught.value.__cause__, (RedisClusterException, redis.RedisError))


# --- on the cluster --------------------------------------------------------------------------


@pytest.fixture
def store_factory(redis_cluster_store_factory: StoreFactoryOf[RedisStore]) -> StoreFactory:
    """The conformance suite's stores: on the cluster, each under its own prefix."""
    return redis_cluster_store_factory


@pytest.mark.servers
class TestRedisClusterConformance(StoreConformance):
    """Every case of :class:`slimcache.testing.StoreConformance` on the three-node cluster."""


@pytest_asyncio.fixture
async def raw(redis_cluster: RedisClusterServers) -> AsyncIterator[redis.asyncio.RedisCluster]:
    """A plain cluster client, to look at what the store wrote."""
    client = redis_cluster.client()
    yield client
    await client.aclose()


def server_slot(cluster: RedisClusterServers, name: bytes) -> int:
    """The slot the servers themselves give ``name`` (``CLUSTER KEYSLOT``)."""
    with cluster.nodes[0].admin() as admin:
        return int(admin.execute_command("CLUSTER KEYSLOT", name))


def command_calls(cluster: RedisClusterServers, command: str) -> int:
    """Calls of ``command`` the cluster has run so far, over all nodes."""
    total = 0
    for node in cluster.nodes:
        with node.admin() as admin:
            stats = admin.info("commandstats")
            total += int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
    return total


async def keys_under(client: redis.asyncio.RedisCluster, prefix: str) -> list[bytes]:
    return sorted([key async for key in client.scan_iter(match=f"{prefix}*")])


@pytest.mark.servers
async def test_a_threads_keys_are_tagged_and_share_one_slot_on_the_server(
    redis_cluster: RedisClusterServers,
    redis_cluster_store_factory: StoreFactoryOf[RedisStore],
    raw: redis.asyncio.RedisCluster,
) -> None:
    store = await redis_cluster_store_factory()
    keys = ThreadKeys("chat/42 ✓", namespace="app")
    for suffix in CORE_SUFFIXES:
        await store.set(keys.prefix + suffix, suffix)
    names = await keys_under(raw, store.prefix)
    assert len(names) == len(CORE_SUFFIXES)
    tag = f"{{thread_{keys.encoded}}}".encode()
    assert all(name.startswith(store.prefix.encode() + b"app:" + tag) for name in names)
    assert {server_slot(redis_cluster, name) for name in names} == {
        server_slot(redis_cluster, f"thread_{keys.encoded}".encode())
    }
    for suffix in CORE_SUFFIXES:
        assert await store.get(keys.prefix + suffix) == suffix


@pytest.mark.servers
async def test_client_and_server_agree_on_slots(redis_cluster: RedisClusterServers) -> None:
    names = [stored(key, "p:") for key in ("thread_a:index", "x", "ns:thread_żółw:lease", "\x00k")]
    names += [stored("ns:{thread_abc}:index", "{tag}:"), "emoji 🐢".encode()]
    assert [key_slot(name) for name in names] == [
        server_slot(redis_cluster, name) for name in names
    ]


def keys_on_every_node(cluster: RedisClusterServers, prefix: str, per_node: int) -> list[str]:
    """Plain keys that a store with ``prefix`` puts ``per_node`` on each node, in distinct slots.

    The keys are grouped by node, in the order of ``cluster.nodes``.
    """
    chosen: dict[int, list[str]] = {id(node): [] for node in cluster.nodes}
    slots: set[int] = set()
    number = 0
    while any(len(found) < per_node for found in chosen.values()):
        key = f"spread-{number}"
        number += 1
        slot = key_slot(stored(key, prefix))
        node: ClusterNodeServer = cluster.node_for_slot(slot)
        if slot not in slots and len(chosen[id(node)]) < per_node:
            chosen[id(node)].append(key)
            slots.add(slot)
    return [key for found in chosen.values() for key in found]


@pytest.mark.servers
async def test_get_many_reads_one_slot_with_one_mget(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    keys = ThreadKeys("one-slot")
    wanted = [keys.index, keys.summary(0, 3), keys.summary(4, 9), keys.lease]
    await store.set(keys.index, "i")
    await store.set(keys.summary(4, 9), "s")
    before = command_calls(redis_cluster, "mget")
    assert await store.get_many(wanted) == ["i", None, "s", None]
    assert command_calls(redis_cluster, "mget") - before == 1


@pytest.mark.servers
async def test_a_threads_batch_is_one_transaction_and_a_spread_one_one_call_each(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    keys = ThreadKeys("batched")
    await store.set(keys.index, "v1")
    before = command_calls(redis_cluster, "exec")
    results = await store.batch(
        [
            SetIfAbsentOp(keys.lease, "token"),
            GetOp(keys.index),
            SetOp(keys.summary(1, 9), "summary"),
            CompareAndSetOp(keys.index, "v1", "v2"),
            CompareAndDeleteOp(keys.lease, "token"),
        ]
    )
    assert results == [True, "v1", None, True, True]
    assert command_calls(redis_cluster, "exec") - before == 1
    assert await store.get_many([keys.index, keys.lease]) == ["v2", None]

    spread = keys_on_every_node(redis_cluster, store.prefix, 1)
    before = command_calls(redis_cluster, "exec")
    assert await store.batch([SetOp(key, key) for key in spread]) == [None] * len(spread)
    assert await store.batch([GetOp(key) for key in spread]) == spread
    assert command_calls(redis_cluster, "exec") - before == 0

    compressor = SummarizeCompressor(RecordingSummarizer(), store)
    result = await compressor.compress_detailed(chat(30), thread_id="on-the-cluster")
    assert result.outcome == "summarized"
    assert compressor.stats.store_round_trips == 3


@pytest.mark.servers
async def test_get_many_across_slots_and_nodes(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    spread = keys_on_every_node(redis_cluster, store.prefix, 2)
    threads = [ThreadKeys(f"t{n}").index for n in range(5)]
    for key in spread + threads:
        await store.set(key, f"value of {key}")
    wanted = [*spread, "missing", *threads, spread[0]]
    slots = {key_slot(stored(key, store.prefix)) for key in wanted}
    assert len(slots) >= 6
    before = command_calls(redis_cluster, "mget")
    got = await store.get_many(wanted)
    assert command_calls(redis_cluster, "mget") - before == len(slots)
    expected = [None if key == "missing" else f"value of {key}" for key in wanted]
    assert got == expected
    for key in spread + threads:
        await store.delete(key)
    assert await store.get_many(spread) == [None] * len(spread)


@pytest.mark.servers
async def test_compare_and_set_scripts_run_on_every_node_and_reload_after_a_flush(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    spread = keys_on_every_node(redis_cluster, store.prefix, 1)
    for key in spread:
        assert await store.compare_and_set(key, None, "first", ttl=60) is True
        assert await store.compare_and_set(key, "other", "second") is False
    for node in redis_cluster.nodes:
        with node.admin() as admin:
            admin.script_flush()
    for key in spread:
        assert await store.compare_and_set(key, "first", "second") is True
        assert await store.compare_and_delete(key, "first") is False
        assert await store.compare_and_delete(key, "second") is True
        assert await store.get(key) is None


@pytest.mark.servers
async def test_a_new_store_takes_a_burst_of_concurrent_calls(
    redis_cluster: RedisClusterServers,
) -> None:
    # redis-py's cluster client alone fails this now and then (a connection closed under a
    # command while many commands wait for the first cluster discovery): each round starts
    # from a new client, so each round is a fresh chance of hitting it.
    for _ in range(10):
        async with RedisStore.from_url(redis_cluster.url, prefix=unique("burst")) as store:

            async def write_then_read(number: int, store: RedisStore = store) -> str | None:
                await store.set(f"thread_{number}:index", str(number))
                return await store.get(f"thread_{number}:index")

            got = await asyncio.gather(*(write_then_read(number) for number in range(50)))
            assert got == [str(number) for number in range(50)]


def connections_named(cluster: RedisClusterServers, name: str) -> int:
    """Open client connections called ``name``, over all nodes."""
    total = 0
    for node in cluster.nodes:
        with node.admin() as admin:
            total += sum(1 for info in admin.client_list() if info.get("name") == name)
    return total


async def wait_for_connections(cluster: RedisClusterServers, name: str, count: int) -> None:
    # A node notices a closed socket a moment after the client drops it.
    await poll_until(lambda: connections_named(cluster, name) == count)


@pytest.mark.servers
async def test_injected_cluster_client_stays_open_unless_owned(
    redis_cluster: RedisClusterServers,
) -> None:
    name = f"slimcache-cluster-{uuid.uuid4().hex}"
    client = redis_cluster.client(decode_responses=True, client_name=name)
    try:
        async with RedisStore(client, prefix=unique("injected")) as store:
            assert store.cluster
            await store.set("thread_x:index", "żółw")
            assert await store.get_many(["thread_x:index", "nothing"]) == ["żółw", None]
        assert connections_named(redis_cluster, name) > 0
        assert await client.get(f"{store.prefix}{{thread_x}}:index") == "żółw"

        owned = RedisStore(client, prefix=store.prefix, owns_client=True)
        assert await owned.get("thread_x:index") == "żółw"
        await owned.aclose()
        await asyncio.wait_for(wait_for_connections(redis_cluster, name, 0), GUARD)
        with pytest.raises(StoreError, match="closed"):
            await owned.get("thread_x:index")
    finally:
        await client.aclose()


@pytest.mark.servers
async def test_foreign_bytes_and_server_errors_on_the_cluster(
    redis_cluster_store_factory: StoreFactoryOf[RedisStore],
    raw: redis.asyncio.RedisCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = await redis_cluster_store_factory()
    await raw.set(f"{store.prefix}{{thread_b}}:index".encode(), b"ok \xff end")
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        got = await store.get("thread_b:index")
    assert got == "ok \ufffd end"
    assert "not UTF-8" in caplog.text
    assert await store.compare_and_set("thread_b:index", got, "repaired") is True
    await raw.rpush(f"{store.prefix}{{thread_c}}:index", "x")
    with pytest.raises(StoreError, match=r"GET.*'thread_c:index'") as caught:
        await store.get("thread_c:index")
    assert isinstance(caught.value.__cause__, ResponseError)


async def wait_for_cluster_ok(cluster: RedisClusterServers) -> None:
    def state_ok() -> bool:
        for node in cluster.nodes:
            with node.admin() as admin:
                if admin.cluster("INFO").get("cluster_state") != "ok":
                    return False
        return True

    await poll_until(state_ok)


@pytest.mark.servers
@pytest.mark.timeout(120)
async def test_a_frozen_node_fails_its_slots_within_the_timeout_and_recovers(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    # The freeze stays well under cluster-node-timeout (5 s), so the cluster itself never
    # declares the node failed; only this client's calls to it go unanswered.
    # Long enough that the healthy node answers within it on a busy machine.
    store = await redis_cluster_store_factory(timeout=2.0)
    frozen_key, other_key = keys_on_every_node(redis_cluster, store.prefix, 1)[:2]
    await store.set(frozen_key, "on the frozen node")
    await store.set(other_key, "elsewhere")
    node = redis_cluster.node_for_slot(key_slot(stored(frozen_key, store.prefix)))
    node.freeze()
    try:
        with pytest.raises(StoreError, match=rf"GET of key '{frozen_key}'.*within 2 s"):
            await asyncio.wait_for(store.get(frozen_key), GUARD)
        assert await asyncio.wait_for(store.get(other_key), GUARD) == "elsewhere"
    finally:
        node.thaw()
    await asyncio.wait_for(wait_for_cluster_ok(redis_cluster), GUARD)

    async def answers() -> str | None:
        while True:
            try:
                return await store.get(frozen_key)
            except StoreError:
                await asyncio.sleep(0.1)

    assert await asyncio.wait_for(answers(), GUARD) == "on the frozen node"


# --- the compressor on the cluster -----------------------------------------------------------


def chat(count: int) -> list[dict[str, Any]]:
    return [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(count)]


@pytest.mark.servers
async def test_summarize_compressor_compresses_hits_and_extends_on_the_cluster(
    redis_cluster: RedisClusterServers,
    redis_cluster_store_factory: StoreFactoryOf[RedisStore],
    raw: redis.asyncio.RedisCluster,
) -> None:
    store = await redis_cluster_store_factory()
    summarizer = RecordingSummarizer()

    def compressor() -> SummarizeCompressor:
        # A new compressor per request, as a stateless server behind a load balancer.
        return SummarizeCompressor(
            summarizer, store, trigger=MessageThreshold(6), keep=KeepMessages(4), namespace="app"
        )

    history = chat(12)
    first = await compressor().compress_detailed(history[:8], thread_id="chat-42")
    assert (first.outcome, first.summary_range) == ("summarized", (0, 3))
    assert summarizer.sent_contents() == [f"turn {i}" for i in range(4)]

    again = await compressor().compress_detailed(history[:8], thread_id="chat-42")
    assert (again.outcome, again.summary_range, again.summarizer_calls) == ("hit", (0, 3), 0)
    assert again.messages == first.messages

    extended = await compressor().compress_detailed(history, thread_id="chat-42")
    assert (extended.outcome, extended.summary_range) == ("extended", (0, 7))
    # The default tree merges the cached part with the new messages, reading them as stated.
    assert summarizer.calls[-1].context.task == "summarize"
    assert [m["content"] for m in summarizer.calls[-1].messages] == [f"turn {i}" for i in range(8)]
    assert len(summarizer.calls) == 2

    other = await compressor().compress_detailed(history[:8], thread_id="chat-43")
    assert other.outcome == "summarized"

    names = await keys_under(raw, store.prefix)
    ours = [name for name in names if b"{thread_chat-42}" in name]
    theirs = [name for name in names if b"{thread_chat-43}" in name]
    assert len(ours) >= 3  # the index and at least two ranges
    assert len(ours) + len(theirs) == len(names)
    assert {server_slot(redis_cluster, name) for name in ours} == {
        server_slot(redis_cluster, b"thread_chat-42")
    }
    assert {server_slot(redis_cluster, name) for name in theirs} == {
        server_slot(redis_cluster, b"thread_chat-43")
    }


# --- the docs section ------------------------------------------------------------------------


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.servers
def test_the_docs_example_runs_against_the_cluster(redis_cluster: RedisClusterServers) -> None:
    guide = GUIDE.read_text()
    assert guide.startswith("# Run on Redis Cluster\n")
    assert python_blocks(guide)[0] == '--8<-- "examples/redis_cluster.py"\n'
    code = EXAMPLE.read_text()
    printed = guide.split("this prints:\n\n```\n", 1)[1].split("```", 1)[0]
    placeholder = "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"
    assert placeholder in code
    prefix = f"docs-{uuid.uuid4().hex}:"
    run = code.replace(placeholder, redis_cluster.addresses).replace("myapp:", prefix)
    result = subprocess.run(
        [sys.executable, "-c", run], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    # The slots printed are those of the thread segment, the same under any prefix.
    assert result.stdout.splitlines() == printed.replace("myapp:", prefix).splitlines()


@pytest.mark.servers
async def test_scan_keys_lists_every_primary_page_by_page(
    redis_cluster_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    store = await redis_cluster_store_factory()
    threads = [f"chat-{n}" for n in range(30)]  # thirty slots, spread over the three nodes
    for thread in threads:
        await store.set(ThreadKeys(thread).index, "i")
        await store.set(ThreadKeys(thread).prefix + "summary:0-3", "s")
    await store.set(ThreadKeys("elsewhere", namespace="tenant").index, "i")
    await store.set("notes:thread_1", "not a thread's key")
    listed: list[str] = []
    nodes: set[str] = set()
    cursor: str | None = None
    for _ in range(200):
        keys, cursor = await asyncio.wait_for(
            store.scan_keys("thread_", cursor=cursor, count=5), GUARD
        )
        listed += keys
        if cursor is None:
            break
        nodes.add(cursor.rpartition("@")[0])
    expected = {ThreadKeys(t).index for t in threads} | {
        ThreadKeys(t).prefix + "summary:0-3" for t in threads
    }
    assert set(listed) == expected
    assert len(nodes) == 3  # every primary was scanned
    everything = await list_threads(store, limit=1000)
    assert (set(everything.threads), everything.cursor) == (set(threads), None)
    with pytest.raises(ConfigurationError, match="cursor must be one scan_keys returned"):
        await store.scan_keys("thread_", cursor="17")
