"""One worker process of the background-refresh test across processes.

See ``tests/core/test_compressor_background_processes.py``.

It opens one store from a URL, builds a :class:`SummarizeCompressor` with
``refresh="background"``, prints ``{"armed": true}``, waits for the parent's ``go`` file, sends
one request of the conversation (``--messages`` turns after a system message), waits for the
background refreshes to drain, and prints one JSON line::

    {"outcome": "stale", "range": null, "stats": {"background_started": 1, ...}}

Every summarizer call appends one line ``"<start>-<end> <task>\\n"`` to ``--calls-log``
(``O_APPEND``, one ``write`` per line), so the parent counts the calls of every process; each
call takes ``--delay`` seconds, so that the refreshes of the processes overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

import slimcache.background
from slimcache import KeepMessages, MessageThreshold, Store, SummarizeCompressor, open_store
from slimcache.stores import SupportsClose
from tests.fakes import chat
from tests.workers.replay_worker import SUMMARIZER_ID, LoggedSummarizer
from tests.workers.signals import emit, wait_for

__all__ = ["main"]

# Seconds to wait for the go file, or for the refreshes to drain, before giving up.
_TIMEOUT = 120.0
_STATS = (
    "stale_served",
    "background_started",
    "background_finished",
    "background_failed",
    "summarizer_calls",
)


async def serve(args: argparse.Namespace) -> None:
    """Arm, wait for the go file, send the request, drain, report."""
    store: Store = open_store(args.url, **json.loads(args.store_options))
    summarizer = LoggedSummarizer(args.calls_log, delay=args.delay, fail_first=False, fail_delay=0)
    try:
        await store.get("warm-up")  # a connection open before the go
        compressor = SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(20),
            keep=KeepMessages(10),
            refresh="background",
            ceiling=MessageThreshold(40),
            summarizer_id=SUMMARIZER_ID,
        )
        emit({"armed": True})
        await wait_for(args.go, _TIMEOUT)
        result = await compressor.compress_detailed(chat(args.messages), thread_id=args.thread)
        drained = await slimcache.background.drain(_TIMEOUT)
        stats = compressor.stats
        emit(
            {
                "outcome": result.outcome,
                "range": result.summary_range,
                "drained": drained,
                "stats": {name: getattr(stats, name) for name in _STATS},
            }
        )
    finally:
        summarizer.close()
        if isinstance(store, SupportsClose):
            await store.aclose()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m tests.workers.refresh_worker")
    parser.add_argument("--url", required=True, help="store URL, for open_store")
    parser.add_argument("--store-options", default="{}", help="JSON object of store options")
    parser.add_argument("--thread", required=True, help="the thread id")
    parser.add_argument("--messages", type=int, required=True, help="turns after the system")
    parser.add_argument("--calls-log", required=True, help="file every call is appended to")
    parser.add_argument("--delay", type=float, required=True, help="seconds each call takes")
    parser.add_argument("--go", required=True, help="file whose existence starts the request")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the one request."""
    asyncio.run(serve(parse(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
