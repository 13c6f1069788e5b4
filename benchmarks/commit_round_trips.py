"""What a compression costs in store round trips and time, with and without ``batch``.

For every store (memory, redis, sqlite, postgres), this times ``SummarizeCompressor.compress``
on a thread with nothing cached yet (read the index, take the lease, read again, write the
range and the index, release the lease) with a summarizer that answers at once, so the time is
the store's and slimcache's alone. Each store is measured twice in the same run, alternating
in rounds: as it is (its ``batch`` runs the lease-and-read and the commit in one round trip
each) and wrapped to hide ``batch`` (every operation its own call). The round trips are the
compressor's own count (``stats.store_round_trips``), and every compression must have made
exactly one summarizer call and left no lease behind.

Usage::

    uv run python benchmarks/commit_round_trips.py [--ops N] [--rounds R]
        [--stores memory,redis,sqlite,postgres]

Prints, per store and mode, the round trips per compression and the median time in
microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.hit_latency import pair
from benchmarks.store_bench import running_servers
from slimcache import (
    KeepMessages,
    Message,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.stores import ThreadKeys
from tests.fakes import WithoutBatch

STORES = ("memory", "redis", "sqlite", "postgres")
MODES = ("batch", "one call each")


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    """Answers at once: only the store's time is measured."""
    return f"summary of {context.start}-{context.end}"


def history() -> list[dict[str, Any]]:
    """A system prompt and 30 turns: over a 20-message trigger, so the first request compresses."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for i in range(30):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"turn {i}: " + "some words " * (1 + i % 5)})
    return messages


async def compress_once(compressor: SummarizeCompressor, store: Store, run: str) -> tuple[int, int]:
    """One compression of a new thread: (nanoseconds, round trips)."""
    thread_id = f"commit-{run}-{uuid.uuid4().hex[:10]}"
    compressor.reset_stats()
    started = time.perf_counter_ns()
    result = await compressor.compress_detailed(history(), thread_id=thread_id)
    elapsed = time.perf_counter_ns() - started
    stats = compressor.stats
    if result.outcome != "summarized" or stats.summarizer_calls != 1 or not result.cached:
        raise RuntimeError(f"expected one cached summary, got {result.outcome!r}, {stats}")
    if await store.get(ThreadKeys(thread_id).lease) is not None:
        raise RuntimeError("the lease was left behind")
    return elapsed, stats.store_round_trips


async def bench_store(
    name: str, servers: dict[str, Any], *, ops: int, rounds: int
) -> list[tuple[str, str, int, float]]:
    """(store, mode, round trips, median microseconds) for both modes."""
    samples: dict[str, list[int]] = {mode: [] for mode in MODES}
    trips: dict[str, set[int]] = {mode: set() for mode in MODES}
    async with pair(name, servers) as contender:
        stores: dict[str, Any] = {
            "batch": contender.store,
            "one call each": WithoutBatch(contender.store),
        }
        compressors = {
            mode: SummarizeCompressor(
                summarize,
                stores[mode],
                trigger=MessageThreshold(20),
                keep=KeepMessages(10),
            )
            for mode in MODES
        }
        for mode in MODES:  # warm-up: connections, table creation, first-call costs
            for _ in range(5):
                await compress_once(compressors[mode], contender.store, "warm")
        per_round = max(1, ops // rounds)
        for round_ in range(rounds):
            order = MODES if round_ % 2 == 0 else MODES[::-1]
            for mode in order:
                for _ in range(per_round):
                    elapsed, round_trips = await compress_once(
                        compressors[mode], contender.store, str(round_)
                    )
                    samples[mode].append(elapsed)
                    trips[mode].add(round_trips)
    rows = []
    for mode in MODES:
        if len(trips[mode]) != 1:
            raise RuntimeError(f"{name} {mode}: round trips varied: {sorted(trips[mode])}")
        rows.append((name, mode, trips[mode].pop(), statistics.median(samples[mode]) / 1000))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=200, help="compressions per store and mode")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument("--stores", default=",".join(STORES), help="subset of " + ",".join(STORES))
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(STORES))
    if unknown or args.ops < 1 or not 1 <= args.rounds <= args.ops:
        parser.error(f"choose stores from {', '.join(STORES)}; 1 <= --rounds <= --ops")

    async def run() -> list[tuple[str, str, int, float]]:
        rows: list[tuple[str, str, int, float]] = []
        with running_servers(set(chosen)) as servers:
            for name in chosen:
                print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
                rows += await bench_store(name, servers, ops=args.ops, rounds=args.rounds)
        return rows

    rows = asyncio.run(run())
    per_mode = max(1, args.ops // args.rounds) * args.rounds
    print(
        f"one compression of a new thread (lease taken), {per_mode} per store and mode, "
        f"{args.rounds} interleaved rounds, Python {sys.version.split()[0]}"
    )
    header = f"{'store':<10}{'mode':<15}{'round trips':>12}{'median us':>12}"
    print(header)
    print("-" * len(header))
    for name, mode, round_trips, median in rows:
        print(f"{name:<10}{mode:<15}{round_trips:>12}{median:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
