"""The reads of one turn of the event loop on a Redis Cluster: one pipeline per node.

As on one server (:mod:`slimcache_redis._reads`), the reads (``GET``, and ``MGET`` of one slot)
issued during one turn of the event loop are sent together at the end of it; on a cluster they
are grouped by the node that serves each key's slot, in the client's own slot map, and each
node gets one pipeline, on one of its connections. Each node's pipeline is a task of its own,
so a node that fails or stops answering fails only the reads sent to it; the others get their
replies as soon as their nodes answer.

The replies of the nodes come back at different moments, and the callers each one wakes read
again at once; sent at the end of their own turn, the reads of one round of requests would go
out in a pipeline per node per reply, ever smaller. So reads issued while pipelines are out
wait for them: they go out when the last of those is back (after the callers it woke have
read), or 2 ms after the first of them was issued, whichever comes first. A node that does
not answer thus delays the others' reads by 2 ms at most.

A read answered with ``ASK`` (its slot being migrated, the key already moved) is sent to the
node named, after ``ASKING`` on the same connection. A read the cluster could not answer
otherwise (``MOVED``, ``TRYAGAIN``, ``CLUSTERDOWN``, or a connection to its node that failed or
timed out, or an ``ASK`` to a node the client does not know) is sent again on its own through
the cluster client, which follows the redirection, refreshes its slot map and
retries as it does for any command. Every caller has its reply or its error within the store's
bound counted from the first read of its turn: finding the cluster (on a new or reset client),
the node's pipeline and any read sent again all run within it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import redis.asyncio
from redis.asyncio.cluster import ClusterNode, PipelineCommand
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MaxConnectionsError,
    MovedError,
    RedisClusterException,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from slimcache_redis._commands import RAW
from slimcache_redis._reads import FAILED, CoalescedReads, Pending, bounded, for_batch

__all__ = ["ClusterReads"]

# Failures of a read that the cluster client's own path handles: a redirection (MovedError is
# an AskError), a slot being migrated, a cluster failing over, a node that could not be reached.
_SENT_AGAIN = (AskError, TryAgainError, ClusterDownError, RedisConnectionError, RedisTimeoutError)


# How long reads wait for others while earlier pipelines are out (see _schedule).
_GATHER = 0.002


def _sent_again(reply: object) -> bool:
    # No connection left to the node: one each for the reads sent again would not help.
    return isinstance(reply, _SENT_AGAIN) and not isinstance(reply, MaxConnectionsError)


class ClusterReads(CoalescedReads):
    """The reads of one event loop turn, one pipeline per node (see the module docstring).

    Args:
        client: The ``redis.asyncio.RedisCluster`` client.
        timeout: Seconds a read may take, from the first read of its turn.
        ready: Makes sure the client knows the cluster (the store's discovery), before the
            reads are routed.
    """

    def __init__(
        self,
        client: redis.asyncio.RedisCluster,
        timeout: float,
        ready: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(client, timeout)  # type: ignore[arg-type]  # same interface here
        self._cluster = client
        self._ready = ready
        self._timer: asyncio.TimerHandle | None = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._sending:
            loop.call_soon(self._flush)
            return
        # Pipelines are out: the callers their replies wake read again at once, so these reads
        # wait for them, and go out when the last pipeline is back (or _GATHER at most).
        self._timer = loop.call_later(_GATHER, self._flush)

    def _start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = super()._start(work)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        if not self._sending and self._timer is not None and self._loop is not None:
            self._timer.cancel()
            self._timer = None
            self._loop.call_soon(self._flush)  # after the callers the replies woke

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super()._flush()

    async def _direct(self, command: tuple[Any, ...]) -> Any:
        await self._ready()
        return await super()._direct(command)

    async def _send(self, batch: Pending, deadline: float) -> None:
        # Find the cluster if need be, then route each read to its node: one task per node.
        routed = await for_batch(batch, self._route(batch, deadline))
        if routed is FAILED:
            return
        groups, unrouted = routed
        for node, group in groups.items():
            self._start(self._settle(group, deadline, self._node_replies(node, group)))
        if unrouted:
            self._start(self._settle(unrouted, deadline, self._one_by_one(unrouted)))

    async def _route(
        self, batch: Pending, deadline: float
    ) -> tuple[dict[ClusterNode, Pending], Pending]:
        await bounded(self._ready(), deadline)
        return self._by_node(batch)

    def _by_node(self, batch: Pending) -> tuple[dict[ClusterNode, Pending], Pending]:
        """The reads of ``batch`` grouped by the node serving their slot, and those of a slot
        no node is known to serve (sent on their own, for the client to find one)."""
        client = self._cluster
        nodes = client.nodes_manager
        replicas = bool(client.read_from_replicas)
        balancing = client.load_balancing_strategy
        groups: dict[ClusterNode, Pending] = {}
        unrouted: Pending = []
        by_slot: dict[int, ClusterNode | None] = {}
        for read in batch:
            slot = client.keyslot(read[0][1])  # an MGET's keys share one slot
            if slot not in by_slot:
                try:
                    by_slot[slot] = nodes.get_node_from_slot(slot, replicas, balancing)
                except RedisClusterException:  # SlotNotCoveredError
                    by_slot[slot] = None
            node = by_slot[slot]
            if node is None:
                unrouted.append(read)
            else:
                groups.setdefault(node, []).append(read)
        return groups, unrouted

    async def _node_replies(self, node: ClusterNode, group: Pending) -> list[Any]:
        """One pipeline to ``node``; the reads it could not answer, sent again on their own."""
        replies = await _pipeline(node, [command for command, _ in group])
        await self._asked_elsewhere(group, replies)
        again = [position for position, reply in enumerate(replies) if _sent_again(reply)]
        if again:
            retried = await self._one_by_one([group[position] for position in again])
            for position, reply in zip(again, retried, strict=True):
                replies[position] = reply
        return replies

    async def _asked_elsewhere(self, group: Pending, replies: list[Any]) -> None:
        """Send the reads answered with ``ASK`` (a slot being migrated, the key already gone)
        to the node named, each after ``ASKING`` on the same connection; in place."""
        asked: dict[tuple[str, int], list[int]] = {}
        for position, reply in enumerate(replies):
            if isinstance(reply, AskError) and not isinstance(reply, MovedError):
                asked.setdefault((reply.host, reply.port), []).append(position)
        for (host, port), positions in asked.items():
            node = self._cluster.get_node(host, port)
            if node is None:  # a node the client does not know yet: it finds it itself
                continue
            commands = [("ASKING",), *(group[position][0] for position in positions)]
            # ASKING lets the next command only through: one before each read.
            interleaved = [part for command in commands[1:] for part in (commands[0], command)]
            found = await _pipeline(node, interleaved)
            for position, reply in zip(positions, found[1::2], strict=True):
                replies[position] = reply

    async def _one_by_one(self, reads: Pending) -> list[Any]:
        """Each read sent on its own through the cluster client (redirections, retries), all
        at once; a value or the error of each."""
        client: Any = self._cluster  # redis-py's execute_command is untyped
        sent = [client.execute_command(*command, **RAW) for command, _ in reads]
        if len(sent) == 1:
            try:
                return [await sent[0]]
            except Exception as exc:
                return [exc]
        replies: list[Any] = await asyncio.gather(*sent, return_exceptions=True)
        return replies


async def _pipeline(node: ClusterNode, commands: list[tuple[Any, ...]]) -> list[Any]:
    """``commands`` sent to ``node`` as one pipeline, on one of its connections; a reply or the
    error of each (a failed connection is the error of all)."""
    # Replies as bytes whatever the client's decode_responses: a node parses each command of a
    # pipeline with that command's own options.
    sent = [PipelineCommand(position, *command, **RAW) for position, command in enumerate(commands)]
    try:
        await node.execute_pipeline(sent)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        return [exc] * len(sent)
    return [command.result for command in sent]
