"""Store overhead benchmark: each slimcache adapter against its raw driver, on real servers.

Starts the same servers the test suite uses (redis-server, PostgreSQL, moto's S3 server, and
a SQLite file), then for every store measures ``set`` and ``get`` of one value, one operation at
a time, twice: through the slimcache adapter, and with the raw driver doing the same operation
against the same server in the same run:

- redis: ``redis.asyncio`` ``SET`` / ``GET``;
- sqlite, postgres: a SQLAlchemy async engine running the same upsert / select as text SQL
  (SQLite connections get the same pragmas the adapter sets, so only the adapter differs);
- s3: boto3 ``put_object`` / ``get_object`` in ``asyncio.to_thread``.

The work is split into rounds and the adapter and the raw driver alternate within each round
(in an order that flips every round), so drift in the machine's speed hits both alike.

Usage::

    uv run python benchmarks/store_bench.py [--ops N] [--rounds R] [--value-size B]
        [--stores redis,sqlite,postgres,s3] [--json OUT]

Prints median and p99 latency in microseconds, sequential throughput in operations per second,
and the adapter/raw ratio of each (above 1 for latency means the adapter is slower).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The server helpers live with the tests; make the repository root importable when this file
# is run as a script (``python benchmarks/store_bench.py`` puts only ``benchmarks/`` on the path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio
from slimcache_redis import RedisStore
from slimcache_s3 import S3Store
from slimcache_sql import SQLStore
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from slimcache import Store
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_server import RedisServer, find_redis_server
from tests.servers.s3_server import S3Server

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STORES = ("redis", "sqlite", "postgres", "s3")
OPERATIONS = ("set", "get")
WARMUP_OPS = 20

Writer = Callable[[str, str], Awaitable[None]]
Reader = Callable[[str], Awaitable["str | None"]]


@dataclass(frozen=True)
class Contender:
    """One way of doing ``set`` and ``get`` against a store's server."""

    set: Writer
    get: Reader


@dataclass(frozen=True)
class Figures:
    """Latency and throughput of one operation by one contender."""

    store: str
    impl: str
    op: str
    ops: int
    median_us: float
    p99_us: float
    ops_per_s: float


# -- servers ------------------------------------------------------------------------------------


@contextmanager
def running_servers(names: set[str]) -> Iterator[dict[str, Any]]:
    """Start the servers ``names`` needs; stop them and delete their data on exit."""
    with ExitStack() as stack:
        servers: dict[str, Any] = {}
        scratch = Path(tempfile.mkdtemp(prefix="slimcache-bench-"))
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        servers["scratch"] = scratch
        if "redis" in names:
            redis_dir = scratch / "redis"
            redis_dir.mkdir()
            redis_server = RedisServer(find_redis_server(), redis_dir)
            stack.callback(redis_server.stop, save=False)
            redis_server.start()
            servers["redis"] = redis_server
        if "postgres" in names:
            postgres_server = PostgresServer()
            stack.callback(postgres_server.close)
            postgres_server.start()
            servers["postgres"] = postgres_server
        if "s3" in names:
            s3_dir = scratch / "s3"
            s3_dir.mkdir()
            s3_server = S3Server(s3_dir)
            stack.callback(s3_server.stop)
            s3_server.start()
            servers["s3"] = s3_server
        yield servers


# -- contenders ---------------------------------------------------------------------------------


def _store_contender(store: Store) -> Contender:
    return Contender(set=store.set, get=store.get)


@asynccontextmanager
async def redis_pair(server: RedisServer) -> AsyncIterator[tuple[Contender, Contender]]:
    """The Redis adapter and a raw ``redis.asyncio`` client on the same server."""
    store = RedisStore.from_url(server.url, prefix=f"bench:adapter:{uuid.uuid4().hex}:")
    client = redis.asyncio.Redis.from_url(server.url)
    prefix = f"bench:raw:{uuid.uuid4().hex}:"

    async def raw_set(key: str, value: str) -> None:
        await client.set(prefix + key, value.encode())

    async def raw_get(key: str) -> str | None:
        data = await client.get(prefix + key)
        return data.decode() if isinstance(data, bytes) else data

    try:
        yield _store_contender(store), Contender(set=raw_set, get=raw_get)
    finally:
        await store.aclose()
        await client.aclose()


def _sqlite_pragmas(engine: AsyncEngine) -> None:
    # The same connection set-up the SQLite adapter does, so the comparison isolates the adapter.
    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA busy_timeout = 30000")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    event.listen(engine.sync_engine, "connect", on_connect)


