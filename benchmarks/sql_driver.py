"""The SQL store at driver speed: its GET and a cache hit beside the raw driver's SELECT.

For SQLite (aiosqlite) and PostgreSQL (asyncpg, on the test suite's embedded server), this
times, side by side in one run:

- ``raw``: the driver itself on a connection kept open, running the very SELECT the store runs
  (the row's expiry checked by the database's clock): aiosqlite's ``execute_fetchall`` (one
  trip to the connection's thread), asyncpg's ``fetchval`` (prepared once, by asyncpg's
  statement cache);
- ``raw cursor`` (SQLite only): aiosqlite's cursor idiom, ``async with db.execute(...) as
  cursor: await cursor.fetchone()``: three trips to the thread, for reference;
- ``raw timed`` (PostgreSQL only): ``raw`` on a connection with asyncpg's ``command_timeout``
  set as ``SQLStore.from_url`` sets it (asyncpg then arms a timer per statement);
- ``sqlalchemy``: the same SELECT through SQLAlchemy's asyncio API as most code writes it,
  ``async with engine.connect() as conn: await conn.execute(...)`` (a pool checkout, the
  statement, the reset on return), for reference;
- ``store.get``: ``SQLStore.get`` of a thread's index;
- ``hit``: ``SummarizeCompressor.compress`` of a thread already compressed (one store read, no
  summarizer call), built as ``benchmarks/hit_latency.py`` builds it (200 plain messages by
  default);
- ``raw hit``: the same hit on a store whose ``get`` is the ``raw`` call itself (it claims
  the same time bound as the SQL store, so the compressor sets no timer of its own either):
  what a hit costs with an adapter that costs nothing, the floor for ``hit``;
- ``memory hit``: the same hit on the memory store: the hit's own work, with no I/O at all.

Every contender reads the same value (the thread's index, about 5,000 characters). Each round
runs ``--ops / --rounds`` calls of each contender in a row, in an order that flips every round,
so drift in the machine's speed hits them alike; medians in microseconds, and each median over
the raw driver's. The project's targets: ``store.get`` at most 1.5x the raw driver, a hit at
most 2x.

A second table splits hits (as many again, on each store and on the memory store) into the
time before the compressor's store read, the read itself, and the time after it. With
``--profile``, a cProfile of 2,000 ``store.get`` calls on each store follows (top entries by own
time: the call counts show the round trips and thread hand-offs a read makes).

Usage::

    uv run python benchmarks/sql_driver.py [--ops N] [--rounds R] [--stores sqlite,postgres]
        [--messages N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script, only ``benchmarks/`` is on the path: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiosqlite
import asyncpg
from slimcache_sql import SQLStore
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from benchmarks.hit_latency import Thread, build_thread, compressor
from slimcache import MemoryStore, SummarizeCompressor
from tests.servers.postgres_server import PostgresServer

STORES = ("sqlite", "postgres")
WARMUP_OPS = 50
PROFILE_CALLS = 2000
PROFILED = 12
GET_TARGET = 1.5
HIT_TARGET = 2.0

# The store's own SELECT, as its dialect compiles it, on a table of the same shape.
SELECTS = {
    "sqlite": (
        "SELECT value FROM {table} WHERE key = ? AND (expires_at IS NULL OR expires_at > "
        "((julianday('now') - 2440587.5) * 86400.0))"
    ),
    "postgres": (
        "SELECT value FROM {table} WHERE key = $1::VARCHAR AND (expires_at IS NULL OR "
        "expires_at > CAST(EXTRACT(EPOCH FROM statement_timestamp()) AS DOUBLE PRECISION))"
    ),
}
# The same SELECT with a named parameter, for SQLAlchemy's text().
NAMED = {
    "sqlite": SELECTS["sqlite"].replace("key = ?", "key = :key"),
    "postgres": SELECTS["postgres"].replace("$1::VARCHAR", ":key"),
}

Call = Callable[[], Awaitable[Any]]


@dataclass
class Contenders:
    """The calls timed on one store, by name, each reading the thread's index."""

    calls: dict[str, Call]
    expected: str
    # The compressors of "hit" and "memory hit", with their stores and thread.
    hitting: dict[str, tuple[SummarizeCompressor, Any]]
    thread: Thread

    async def time(self, name: str, count: int, samples: list[int]) -> None:
        """Time ``count`` calls of contender ``name``, checking what each read."""
        call = self.calls[name]
        for _ in range(count):
            start = time.perf_counter_ns()
            got = await call()
            samples.append(time.perf_counter_ns() - start)
            if name not in self.hitting and got != self.expected:
                raise RuntimeError(f"{name} read back {got!r:.40}, not the index")


