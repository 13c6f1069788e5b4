"""Reads of one event-loop turn on a Redis Cluster: one pipeline per node, each caller its reply.

Everything runs against the real three-primary cluster of the ``redis_cluster`` fixture, and
asks the nodes themselves what arrived: ``INFO commandstats`` for the commands run, and ``INFO
stats`` ``total_reads_processed`` for the socket reads a node made (a pipeline written at once
arrives in one read, separate commands each in its own).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from redis.crc import key_slot
from redis.exceptions import ResponseError
from slimcache_redis import RedisStore
from slimcache_redis._cluster import cluster_key

from slimcache import StoreError, StoreTimeout
from slimcache.stores import CompareAndSetOp, DeleteOp, GetOp, SetOp, StoreOp, ThreadKeys
from tests.servers.redis_cluster import ClusterNodeServer, RedisClusterServers
from tests.servers.store_factories import StoreFactoryOf

# A guard against hangs, far above how long any of these operations should take.
GUARD = 30.0


def slot_of(store: RedisStore, key: str) -> int:
    return key_slot((store.prefix + cluster_key(key)).encode())


def threads_by_node(
    cluster: RedisClusterServers, store: RedisStore, per_node: int
) -> dict[int, list[ThreadKeys]]:
    """``per_node`` threads on each node (by index in ``cluster.nodes``), unique to this test."""
    found: dict[int, list[ThreadKeys]] = {index: [] for index in range(len(cluster.nodes))}
    while any(len(threads) < per_node for threads in found.values()):
        keys = ThreadKeys(uuid.uuid4().hex)
        node = cluster.node_for_slot(slot_of(store, keys.index))
        threads = found[cluster.nodes.index(node)]
        if len(threads) < per_node:
            threads.append(keys)
    return found


class SocketReads:
    """Counts the socket reads ``node`` makes within a ``with`` block (``INFO stats``
    ``total_reads_processed``), less those of the counting itself: a pipeline written at once
    arrives in one read (a few if in pieces), commands sent one by one in one read each."""

    def __init__(self, node: ClusterNodeServer) -> None:
        self._admin = node.admin()
        self._before = 0
        self._idle = 0
        self.count = 0

    def _reads(self) -> int:
        return int(self._admin.info("stats")["total_reads_processed"])

    def __enter__(self) -> SocketReads:
        self._idle = -self._reads() + self._reads()  # the INFO command's own
        self._before = self._reads()
        return self

    def __exit__(self, *exc: object) -> None:
        self.count = self._reads() - self._before - self._idle
        self._admin.close()


def calls(node: ClusterNodeServer, command: str = "get") -> int:
    """Calls of ``command`` ``node`` has run so far (``INFO commandstats``)."""
    with node.admin() as admin:
        return int(admin.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


async def wait_for_cluster_ok(cluster: RedisClusterServers) -> None:
    def state_ok() -> bool:
        for node in cluster.nodes:
            with node.admin() as admin:
                if admin.cluster("INFO").get("cluster_state") != "ok":
                    return False
        return True

    while True:
        if await asyncio.to_thread(state_ok):
            return
        await asyncio.sleep(0.05)


@pytest.mark.servers
async def test_concurrent_reads_over_every_node_each_get_their_own_value(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    by_node = threads_by_node(redis_cluster, store, 20)
    threads = [keys for found in by_node.values() for keys in found]
    for keys in threads:
        await store.set(keys.index, f"index of {keys.encoded}")
        await store.set(keys.summary(0, 9), f"summary of {keys.encoded}")

    async def read(keys: ThreadKeys) -> tuple[str | None, list[str | None]]:
        index = await store.get(keys.index)
        return index, await store.get_many([keys.summary(0, 9), keys.lease, keys.index])

    got = await asyncio.wait_for(asyncio.gather(*(read(keys) for keys in threads)), GUARD)
    assert got == [
        (
            f"index of {keys.encoded}",
            [f"summary of {keys.encoded}", None, f"index of {keys.encoded}"],
        )
        for keys in threads
    ]
    # One thread's MGET and another's GET in the same turn, with keys that do not exist.
    mixed = await asyncio.gather(
        store.get_many([threads[0].index, threads[-1].index, "absent", threads[1].summary(0, 9)]),
        store.get("absent too"),
        store.get(threads[2].index),
    )
    assert tuple(mixed) == (
        [
            f"index of {threads[0].encoded}",
            f"index of {threads[-1].encoded}",
            None,
            f"summary of {threads[1].encoded}",
        ],
        None,
        f"index of {threads[2].encoded}",
    )


@pytest.mark.servers
async def test_the_reads_of_one_turn_reach_a_node_as_one_pipeline(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    threads = threads_by_node(redis_cluster, store, 50)[0]
    node = redis_cluster.nodes[0]
    for keys in threads:
        await store.set(keys.index, keys.encoded)
    assert await store.get(threads[0].index) == threads[0].encoded  # connected, cluster known
    gets = calls(node)
    with SocketReads(node) as reads:
        got = await asyncio.wait_for(asyncio.gather(*(store.get(k.index) for k in threads)), GUARD)
    assert got == [keys.encoded for keys in threads]
    assert calls(node) - gets == len(threads)
    # Sent one by one, the 50 GETs would be 50 socket reads; as one pipeline, one (a few if
    # it arrives in pieces).
    assert reads.count <= 5


@pytest.mark.servers
@pytest.mark.timeout(120)
async def test_a_frozen_node_fails_only_its_own_reads_of_the_turn_within_the_bound(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    # The freeze stays well under cluster-node-timeout (5 s), so the cluster never declares
    # the node failed; only the reads sent to it go unanswered.
    store = await redis_cluster_store_factory(timeout=1.0)
    by_node = threads_by_node(redis_cluster, store, 3)
    for threads in by_node.values():
        for keys in threads:
            await store.set(keys.index, keys.encoded)
    frozen, others = by_node[0], [*by_node[1], *by_node[2]]
    node = redis_cluster.nodes[0]
    node.freeze()
    try:
        with SocketReads(redis_cluster.nodes[1]) as reads:
            started = time.monotonic()
            got = await asyncio.wait_for(
                asyncio.gather(
                    *(store.get(keys.index) for keys in frozen),
                    *(store.get(keys.index) for keys in others),
                    store.get_many([frozen[0].index, frozen[0].lease]),
                    store.get_many([others[0].index, others[0].lease]),
                    return_exceptions=True,
                ),
                GUARD,
            )
            elapsed = time.monotonic() - started
    finally:
        node.thaw()
    failed, answered = [*got[: len(frozen)], got[-2]], [*got[len(frozen) : -2], got[-1]]
    assert all(isinstance(reply, StoreTimeout) for reply in failed), failed
    assert answered == [keys.encoded for keys in others] + [[others[0].encoded, None]]
    assert elapsed < 1.0 + 1.0  # the store's bound, and slack for a loaded machine
    assert reads.count <= 3  # the healthy node's four reads came as one pipeline
    await asyncio.wait_for(wait_for_cluster_ok(redis_cluster), GUARD)

    async def answers() -> list[str | None]:
        while True:
            try:
                return list(await asyncio.gather(*(store.get(keys.index) for keys in frozen)))
            except StoreError:
                await asyncio.sleep(0.1)

    assert await asyncio.wait_for(answers(), GUARD) == [keys.encoded for keys in frozen]


@pytest.mark.servers
async def test_a_wrong_type_fails_only_its_own_read_of_a_pipeline(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    threads = threads_by_node(redis_cluster, store, 4)[1]  # all on one node: one pipeline
    for keys in threads[1:]:
        await store.set(keys.index, keys.encoded)
    raw = redis_cluster.nodes[1].admin()
    with raw:
        raw.rpush(store.prefix + cluster_key(threads[0].index), "not a string")
    with SocketReads(redis_cluster.nodes[1]) as reads:
        got = await asyncio.gather(
            *(store.get(keys.index) for keys in threads),
            store.get_many([threads[0].index, threads[0].lease]),
            store.get_many([threads[1].index, threads[1].lease]),
            return_exceptions=True,
        )
    assert reads.count <= 3  # one pipeline: the failing read was in a batch with the others
    assert isinstance(got[0], StoreError)
    assert isinstance(got[0].__cause__, ResponseError)
    assert "WRONGTYPE" in str(got[0].__cause__)
    assert got[-2] == [None, None]  # MGET answers nil for a key that holds no string
    assert got[1:-2] == [keys.encoded for keys in threads[1:]]
    assert got[-1] == [threads[1].encoded, None]


def set_slot(cluster: RedisClusterServers, slot: int, *args: str) -> None:
    for node in cluster.nodes:
        with node.admin() as admin:
            admin.execute_command("CLUSTER SETSLOT", slot, *args)


def start_moving(slot: int, source: ClusterNodeServer, target: ClusterNodeServer) -> None:
    """Put ``slot`` in migration from ``source`` to ``target`` and move its keys there."""
    with target.admin() as to, source.admin() as frm:
        to.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source.node_id())
        frm.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target.node_id())
        while names := frm.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            frm.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *names)


def move_slot(
    cluster: RedisClusterServers, slot: int, source: ClusterNodeServer, target: ClusterNodeServer
) -> None:
    start_moving(slot, source, target)
    set_slot(cluster, slot, "NODE", target.node_id())


def undo_moving(slot: int, source: ClusterNodeServer, target: ClusterNodeServer) -> None:
    """Bring the keys of ``slot`` back to ``source``, which still owns it, and end the move."""
    with target.admin() as to, source.admin() as frm:
        while names := to.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            to.execute_command("MIGRATE", source.host, source.port, "", 0, 5000, "KEYS", *names)
        for admin in (to, frm):
            admin.execute_command("CLUSTER SETSLOT", slot, "STABLE")


@pytest.mark.servers
@pytest.mark.timeout(120)
async def test_reads_of_a_slot_being_moved_follow_ask_then_moved(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory()
    by_node = threads_by_node(redis_cluster, store, 3)
    moved, stay = by_node[0][0], [*by_node[0][1:], *by_node[1]]
    for keys in [moved, *stay]:
        await store.set(keys.index, keys.encoded)
        await store.set(keys.summary(0, 9), f"summary of {keys.encoded}")
    slot = slot_of(store, moved.index)
    assert slot not in {slot_of(store, keys.index) for keys in stay}
    source, target = redis_cluster.nodes[0], redis_cluster.nodes[1]
    expected = [(k.encoded, [f"summary of {k.encoded}", k.encoded]) for k in [moved, *stay]]

    async def read_all() -> list[tuple[str | None, list[str | None]]]:
        async def read(keys: ThreadKeys) -> tuple[str | None, list[str | None]]:
            index, found = await asyncio.gather(
                store.get(keys.index), store.get_many([keys.summary(0, 9), keys.index])
            )
            return index, found

        return list(await asyncio.wait_for(asyncio.gather(*map(read, [moved, *stay])), GUARD))

    assert await read_all() == expected  # the client knows the slot map
    moved_over = False
    try:
        start_moving(slot, source, target)
        asked = calls(target, "asking")
        assert await read_all() == expected  # the source answers ASK for the moved slot
        assert calls(target, "asking") - asked >= 2  # the moved thread's GET and MGET
        set_slot(redis_cluster, slot, "NODE", target.node_id())
        moved_over = True
        # A batch queued on the old node meets MOVED and goes through the client instead.
        batch: list[StoreOp] = [GetOp(moved.index), SetOp(moved.lease, "t"), GetOp(moved.lease)]
        assert await store.batch(batch) == [moved.encoded, None, "t"]
        assert await store.batch([DeleteOp(moved.lease), GetOp(moved.lease)]) == [None, None]
        before = calls(target)
        assert await read_all() == expected  # the source answers MOVED
        assert await read_all() == expected  # the client's slot map was updated
        assert calls(target) - before >= 2
    finally:
        if moved_over:
            move_slot(redis_cluster, slot, target, source)
        else:
            undo_moving(slot, source, target)
    assert await read_all() == expected


@pytest.mark.servers
@pytest.mark.timeout(120)
async def test_reads_do_not_wait_for_a_frozen_nodes_pipeline_out_before_them(
    redis_cluster: RedisClusterServers, redis_cluster_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    store = await redis_cluster_store_factory(timeout=2.0)
    by_node = threads_by_node(redis_cluster, store, 1)
    frozen, other = by_node[0][0], by_node[2][0]
    for keys in (frozen, other):
        await store.set(keys.index, keys.encoded)
    node = redis_cluster.nodes[0]
    node.freeze()
    try:
        hanging = asyncio.ensure_future(store.get(frozen.index))
        await asyncio.sleep(0.2)  # its pipeline is out, unanswered
        assert await asyncio.wait_for(store.get(other.index), GUARD) == other.encoded
        assert not hanging.done()
        with pytest.raises(StoreTimeout):
            await asyncio.wait_for(hanging, GUARD)
    finally:
        node.thaw()
    await asyncio.wait_for(wait_for_cluster_ok(redis_cluster), GUARD)


@pytest.mark.servers
async def test_a_threads_batch_is_one_transaction_on_its_node_and_fails_whole(
    redis_cluster: RedisClusterServers,
    redis_cluster_store_factory: StoreFactoryOf[RedisStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = await redis_cluster_store_factory()
    keys = threads_by_node(redis_cluster, store, 1)[2][0]
    node = redis_cluster.nodes[2]
    await store.set(keys.index, "v1")
    # redis-py's cluster pipeline queues each command of a transaction in a thread of its own.
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    execs = calls(node, "exec")
    got = await store.batch(
        [
            GetOp(keys.index),
            CompareAndSetOp(keys.index, "v1", "v2"),
            SetOp(keys.summary(0, 3), "s", ttl=60),
            GetOp(keys.summary(0, 3)),
            CompareAndSetOp(keys.lease, "other", "x"),
        ]
    )
    assert got == ["v1", True, None, "s", False]
    assert calls(node, "exec") - execs == 1
    assert started == []
    with node.admin() as admin:
        admin.rpush(store.prefix + cluster_key(keys.lease), "not a string")
    with pytest.raises(StoreError, match="MULTI/EXEC") as caught:
        await store.batch([SetOp(keys.index, "v3"), GetOp(keys.lease)])
    assert "WRONGTYPE" in str(caught.value.__cause__)
    assert await store.get(keys.index) == "v3"  # a transaction is not rolled back
