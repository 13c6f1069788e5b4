"""Replay chitchat conversations as a stateless chat server would, and print the figures.

The same engine as ``slimcache bench``, with plain prints and no typer or rich::

    uv run python benchmarks/replay.py                    # 20 conversations, memory:// store
    uv run python benchmarks/replay.py 50 sqlite+aiosqlite:///./slimcache-bench.db

Arguments: how many conversations (default 20), the store URL (default ``memory://``).
"""

from __future__ import annotations

import asyncio
import sys

from slimcache import open_store
from slimcache.bench.datasets import load_chitchat, select_conversations
from slimcache.bench.engine import run_bench
from slimcache.bench.results import BenchReport
from slimcache.bench.summarizers import OfflineSummarizer
from slimcache.stores import SupportsClose

MIN_MESSAGES = 40


def show(report: BenchReport) -> None:
    """Print one line per mode, then the floor."""
    print(
        f"{len(report.conversations)} chitchat conversations, {report.requests} requests per "
        f"mode, store {report.store} ({report.warm_threads} threads already cached)"
    )
    print(f"{'mode':<34}{'calls':>8}{'input tokens':>14}{'vs naive':>10}{'hits':>8}{'wall s':>8}")
    for key, mode in report.modes.items():
        ratio = report.ratio(key, "input_tokens")
        print(
            f"{mode.label:<34}{mode.summarizer_calls:>8,}{mode.input_tokens:>14,}"
            f"{'-' if ratio is None else f'{ratio:.3f}':>10}{mode.cache_hits:>8,}"
            f"{mode.wall_seconds:>8.2f}"
        )
    memory = report.modes["memory"]
    print(
        f"floor: {report.floor_tokens:,} message tokens left the window; slimcache sent "
        f"{memory.message_tokens:,} of them to the summarizer"
    )


async def main(count: int, url: str) -> None:
    """Load chitchat, replay ``count`` long conversations on the store at ``url``."""
    dataset = load_chitchat()
    conversations = select_conversations(
        dataset.conversations, count=count, min_messages=MIN_MESSAGES
    )
    store = open_store(url)
    try:
        report = await run_bench(
            dataset, conversations, store=store, store_url=url, summarizer=OfflineSummarizer()
        )
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()
    show(report)


if __name__ == "__main__":
    conversations = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    store_url = sys.argv[2] if len(sys.argv) > 2 else "memory://"
    asyncio.run(main(conversations, store_url))
