"""One thread's batch on a Redis Cluster: ``MULTI``, the commands and ``EXEC`` on its node.

redis-py's asyncio cluster pipeline, in transaction mode, queues each command by running it in
a thread of its own with an event loop of its own (redis-py 8.1): a thread and a loop per
command, far more than the round trip itself. A thread's keys share one slot, so the store
writes the transaction straight to the node serving that slot, as one pipeline on one of its
connections, the replies left as bytes. Only when the node does not serve the slot any more
(``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN`` while queueing) does the batch go through
redis-py's cluster pipeline, which follows the redirection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio
from redis.asyncio.cluster import PipelineCommand
from redis.exceptions import AskError, ClusterDownError, TryAgainError

from slimcache_redis._commands import RAW

__all__ = ["cluster_transaction"]


# The node did not take the commands for the slot (MovedError is an AskError).
_ELSEWHERE = (AskError, TryAgainError, ClusterDownError)


async def cluster_transaction(
    client: redis.asyncio.RedisCluster, name: bytes, commands: Sequence[tuple[Any, ...]]
) -> list[Any]:
    """Run ``commands`` as one ``MULTI``/``EXEC`` transaction on the node serving ``name``.

    Args:
        client: The cluster client (it knows the cluster already).
        name: A key of the transaction; all its keys share this one's slot.
        commands: The commands, each as the arguments of ``execute_command``.

    Returns:
        One reply per command, raw bytes (no response callback applied).

    Raises:
        ResponseError: The first error a command met; other redis-py errors as they come.
    """
    node = client.nodes_manager.get_node_from_slot(client.keyslot(name))
    sent = [
        PipelineCommand(0, "MULTI"),
        *(PipelineCommand(number, *command, **RAW) for number, command in enumerate(commands, 1)),
        PipelineCommand(len(commands) + 1, "EXEC", **RAW),
    ]
    await node.execute_pipeline(sent)
    if any(isinstance(command.result, _ELSEWHERE) for command in sent):
        return await _through_the_client(client, commands)
    for command in sent:  # an error while queueing aborts the transaction: it is the cause
        if isinstance(command.result, Exception):
            raise command.result
    executed: Any = sent[-1].result
    replies: list[Any] = list(executed)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


async def _through_the_client(
    client: redis.asyncio.RedisCluster, commands: Sequence[tuple[Any, ...]]
) -> list[Any]:
    pipe = client.pipeline(transaction=True)
    for command in commands:
        pipe.execute_command(*command, **RAW)
    replies: list[Any] = await pipe.execute()
    return replies