@asynccontextmanager
async def sql_pair(url: str) -> AsyncIterator[tuple[Contender, Contender]]:
    """The SQL adapter and a raw SQLAlchemy engine running the same upsert and select."""
    store = SQLStore.from_url(url, table=f"bench_adapter_{uuid.uuid4().hex[:12]}")
    engine = create_async_engine(url)
    if engine.dialect.name == "sqlite":
        _sqlite_pragmas(engine)
    table = f"bench_raw_{uuid.uuid4().hex[:12]}"
    float_type = "DOUBLE PRECISION" if engine.dialect.name == "postgresql" else "DOUBLE"
    async with engine.begin() as conn:
        await conn.execute(
            text(
                f"CREATE TABLE {table} (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                f"expires_at {float_type})"
            )
        )
    upsert = text(
        f"INSERT INTO {table} (key, value, expires_at) VALUES (:key, :value, :expires_at) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
    )
    select = text(
        f"SELECT value FROM {table} WHERE key = :key AND (expires_at IS NULL OR expires_at > :now)"
    )

    async def raw_set(key: str, value: str) -> None:
        async with engine.begin() as conn:
            await conn.execute(upsert, {"key": key, "value": value, "expires_at": None})

    async def raw_get(key: str) -> str | None:
        async with engine.connect() as conn:
            result = await conn.execute(select, {"key": key, "now": time.time()})
            value: str | None = result.scalar_one_or_none()
            return value

    try:
        yield _store_contender(store), Contender(set=raw_set, get=raw_get)
    finally:
        await store.aclose()
        await engine.dispose()


@asynccontextmanager
async def s3_pair(server: S3Server) -> AsyncIterator[tuple[Contender, Contender]]:
    """The S3 adapter and a raw boto3 client on the same server, each on its own bucket."""
    adapter_bucket, raw_bucket = await asyncio.gather(
        asyncio.to_thread(server.create_bucket), asyncio.to_thread(server.create_bucket)
    )
    store = S3Store.from_url(
        f"s3://{adapter_bucket}",
        endpoint_url=server.endpoint_url,
        region_name=server.region,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
    )
    client: S3Client = await asyncio.to_thread(server.client)

    def put(key: str, value: str) -> None:
        client.put_object(Bucket=raw_bucket, Key=key, Body=value.encode())

    def fetch(key: str) -> str:
        response = client.get_object(Bucket=raw_bucket, Key=key)
        data: bytes = response["Body"].read()
        return data.decode()

    async def raw_set(key: str, value: str) -> None:
        await asyncio.to_thread(put, key, value)

    async def raw_get(key: str) -> str | None:
        return await asyncio.to_thread(fetch, key)

    try:
        yield _store_contender(store), Contender(set=raw_set, get=raw_get)
    finally:
        await store.aclose()
        await asyncio.to_thread(client.close)


def contenders(
    name: str, servers: dict[str, Any]
) -> AbstractAsyncContextManager[tuple[Contender, Contender]]:
    """Return the (adapter, raw) context manager for store ``name``."""
    if name == "redis":
        return redis_pair(servers["redis"])
    if name == "sqlite":
        return sql_pair(f"sqlite+aiosqlite:///{servers['scratch'] / 'bench.db'}")
    if name == "postgres":
        return sql_pair(servers["postgres"].url)
    if name == "s3":
        return s3_pair(servers["s3"])
    raise ValueError(f"unknown store {name!r}")


# -- measuring ----------------------------------------------------------------------------------


async def _timed_writes(write: Writer, keys: list[str], value: str) -> list[int]:
    latencies: list[int] = []
    for key in keys:
        start = time.perf_counter_ns()
        await write(key, value)
        latencies.append(time.perf_counter_ns() - start)
    return latencies


async def _timed_reads(read: Reader, keys: list[str], value: str) -> list[int]:
    """Time each read, and check it returned what was written (a benchmark of misses is moot)."""
    latencies: list[int] = []
    for key in keys:
        start = time.perf_counter_ns()
        got = await read(key)
        latencies.append(time.perf_counter_ns() - start)
        if got != value:
            raise RuntimeError(f"read back {got!r:.40} for key {key!r}, expected the value written")
    return latencies


def _figures(store: str, impl: str, op: str, latencies: list[int]) -> Figures:
    micros = sorted(n / 1000 for n in latencies)
    if len(micros) > 1:
        p99 = statistics.quantiles(micros, n=100, method="inclusive")[98]
    else:
        p99 = micros[0]
    return Figures(
        store=store,
        impl=impl,
        op=op,
        ops=len(micros),
        median_us=statistics.median(micros),
        p99_us=p99,
        ops_per_s=len(micros) / (sum(micros) / 1e6),
    )


