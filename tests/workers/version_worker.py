"""One worker process of the mixed-fleet test, pinned to a store format version.

See ``tests/core/test_format_fleet.py``. Started with ``--version N``, it stamps and reads
records of format version ``N`` only, as a worker of that release would (the hook: it sets
``slimcache.stores.entries.ENTRY_VERSION`` before any request). It opens one store from a URL,
prints ``{"started": true}``, and then answers requests, one JSON object per line on stdin
(``{"thread": ..., "length": ...}``: compress the first ``length`` messages of the conversation
on ``thread``), with one JSON line each::

    {"outcome": "extended", "cached": true, "range": [1, 40], "summary": "v1:..."}

Its summarizer writes ``v<N>:`` before every summary, so the parent sees whose summary a worker
served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from slimcache import (
    KeepMessages,
    Message,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    SummaryContext,
    open_store,
)
from slimcache.stores import SupportsClose, entries
from tests.fakes import chat
from tests.workers.signals import answer_jobs

__all__ = ["conversation", "main", "summary_of"]


def conversation() -> list[dict[str, Any]]:
    """The conversation every worker compresses: a system message, then 80 turns."""
    return chat(80)


def summary_of(version: int, context: SummaryContext) -> str:
    """What the summarizer of a worker of ``version`` returns."""
    previous = f"{context.previous_summary} + " if context.previous_summary else f"v{version}:"
    return f"{previous}{context.task}[{context.start}-{context.end}]"


async def serve(args: argparse.Namespace) -> None:
    """Pin the format version, open the store, then answer requests until stdin closes."""
    entries.ENTRY_VERSION = args.version

    async def summarizer(messages: Sequence[Message], context: SummaryContext) -> str:
        return summary_of(args.version, context)

    store: Store = open_store(args.url, **json.loads(args.store_options))
    compressor = SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        summarizer_id="fleet-worker",
        lease_ttl=30.0,
    )
    messages = conversation()

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        result = await compressor.compress_detailed(
            messages[: request["length"]], thread_id=request["thread"]
        )
        return {
            "outcome": result.outcome,
            "cached": result.cached,
            "range": list(result.summary_range) if result.summary_range else None,
            "summary": result.summary,
        }

    try:
        await store.get("warm-up")
        await answer_jobs(answer)
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m tests.workers.version_worker")
    parser.add_argument("--url", required=True, help="store URL, for open_store")
    parser.add_argument("--store-options", default="{}", help="JSON object of store options")
    parser.add_argument("--version", type=int, required=True, help="the format version")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Answer requests until stdin closes."""
    asyncio.run(serve(parse(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
