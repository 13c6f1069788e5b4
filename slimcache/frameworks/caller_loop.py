"""Calling a framework's model on the event loop of the agent that asked for a summary.

The compressor runs on slimcache's own event loop (:mod:`slimcache.sync`), where the store's
connections stay. A framework's model, though, holds an HTTP client that belongs to the agent's
event loop, and may not be used from another one. So the integrations note the agent's loop
before handing the compression over (:func:`calling_from`), and the summarizers built on a
framework's model send each request back to it (:func:`on_caller_loop`). The agent's loop is
free meanwhile: it is awaiting the compression.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["calling_from", "on_caller_loop"]

T = TypeVar("T")

_caller: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar(
    "slimcache_caller_loop", default=None
)


@contextlib.contextmanager
def calling_from(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Note ``loop`` as the agent's, for the work submitted to slimcache's loop in this block.

    The note travels in the context that :meth:`slimcache.sync.Runner.submit` copies.
    """
    token = _caller.set(loop)
    try:
        yield
    finally:
        _caller.reset(token)


async def on_caller_loop(call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()`` on the agent's event loop when one was noted, else here."""
    loop = _caller.get()
    if loop is None or loop.is_closed() or loop is asyncio.get_running_loop():
        return await call()

    async def run() -> T:
        return await call()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), loop))