async def _hitting(
    store: Any, thread: Thread, where: str, *, filled: bool = False
) -> SummarizeCompressor:
    """A compressor on ``store`` (holding ``thread``, or ``filled`` with it already) whose
    next call is a hit."""
    if not filled:
        for key, value in thread.entries.items():
            await store.set(key, value)
    hitting = compressor(store)
    result = await hitting.compress_detailed(thread.history, thread_id=thread.thread_id)
    if result.outcome != "hit" or result.summarizer_calls:
        raise RuntimeError(f"{where}: expected a cache hit, got {result.outcome!r}")
    return hitting


def _check_only_reads(hitting: SummarizeCompressor, where: str) -> None:
    stats = hitting.stats
    got = (stats.store_reads, stats.store_writes, stats.summarizer_calls)
    if got != (stats.cache_hits, 0, 0):
        raise RuntimeError(
            f"{where}: {stats.cache_hits} hits should be as many reads and nothing else; "
            f"(reads, writes, summarizer calls) = {got}"
        )


class RawStore:
    """A store whose ``get`` is a raw driver call: only for timing hits (they only read)."""

    def __init__(self, read: Call, key: str, timeout: float) -> None:
        self._read = read
        self._key = key
        self.call_timeout = timeout  # as the SQL store states it

    async def get(self, key: str) -> str | None:
        if key != self._key:
            raise KeyError(key)  # a hit reads the thread's index, and nothing else
        value: str | None = await self._read()
        return value

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        raise NotImplementedError("a hit writes nothing")

    async def delete(self, key: str) -> None:
        raise NotImplementedError("a hit deletes nothing")


@asynccontextmanager
async def contenders(name: str, url: str, thread: Thread) -> AsyncIterator[Contenders]:
    """The store of ``url``, its raw driver and SQLAlchemy's asyncio API, on one table."""
    async with AsyncExitStack() as stack:
        table = f"bench_sql_{uuid.uuid4().hex[:12]}"
        store = SQLStore.from_url(url, table=table)
        stack.push_async_callback(store.aclose)
        hitting = await _hitting(store, thread, name)
        memory = MemoryStore()
        memory_hitting = await _hitting(memory, thread, "memory")
        key = thread.index_key
        select = SELECTS[name].format(table=table)
        engine = create_async_engine(url)
        stack.push_async_callback(engine.dispose)
        named = text(NAMED[name].format(table=table))

        async def through_sqlalchemy() -> Any:
            async with engine.connect() as conn:
                return (await conn.execute(named, {"key": key})).scalar_one_or_none()

        calls: dict[str, Call] = {}
        if name == "sqlite":
            path = url.removeprefix("sqlite+aiosqlite:///")
            db = await aiosqlite.connect(path)
            stack.push_async_callback(db.close)
            for pragma in ("busy_timeout = 2500", "journal_mode = WAL", "synchronous = NORMAL"):
                await db.execute(f"PRAGMA {pragma}")

            async def raw() -> Any:
                rows = list(await db.execute_fetchall(select, (key,)))
                return rows[0][0] if rows else None

            async def raw_cursor() -> Any:
                async with db.execute(select, (key,)) as cursor:
                    row = await cursor.fetchone()
                return row[0] if row else None

            calls = {"raw": raw, "raw cursor": raw_cursor}
        else:
            conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
            stack.push_async_callback(conn.close)

            # The store's connections have asyncpg's command_timeout (from_url sets half the
            # store's timeout): asyncpg then arms a timer for every statement.
            timed_conn = await asyncpg.connect(
                url.replace("postgresql+asyncpg", "postgresql"), command_timeout=store.timeout / 2
            )
            stack.push_async_callback(timed_conn.close)

            async def raw() -> Any:
                return await conn.fetchval(select, key)

            async def raw_timed() -> Any:
                return await timed_conn.fetchval(select, key)

            calls = {"raw": raw, "raw timed": raw_timed}
        raw_store = RawStore(calls["raw"], key, store.timeout)
        raw_hitting = await _hitting(raw_store, thread, f"raw {name}", filled=True)
        calls["sqlalchemy"] = through_sqlalchemy
        calls["store.get"] = lambda: store.get(key)
        calls["hit"] = lambda: hitting.compress(thread.history, thread_id=thread.thread_id)
        calls["raw hit"] = lambda: raw_hitting.compress(thread.history, thread_id=thread.thread_id)
        calls["memory hit"] = lambda: memory_hitting.compress(
            thread.history, thread_id=thread.thread_id
        )
        hits = {
            "hit": (hitting, store),
            "raw hit": (raw_hitting, raw_store),
            "memory hit": (memory_hitting, memory),
        }
        yield Contenders(calls, thread.index_value, hits, thread)
        for where, (checked, _) in hits.items():
            _check_only_reads(checked, f"{name} {where}")


