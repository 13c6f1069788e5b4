"""How a worker program and the test that started it talk: JSON lines out, a file to go, and a
file saying that a compressor waits for another worker's lease."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    # Only named: a worker whose clock is shifted imports slimcache after the shift.
    from slimcache import SummarizeCompressor

__all__ = ["answer_jobs", "emit", "signalling_lease_wait", "wait_for"]

_T = TypeVar("_T")


def emit(message: Mapping[str, Any]) -> None:
    """Print ``message`` to the parent as one JSON line, at once."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def answer_jobs(answer: Callable[[Any], Awaitable[Mapping[str, Any]]]) -> None:
    """Print ``{"started": true}``, then answer each JSON line read from stdin with the JSON
    line ``answer`` gives for it, until stdin closes."""
    emit({"started": True})
    while line := await asyncio.to_thread(sys.stdin.readline):
        emit(await answer(json.loads(line)))


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _touch(path: str | Path) -> None:
    Path(path).touch()


async def wait_for(path: str, timeout: float) -> None:
    """Return once ``path`` exists (the parent's signal to go).

    Raises:
        TimeoutError: It did not appear within ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not _exists(path):
        if loop.time() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:g}s")
        await asyncio.sleep(0.005)


async def signalling_lease_wait(
    compressor: SummarizeCompressor, path: str | Path, call: Awaitable[_T]
) -> _T:
    """Await ``call`` of ``compressor``; create ``path`` as soon as the compressor waits for
    another worker's lease, or once ``call`` ended without waiting (so that nobody waits for
    the file in vain).

    A holder that waits for ``path`` before it finishes is then surely watched by a waiter,
    however late the machine lets the waiter reach the lease.
    """
    before = compressor.stats.lease_waits

    async def watch() -> None:
        # The counters have no event to wait on: they are read every few milliseconds.
        while True:
            if compressor.stats.lease_waits != before:
                _touch(path)
                return
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    try:
        return await call
    finally:
        watcher.cancel()
        _touch(path)
