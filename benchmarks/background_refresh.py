"""Request latency with summaries made inline or in the background, on memory and Redis.

A stateless chat server builds a :class:`~slimcache.SummarizeCompressor` for every request and
sends the whole history each time. Inline, every request on which the trigger fires waits for
the summarizer; with ``refresh="background"`` and a ``ceiling`` such a request is answered at
once with the summary the store has and every later message, and the summary is extended
behind it. This replays conversations that way with a summarizer of fixed latency (a sleep,
then the bench's offline extractive summary) and prints, for each store and mode, the request
latency (p50, p95, p99, max), summarizer calls and input tokens, and checks every answer:

- ``over``: answers holding more messages than the ceiling allows (the pinned ones and the
  summary counted);
- ``wrong``: answers that are not exactly the pinned messages, the summary they report
  (by its range) and every message after it;
- ``fresh``: once the background work has drained, what a new request with each
  conversation's whole history gets: a hit, or ``stale>hit`` when the last refresh had
  started on an earlier request than that history (the new request offers one more, which
  is drained before asking again).

Two runs:

1. ``target``: one chitchat conversation, 70 requests (each the history up to a user message)
   0.15 s apart, ``MessageThreshold(20)`` / ``KeepMessages(10)``, ceiling
   ``MessageThreshold(40)``, a summarizer taking 0.6 s: the project's target is a p99 of at
   most 50 ms with ``refresh="background"``, with no more summarizer calls than inline's
   plus two.
2. ``bench``: ``--conversations`` chitchat conversations of at least 70 requests, replayed at
   once (each its own thread, its requests ``--gap`` apart), with summarizers of each
   ``--latencies`` (default 0.5 s and 2 s), and a ceiling of ``--ceiling`` messages.

Usage::

    uv run python benchmarks/background_refresh.py [--stores memory,redis]
        [--latencies 0.5,2] [--conversations 4] [--requests 70] [--gap 0.15]
        [--runs target,bench] [--ceiling 40]

Redis is the test suite's ``redis-server``, started on loopback for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script, only ``benchmarks/`` is on the path: make the repository root importable
# (the test servers live there).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slimcache_redis import RedisStore

import slimcache.background
from slimcache import (
    CompressionResult,
    KeepMessages,
    MemoryStore,
    Message,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.bench.datasets import (
    BenchConversation,
    load_chitchat,
    request_lengths,
    select_conversations,
)
from slimcache.bench.summarizers import OfflineSummarizer
from tests.servers.redis_server import RedisServer, find_redis_server

TRIGGER, KEEP, CEILING = 20, 10, 40
TEMPLATE = "Summary of the earlier conversation:\n{summary}"


class FixedLatency:
    """The offline extractive summarizer, after ``latency`` seconds."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.inner = OfflineSummarizer()

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        await asyncio.sleep(self.latency)
        return self.inner(messages, context)


@dataclass
class Replay:
    """What one mode did on one store."""

    latencies: list[float] = field(default_factory=list)
    calls: int = 0
    input_tokens: int = 0
    over: int = 0
    wrong: int = 0
    stale: int = 0
    max_lag: int = 0
    drain_seconds: float = 0.0
    fresh: list[str] = field(default_factory=list)

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies)
        if len(ordered) == 1:
            return ordered[0]
        return statistics.quantiles(ordered, n=100, method="inclusive")[round(share * 100) - 1]


def compressor(
    summarizer: FixedLatency, store: Store, mode: str, ceiling: int
) -> SummarizeCompressor:
    background: dict[str, Any] = (
        {"refresh": "background", "ceiling": MessageThreshold(ceiling)}
        if mode == "background"
        else {}
    )
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(TRIGGER),
        keep=KeepMessages(KEEP),
        summarizer_id=f"fixed-latency-{summarizer.latency:g}",
        **background,
    )


def check(
    history: Sequence[Message], result: CompressionResult, replay: Replay, ceiling: int
) -> None:
    """Count an answer over the ceiling, or one that is not exactly what it reports."""
    pinned = 0
    while pinned < len(history) and history[pinned].get("role") == "system":
        pinned += 1
    if result.summary_range is None:
        expected = [dict(m) for m in history]
    else:
        end = result.summary_range[1]
        summary = {"role": "system", "content": TEMPLATE.format(summary=result.summary)}
        expected = [*map(dict, history[:pinned]), summary, *map(dict, history[end + 1 :])]
    replay.over += len(result.messages) > ceiling
    replay.wrong += result.messages != expected
    if result.outcome == "stale":
        replay.stale += 1
        replay.max_lag = max(replay.max_lag, result.stale_messages)


async def replay_one(
    conversation: BenchConversation,
    lengths: Sequence[int],
    summarizer: FixedLatency,
    store: Store,
    mode: str,
    thread: str,
    gap: float,
    ceiling: int,
    replay: Replay,
    made: list[SummarizeCompressor],
) -> None:
    """One conversation's requests in order, ``gap`` seconds after each answer."""
    for length in lengths:
        history = conversation.messages[:length]
        one = compressor(summarizer, store, mode, ceiling)
        made.append(one)
        started = time.perf_counter()
        result = await one.compress_detailed(history, thread_id=thread)
        replay.latencies.append(time.perf_counter() - started)
        check(history, result, replay, ceiling)
        await asyncio.sleep(gap)


