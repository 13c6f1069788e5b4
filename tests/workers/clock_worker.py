"""A worker process whose wall clock runs ahead of or behind everyone else's.

See ``tests/core/test_lease_edges.py``. Before slimcache is imported, ``time.time`` is replaced
by the real time plus ``--offset`` seconds, so every wall-clock reading of slimcache and the
store adapters in this process (lease deadlines, expiry times computed on the client) is off
by that much, as on a machine whose clock is wrong. Monotonic clocks are left alone.

The worker opens the store from ``--store`` (JSON: ``{"url": ..., "options": {...}}``) and
compresses :func:`conversation` once on ``--thread``. With ``--go``, it first reads the store
once (connected), prints ``ready`` and waits for that file to appear. With ``--waiting``, it
creates that file as soon as its compressor waits for the thread's lease (or is done).
Its summarizer prints ``summarizing`` and then, with ``--mode die``, ends the process at once,
holding the thread's lease; with ``--mode hold`` it waits for the ``--after`` file, if given
(another worker's ``--waiting``), sleeps ``--delay`` seconds (renewing the lease all the
while), appends one line ``"<start>-<end> <label>\n"`` to ``--calls-log`` (``--label``:
``worker``), and answers. Last, the worker prints ``done <outcome> <lease waits>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

SUMMARIZER_ID = "clock-worker"
TRIGGER = 20
KEEP = 10
# Seconds to wait for a file another process creates: only reached when something hangs.
SIGNAL_TIMEOUT = 120.0


def _shift_clock(offset: float) -> None:
    real = time.time

    def shifted() -> float:
        return real() + offset

    time.time = shifted


def conversation(messages: int = 30) -> list[dict[str, Any]]:
    """The history every worker compresses."""
    from tests.fakes import chat

    return chat(messages)


def compressor_options(lease_ttl: float, lock_wait: float) -> dict[str, Any]:
    """The settings every worker's compressor shares, so their cache entries serve each other."""
    from slimcache import KeepMessages, MessageThreshold

    return {
        "trigger": MessageThreshold(TRIGGER),
        "keep": KeepMessages(KEEP),
        "summarizer_id": SUMMARIZER_ID,
        "lease_ttl": lease_ttl,
        "lock_wait": lock_wait,
    }


async def _run(args: argparse.Namespace) -> None:
    from slimcache import Message, SummarizeCompressor, SummaryContext, open_store
    from slimcache.stores import SupportsClose
    from tests.workers.signals import signalling_lease_wait, wait_for

    spec = json.loads(args.store)
    store = open_store(spec["url"], **spec["options"])

    async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
        print("summarizing", flush=True)
        if args.mode == "die":
            os._exit(0)
        if args.after is not None:
            await wait_for(args.after, timeout=SIGNAL_TIMEOUT)
        await asyncio.sleep(args.delay)
        fd = os.open(args.calls_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{context.start}-{context.end} {args.label}\n".encode())
        os.close(fd)
        return f"worker[{context.start}-{context.end}]"

    compressor = SummarizeCompressor(
        summarize, store, **compressor_options(args.lease_ttl, args.lock_wait)
    )
    if args.go is not None:
        await store.get("clock-worker:warm-up")
        print("ready", flush=True)
        await wait_for(args.go, timeout=SIGNAL_TIMEOUT)
    call = compressor.compress_detailed(conversation(), thread_id=args.thread)
    if args.waiting is not None:
        call = signalling_lease_wait(compressor, args.waiting, call)
    result = await call
    print(f"done {result.outcome} {compressor.stats.lease_waits}", flush=True)
    if isinstance(store, SupportsClose):
        await store.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    """Run one worker; see the module docstring."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--offset", type=float, required=True)
    parser.add_argument("--mode", choices=["die", "hold"], required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--lease-ttl", type=float, required=True)
    parser.add_argument("--lock-wait", type=float, default=30.0)
    parser.add_argument("--calls-log", default=os.devnull)
    parser.add_argument("--label", default="worker")
    parser.add_argument("--go", default=None)
    parser.add_argument("--waiting", default=None)
    parser.add_argument("--after", default=None)
    args = parser.parse_args(argv)
    _shift_clock(args.offset)
    asyncio.run(_run(args))


if __name__ == "__main__":
    main(sys.argv[1:])
