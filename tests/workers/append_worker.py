"""One worker process of the multi-process window-memory tests.

See ``tests/recipes/test_window_memory_appends.py``.

It opens one store from a URL, warms it up, prints ``{"started": true}``, waits until the
parent creates the ``go`` file, then runs ``tasks`` asyncio tasks at once, each appending
``steps`` user messages to one session of a :class:`ConversationWindowMemory`, one
``append`` at a time. The message of task ``t``'s step ``s`` has the content
``"<writer>:<t>:<s>"`` (see :func:`content`), so the parent can tell every message's writer and
its place in that writer's order. Finally it prints one JSON line::

    {"worker": 0, "errors": ["StoreTimeout: ...", ...]}

with one entry per append that raised (a failed append is not retried).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from slimcache import ConversationWindowMemory, Store, open_store
from slimcache.stores import SupportsClose
from tests.workers.signals import emit, wait_for

__all__ = ["append_steps", "content", "main"]

# Seconds to wait for the go file before giving up.
_START_TIMEOUT = 120.0


def content(writer: str, task: int, step: int) -> str:
    """The content of one appended message: who wrote it, and where in that writer's order."""
    return f"{writer}:{task}:{step}"


async def append_steps(
    memory: ConversationWindowMemory, session: str, writer: str, task: int, steps: int
) -> list[str]:
    """Append ``steps`` messages one by one; return the errors of those that raised."""
    errors: list[str] = []
    for step in range(steps):
        message = {"role": "user", "content": content(writer, task, step)}
        try:
            await memory.append(session, message)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return errors


async def run(args: argparse.Namespace) -> None:
    """Open the store, wait for the go file, append, and report the errors."""
    store: Store = open_store(args.url, **json.loads(args.store_options))
    try:
        # Open a connection now, so that every process starts appending together.
        await store.get(f"warm-up-{args.worker}")
        memory = ConversationWindowMemory(store, 5, chunk_size=args.chunk_size)
        emit({"started": True})
        await wait_for(args.go, _START_TIMEOUT)
        writer = f"p{args.worker}"
        results = await asyncio.gather(
            *(
                append_steps(memory, args.session, writer, task, args.steps)
                for task in range(args.tasks)
            )
        )
        emit({"worker": args.worker, "errors": [e for errors in results for e in errors]})
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m tests.workers.append_worker")
    parser.add_argument("--url", required=True, help="store URL, for open_store")
    parser.add_argument("--store-options", default="{}", help="JSON object of store options")
    parser.add_argument("--worker", type=int, required=True, help="this worker's number")
    parser.add_argument("--session", required=True, help="the session every task appends to")
    parser.add_argument("--tasks", type=int, required=True, help="appending tasks")
    parser.add_argument("--steps", type=int, required=True, help="messages each task appends")
    parser.add_argument("--chunk-size", type=int, required=True, help="the memory's chunk_size")
    parser.add_argument("--go", required=True, help="file whose creation starts the appends")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Append once the go file appears; print the errors."""
    asyncio.run(run(parse(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
