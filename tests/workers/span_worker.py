"""One worker process of the span tests: summarizes one span of a thread on a shared store.

See ``tests/frameworks/test_spans.py``. It opens the store from ``--url``, prints
``{"armed": true}``, waits for the ``--go`` file, summarizes ``--messages`` turns as the span
starting at ``--start`` of ``--thread``, and prints ``{"outcome": ..., "summary": ...}``. Every
summarizer call appends one line to ``--calls-log`` (``O_APPEND``, one ``write`` per line) and
sleeps ``--delay`` seconds first, so that the calls of both processes would overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

from slimcache import Message, SummaryContext, open_store
from slimcache.frameworks.spans import SpanSummaries
from slimcache.stores import SupportsClose
from tests.fakes import chat
from tests.workers.signals import emit, wait_for


async def main(arguments: argparse.Namespace) -> None:
    store = open_store(arguments.url)

    async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
        await asyncio.sleep(arguments.delay)
        line = f"{context.start}-{context.end} {os.getpid()}\n".encode()
        descriptor = os.open(arguments.calls_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)
        return f"summary of {len(messages)} messages"

    spans = SpanSummaries(summarize, store, {"summarizer_id": "span-worker", "lock_wait": 60})
    span = chat(arguments.messages, start=arguments.start, system=None)
    await spans.summarize(span[:1], "warm-up")  # the store's connection, before the race
    emit({"armed": True})
    await wait_for(arguments.go, 60)
    result = await spans.summarize(span, arguments.thread, start=arguments.start)
    emit({"outcome": result.outcome, "summary": result.summary})
    if isinstance(store, SupportsClose):
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.workers.span_worker")
    for name in ("--url", "--thread", "--go", "--calls-log"):
        parser.add_argument(name, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--messages", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.5)
    asyncio.run(main(parser.parse_args()))