async def replay_mode(
    conversations: Sequence[tuple[BenchConversation, list[int]]],
    latency: float,
    store: Store,
    mode: str,
    gap: float,
    ceiling: int,
) -> Replay:
    """Replay every conversation at once in ``mode``; drain; ask each again."""
    replay = Replay()
    summarizer = FixedLatency(latency)
    run = uuid.uuid4().hex[:8]
    threads = [f"{mode}-{run}-{n}" for n in range(len(conversations))]
    made: list[SummarizeCompressor] = []
    await asyncio.gather(
        *(
            replay_one(c, lengths, summarizer, store, mode, thread, gap, ceiling, replay, made)
            for (c, lengths), thread in zip(conversations, threads, strict=True)
        )
    )
    started = time.perf_counter()
    assert await slimcache.background.drain(600)
    replay.drain_seconds = time.perf_counter() - started
    for one in made:
        replay.calls += one.stats.summarizer_calls
        replay.input_tokens += one.stats.summarizer_input_tokens
    for (conversation, lengths), thread in zip(conversations, threads, strict=True):
        history = conversation.messages[: lengths[-1]]
        outcomes = []
        for _ in range(3):  # a stale answer offers one more refresh: drain it, ask again
            last = compressor(summarizer, store, mode, ceiling)
            outcomes.append((await last.compress_detailed(history, thread_id=thread)).outcome)
            assert await slimcache.background.drain(600)
            if outcomes[-1] != "stale":
                break
        replay.fresh.append(">".join(outcomes))
    return replay


@asynccontextmanager
async def opened(name: str, server: RedisServer | None) -> AsyncIterator[Store]:
    if name == "memory":
        yield MemoryStore()
        return
    assert server is not None
    store = RedisStore.from_url(server.url, prefix=f"bench:refresh:{uuid.uuid4().hex[:8]}:")
    try:
        yield store
    finally:
        await store.aclose()


def show(title: str, rows: list[tuple[str, str, Replay]]) -> None:
    print(title)
    print(
        f"{'store':<8}{'mode':<12}{'requests':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
        f"{'max ms':>9}{'calls':>7}{'in tokens':>11}{'stale':>7}{'lag':>5}{'over':>6}"
        f"{'wrong':>7}{'drain s':>9}  fresh"
    )
    for store, mode, r in rows:
        fresh = ",".join(sorted(set(r.fresh)))
        print(
            f"{store:<8}{mode:<12}{len(r.latencies):>9}{r.percentile(0.5) * 1000:>9.1f}"
            f"{r.percentile(0.95) * 1000:>9.1f}{r.percentile(0.99) * 1000:>9.1f}"
            f"{max(r.latencies) * 1000:>9.1f}{r.calls:>7}{r.input_tokens:>11,}{r.stale:>7}"
            f"{r.max_lag:>5}{r.over:>6}{r.wrong:>7}{r.drain_seconds:>9.2f}  {fresh}"
        )
    print()


def pick(count: int, requests: int, seed: int) -> list[tuple[BenchConversation, list[int]]]:
    """``count`` chitchat conversations with at least ``requests`` requests, cut to that."""
    dataset = load_chitchat()
    long_enough = [c for c in dataset.conversations if len(request_lengths(c.messages)) >= requests]
    chosen = select_conversations(long_enough, count=count, seed=seed)
    return [(c, request_lengths(c.messages)[:requests]) for c in chosen]


async def rows_for(
    conversations: Sequence[tuple[BenchConversation, list[int]]],
    latency: float,
    gap: float,
    ceiling: int,
    stores: Sequence[str],
    server: RedisServer | None,
) -> list[tuple[str, str, Replay]]:
    """Both modes on each store."""
    rows = []
    for name in stores:
        async with opened(name, server) as store:
            for mode in ("inline", "background"):
                replay = await replay_mode(conversations, latency, store, mode, gap, ceiling)
                rows.append((name, mode, replay))
    return rows


async def main(args: argparse.Namespace) -> None:
    server: RedisServer | None = None
    scratch = Path(tempfile.mkdtemp(prefix="slimcache-refresh-"))
    if "redis" in args.stores:
        server = RedisServer(find_redis_server(), scratch)
        server.start()
    try:
        if "target" in args.runs:
            target = pick(1, args.requests, seed=0)
            show(
                f"target: 1 conversation, {args.requests} requests 0.15 s apart, summarizer "
                f"0.6 s, MessageThreshold({TRIGGER}) / KeepMessages({KEEP}), ceiling "
                f"MessageThreshold({CEILING})",
                await rows_for(target, 0.6, 0.15, CEILING, args.stores, server),
            )
        if "bench" in args.runs:
            chosen = pick(args.conversations, args.requests, seed=1)
            for latency in args.latencies:
                show(
                    f"bench: {len(chosen)} conversations at once, {args.requests} requests each "
                    f"{args.gap:g} s apart, summarizer {latency:g} s, ceiling "
                    f"MessageThreshold({args.ceiling})",
                    await rows_for(chosen, latency, args.gap, args.ceiling, args.stores, server),
                )
    finally:
        if server is not None:
            server.stop(save=False)
        shutil.rmtree(scratch, ignore_errors=True)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="memory,redis", help="memory and/or redis")
    parser.add_argument("--latencies", default="0.5,2", help="summarizer seconds, for bench")
    parser.add_argument("--conversations", type=int, default=4, help="conversations, for bench")
    parser.add_argument("--requests", type=int, default=70, help="requests per conversation")
    parser.add_argument("--gap", type=float, default=0.15, help="seconds between requests")
    parser.add_argument("--runs", default="target,bench", help="target and/or bench")
    parser.add_argument("--ceiling", type=int, default=CEILING, help="messages, for bench")
    args = parser.parse_args(argv)
    args.stores = args.stores.split(",")
    args.latencies = [float(x) for x in args.latencies.split(",")]
    args.runs = args.runs.split(",")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