async def bench_store(
    name: str, servers: dict[str, Any], *, ops: int, rounds: int, value: str
) -> list[Figures]:
    """Measure ``set`` then ``get`` for the adapter and the raw driver of one store."""
    per_round = max(1, ops // rounds)
    async with contenders(name, servers) as (adapter, raw):
        pair = {"adapter": adapter, "raw": raw}
        samples: dict[tuple[str, str], list[int]] = {
            (impl, op): [] for impl in pair for op in OPERATIONS
        }
        # Warm-up: open pooled connections, create tables lazily, fill caches.
        for contender in pair.values():
            warm = [f"warm-{i}" for i in range(WARMUP_OPS)]
            await _timed_writes(contender.set, warm, value)
            await _timed_reads(contender.get, warm, value)
        for round_ in range(rounds):
            keys = [f"key-{round_}-{i}" for i in range(per_round)]
            order = ["adapter", "raw"] if round_ % 2 == 0 else ["raw", "adapter"]
            for impl in order:
                samples[(impl, "set")] += await _timed_writes(pair[impl].set, keys, value)
            for impl in order:
                samples[(impl, "get")] += await _timed_reads(pair[impl].get, keys, value)
        return [_figures(name, impl, op, samples[(impl, op)]) for op in OPERATIONS for impl in pair]


# -- report -------------------------------------------------------------------------------------


def ratios(figures: list[Figures]) -> list[dict[str, Any]]:
    """Pair each adapter row with its raw row: the figures and adapter/raw ratios."""
    by_key = {(f.store, f.op, f.impl): f for f in figures}
    rows: list[dict[str, Any]] = []
    for f in figures:
        if f.impl != "adapter":
            continue
        raw = by_key[(f.store, f.op, "raw")]
        rows.append(
            {
                "store": f.store,
                "op": f.op,
                "adapter": asdict(f),
                "raw": asdict(raw),
                "median_ratio": f.median_us / raw.median_us,
                "p99_ratio": f.p99_us / raw.p99_us,
                "throughput_ratio": f.ops_per_s / raw.ops_per_s,
            }
        )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """Format the comparison as a plain-text table."""
    header = (
        f"{'store':<9}{'op':<5}"
        f"{'median us':>22}{'p99 us':>22}{'ops/s':>24}"
        f"{'median x':>10}{'p99 x':>8}{'ops/s x':>9}"
    )
    sub = f"{'':<14}" + f"{'adapter':>11}{'raw':>11}" * 2 + f"{'adapter':>12}{'raw':>12}"
    lines = [header, sub, "-" * len(header)]
    for row in rows:
        a, r = row["adapter"], row["raw"]
        lines.append(
            f"{row['store']:<9}{row['op']:<5}"
            f"{a['median_us']:>11.1f}{r['median_us']:>11.1f}"
            f"{a['p99_us']:>11.1f}{r['p99_us']:>11.1f}"
            f"{a['ops_per_s']:>12.0f}{r['ops_per_s']:>12.0f}"
            f"{row['median_ratio']:>10.2f}{row['p99_ratio']:>8.2f}{row['throughput_ratio']:>9.2f}"
        )
    return "\n".join(lines)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=2000, help="operations per op and contender")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument("--value-size", type=int, default=1024, help="value length in characters")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated subset of " + ",".join(STORES)
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(STORES))
    if unknown:
        parser.error(f"unknown store(s) {', '.join(unknown)}; choose from {', '.join(STORES)}")
    if args.ops < 1 or args.rounds < 1 or args.value_size < 1:
        parser.error("--ops, --rounds and --value-size must be positive")
    if args.rounds > args.ops:
        parser.error("--rounds must not exceed --ops")
    args.stores = chosen
    return args


async def _run(args: argparse.Namespace) -> list[Figures]:
    value = ("summary text \u00e9 " * (args.value_size // 15 + 1))[: args.value_size]
    figures: list[Figures] = []
    with running_servers(set(args.stores)) as servers:
        for name in args.stores:
            print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
            figures += await bench_store(
                name, servers, ops=args.ops, rounds=args.rounds, value=value
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; return the exit status."""
    args = _parse_args(argv)
    figures = asyncio.run(_run(args))
    rows = ratios(figures)
    per_op = max(1, args.ops // args.rounds) * args.rounds
    print(
        f"{per_op} sequential operations per op and contender, {args.rounds} interleaved "
        f"rounds, {args.value_size}-character values, Python {sys.version.split()[0]}"
    )
    print(render(rows))
    print("x = adapter / raw (latency: above 1 is slower; ops/s: below 1 is slower)")
    if args.json is not None:
        document = {
            "ops": per_op,
            "rounds": args.rounds,
            "value_size": args.value_size,
            "python": sys.version.split()[0],
            "results": rows,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