Split = tuple[float, float, float]


async def split_hits(hitting: SummarizeCompressor, store: Any, thread: Thread, calls: int) -> Split:
    """Median microseconds of a hit before its store read, in the read, and after it."""
    marks: list[int] = []
    read = store.get

    async def timed_read(key: str) -> str | None:
        marks.append(time.perf_counter_ns())
        try:
            value: str | None = await read(key)
            return value
        finally:
            marks.append(time.perf_counter_ns())

    store.get = timed_read  # the compressor looks the method up on every call
    parts: tuple[list[int], list[int], list[int]] = ([], [], [])
    try:
        for _ in range(calls):
            marks.clear()
            start = time.perf_counter_ns()
            await hitting.compress(thread.history, thread_id=thread.thread_id)
            end = time.perf_counter_ns()
            parts[0].append(marks[0] - start)
            parts[1].append(marks[1] - marks[0])
            parts[2].append(end - marks[1])
    finally:
        del store.get
    before, during, after = (statistics.median(part) / 1000 for part in parts)
    return before, during, after


async def profile_gets(read: Call, calls: int) -> str:
    """cProfile's top entries by own time over ``calls`` reads."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        await read()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(PROFILED)
    body = out.getvalue()
    return body[body.index("   ncalls") :].rstrip()


async def bench(
    name: str, url: str, thread: Thread, *, ops: int, rounds: int, profile: bool
) -> tuple[dict[str, float], dict[str, Split], str]:
    """Median microseconds of every contender on store ``name``, and of the parts of a hit,
    and with ``profile`` a profile of its ``store.get``."""
    per_round = max(1, ops // rounds)
    async with contenders(name, url, thread) as timed:
        names = list(timed.calls)
        for contender in names:  # warm-up: connections, caches, first-call costs
            await timed.time(contender, WARMUP_OPS, [])
        samples: dict[str, list[int]] = {contender: [] for contender in names}
        for round_ in range(rounds):
            for contender in names if round_ % 2 == 0 else names[::-1]:
                await timed.time(contender, per_round, samples[contender])
        splits = {
            contender: await split_hits(hitting, store, timed.thread, per_round * rounds)
            for contender, (hitting, store) in timed.hitting.items()
        }
        profiled = await profile_gets(timed.calls["store.get"], PROFILE_CALLS) if profile else ""
    medians = {contender: statistics.median(taken) / 1000 for contender, taken in samples.items()}
    return medians, splits, profiled


def render_splits(splits: dict[str, dict[str, Split]]) -> str:
    """Where a hit's time goes: before its store read, in it, after it."""
    header = (
        f"{'store':<10}{'hit on':<13}{'before read':>13}{'read':>9}{'after read':>12}{'total':>9}"
    )
    lines = [header, "-" * len(header)]
    for store, parts in splits.items():
        for contender, (before, during, after) in parts.items():
            on = {"hit": store, "raw hit": f"raw {store}", "memory hit": "memory"}[contender]
            lines.append(
                f"{store:<10}{on:<13}{before:>13.1f}{during:>9.1f}{after:>12.1f}"
                f"{before + during + after:>9.1f}"
            )
    return "\n".join(lines)


