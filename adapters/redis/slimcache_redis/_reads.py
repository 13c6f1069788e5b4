"""Reads issued together, sent together: the reads of one turn of the event loop in one pipeline.

A server answering many requests at once reads many thread indexes at the same moment. Each
``GET`` (or ``MGET``) through redis-py costs far more on the client than on the wire (a
connection taken from the pool and given back, a timer, a task for the write, the reply
parsed), so the reads issued during one turn of the event loop are sent at the end of it as
one pipeline, on one connection, and each caller gets its own reply: a value, ``None``, or the
error Redis gave for that command (``WRONGTYPE``). The pipeline is bounded by the store's own
bound, counted from the moment the first read of its turn was issued, so every caller has its
reply or its error within its own bound with no timer of its own, and a server that stops
answering holds nothing longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar, cast

import redis.asyncio

from slimcache_redis._commands import RAW

__all__ = ["FAILED", "CoalescedReads", "Pending", "bounded", "fail", "for_batch"]


# asyncio.timeout_at (Python 3.11+); before it, the pipeline is bounded with wait_for.
_TIMEOUT_AT: Any = getattr(asyncio, "timeout_at", None)

_T = TypeVar("_T")

# The reads of a batch: each command and the future its caller awaits.
Pending = list[tuple[tuple[Any, ...], "asyncio.Future[Any]"]]


class CoalescedReads:
    """The reads of one event loop turn, sent as one pipeline (see the module docstring).

    Args:
        client: A ``redis.asyncio.Redis`` client whose replies are not decoded (a pipeline's
            replies are decoded by the client whatever a command asks for).
        timeout: Seconds the pipeline may take.
    """

    def __init__(self, client: redis.asyncio.Redis, timeout: float) -> None:
        self._client: Any = client  # redis-py's execute_command is untyped
        self._timeout = timeout
        self._pending: Pending = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline = 0.0  # of the pending reads: the first one's bound
        self._sending: set[asyncio.Task[None]] = set()  # referenced until they finish

    def read(self, *command: Any) -> Awaitable[Any]:
        """The reply to the read ``command`` (``"GET", name`` or ``"MGET", *names``), sent
        with the other reads of this turn of the loop; raw bytes. It is settled within the
        store's bound (``asyncio.TimeoutError`` past it); while a batch of another event loop is
        pending, the command is sent at once, under a bound of its own."""
        loop = asyncio.get_running_loop()
        if self._pending and loop is not self._loop:  # a batch waits in another loop
            return asyncio.wait_for(self._direct(command), self._timeout)
        reply: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            self._loop = loop
            self._deadline = loop.time() + self._timeout
            self._schedule(loop)
        self._pending.append((command, reply))
        return reply

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Have the pending reads sent: at the end of this turn of the loop."""
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        waiting = [(command, reply) for command, reply in batch if not reply.done()]
        if waiting:
            self._start(self._send(waiting, self._deadline))

    def _start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` as a task of the batch's loop, referenced until it finishes."""
        assert self._loop is not None
        task = self._loop.create_task(work)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        return task

    async def _direct(self, command: tuple[Any, ...]) -> Any:
        """``command`` sent on its own, raw bytes back."""
        return await self._client.execute_command(*command, **RAW)

    async def _send(self, batch: Pending, deadline: float) -> None:
        await self._settle(batch, deadline, self._replies(batch))

    async def _settle(
        self, batch: Pending, deadline: float, replies: Coroutine[Any, Any, list[Any]]
    ) -> None:
        """Await ``replies`` (one per read of ``batch``, a value or the error of that read)
        by ``deadline`` and give each caller its own; on a failure of the whole, each its
        error."""
        # Bounded from the moment the first read of the turn was issued: every reply is
        # settled, at the latest with asyncio.TimeoutError, within its own caller's bound.
        found = await for_batch(batch, bounded(replies, deadline))
        if found is FAILED:
            return
        for (_, reply), value in zip(batch, found, strict=True):
            if not reply.done():
                if isinstance(value, BaseException):
                    reply.set_exception(value)
                else:
                    reply.set_result(value)

    async def _replies(self, batch: Pending) -> list[Any]:
        if len(batch) == 1:
            return [await self._client.execute_command(*batch[0][0], **RAW)]
        pipe = self._client.pipeline(transaction=False)
        for command, _ in batch:
            pipe.execute_command(*command, **RAW)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies


async def bounded(work: Awaitable[_T], deadline: float) -> _T:
    """Await ``work`` until ``deadline`` (the loop's clock), ``asyncio.TimeoutError`` past it."""
    if _TIMEOUT_AT is not None:
        async with _TIMEOUT_AT(deadline):
            return await work
    left = deadline - asyncio.get_running_loop().time()  # pragma: no cover - Python 3.10
    return await asyncio.wait_for(work, left)  # pragma: no cover - Python 3.10


FAILED: Any = object()
"""What :func:`for_batch` returns when the work failed (each caller has the failure)."""


async def for_batch(batch: Pending, work: Awaitable[_T]) -> _T:
    """Await ``work`` done for the reads of ``batch``; if it fails, each caller still waiting
    gets the failure and ``FAILED`` is returned, and if it is cancelled, so is each caller.

    A failure that is no ``Exception`` (``KeyboardInterrupt``, ``SystemExit``) is raised
    again too, for the loop to see.
    """
    try:
        return await work
    except asyncio.CancelledError:
        for _, reply in batch:
            reply.cancel()
        raise
    except BaseException as exc:
        fail(batch, exc)
        if not isinstance(exc, Exception):
            raise
        return cast("_T", FAILED)


def fail(batch: Pending, exc: BaseException) -> None:
    """Give ``exc`` to every caller of ``batch`` still waiting."""
    for _, reply in batch:
        if not reply.done():
            reply.set_exception(exc)
