"""One process replaying a conversation through an ADK app whose compaction slimcache caches.

See ``tests/google_adk/test_events.py``. It opens the store at ``--url``, replays ``--turns``
turns of session ``--session`` through a fresh app, runner and in-memory session service, and
prints ``{"calls": ..., "compactions": ...}``: the summarizer calls it made and the compaction
events its session holds.
"""

from __future__ import annotations

import argparse
import asyncio

from slimcache import open_store
from slimcache.google_adk import CachedEventsSummarizer
from slimcache.stores import SupportsClose
from tests.fakes import RecordingSummarizer
from tests.google_adk.fakes import Stack
from tests.workers.signals import emit


async def main(arguments: argparse.Namespace) -> None:
    store = open_store(arguments.url)
    summarizer = RecordingSummarizer()
    stack = Stack(CachedEventsSummarizer(summarizer, store, summarizer_id="adk-worker"))
    await stack.replay(arguments.session, arguments.turns)
    events = await stack.events(arguments.session)
    compactions = sum(1 for event in events if event.actions.compaction)
    emit({"calls": len(summarizer.calls), "compactions": compactions})
    if isinstance(store, SupportsClose):
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.workers.adk_worker")
    parser.add_argument("--url", required=True)
    parser.add_argument("--session", default="chat-42")
    parser.add_argument("--turns", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