def render(results: dict[str, dict[str, float]]) -> str:
    """The medians, each over the raw driver's, with the targets."""
    targets = {"store.get": GET_TARGET, "hit": HIT_TARGET}
    header = f"{'store':<10}{'contender':<13}{'median us':>11}{'x raw':>9}   target"
    lines = [header, "-" * len(header)]
    for store, medians in results.items():
        raw = medians["raw"]
        for contender, median in medians.items():
            target = targets.get(contender)
            verdict = ""
            if target is not None:
                verdict = f"   <= {target:.1f}x: {'met' if median / raw <= target else 'MISSED'}"
            lines.append(f"{store:<10}{contender:<13}{median:>11.1f}{median / raw:>8.2f}x{verdict}")
    return "\n".join(lines)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=2000, help="calls per contender (2000)")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (20)")
    parser.add_argument("--messages", type=int, default=200, help="history length (200)")
    parser.add_argument("--profile", action="store_true", help="profile store.get too")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated subset of sqlite,postgres"
    )
    args = parser.parse_args(argv)
    args.stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(args.stores) - set(STORES))
    if unknown:
        parser.error(f"unknown store(s) {', '.join(unknown)}; choose from sqlite, postgres")
    if args.ops < 1 or args.rounds < 1 or args.rounds > args.ops or args.messages < 4:
        parser.error("need --ops >= --rounds >= 1 and --messages >= 4")
    return args


Results = tuple[dict[str, dict[str, float]], dict[str, dict[str, Split]], dict[str, str]]


async def _run(args: argparse.Namespace) -> Results:
    thread = await build_thread(args.messages)
    results: dict[str, dict[str, float]] = {}
    splits: dict[str, dict[str, Split]] = {}
    profiles: dict[str, str] = {}
    options = {"ops": args.ops, "rounds": args.rounds, "profile": args.profile}
    with tempfile.TemporaryDirectory(prefix="slimcache-sql-driver-") as scratch:
        for name in args.stores:
            print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
            if name == "sqlite":
                url = f"sqlite+aiosqlite:///{Path(scratch) / 'bench.db'}"
                results[name], splits[name], profiles[name] = await bench(
                    name, url, thread, **options
                )
                continue
            server = PostgresServer()
            try:
                await asyncio.to_thread(server.start)
                results[name], splits[name], profiles[name] = await bench(
                    name, server.url, thread, **options
                )
            finally:
                await asyncio.to_thread(server.close)
    return results, splits, profiles


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; return the exit status."""
    args = _parse_args(argv)
    results, splits, profiles = asyncio.run(_run(args))
    per_round = max(1, args.ops // args.rounds)
    print(
        f"{per_round * args.rounds} calls per contender in {args.rounds} interleaved rounds, "
        f"{args.messages}-message thread, Python {sys.version.split()[0]}"
    )
    print(render(results))
    print()
    print(f"inside a hit, medians of {per_round * args.rounds} more hits (us):")
    print(render_splits(splits))
    for store, profiled in profiles.items():
        if profiled:
            print(f"\n--- cProfile of {PROFILE_CALLS:,} store.get calls on {store} ---")
            print(profiled)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
