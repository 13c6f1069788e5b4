"""What a cache hit costs: ``compress`` on a thread already compressed, next to one raw GET.

For every store (memory, redis, sqlite, postgres, s3) and for histories of 200 and 2,000 plain
messages, this times ``SummarizeCompressor.compress(history, thread_id=...)`` when the thread is
already compressed, so the call is one index read and no summarizer call, side by side with
one raw driver GET of a value of the same size as the thread's index, on the same server in
the same run:

- memory: a dict lookup (in a coroutine, awaited as a store call is);
- redis: ``redis.asyncio`` ``GET``;
- sqlite, postgres: a SQLAlchemy async engine running a text ``SELECT``;
- s3: boto3 ``get_object`` in ``asyncio.to_thread``.

The raw GETs are store_bench's raw drivers (``benchmarks/store_bench.py``), and the servers are
the test suite's. Each thread is built once by replaying its history request by request (every
user turn, the full history each time) with slimcache's default settings and the offline
extractive summarizer, so its index lists the checkpoints a real thread has; its entries are
then copied into every store. The compressors timed use the defaults too (``single_writer``
off, ``store_timeout`` 5 s). Before timing, one call on each store must be a hit; after timing,
the compressor's counters must show one store read per call, no write and no summarizer call.

For reference, the slimcache store's own ``get`` of the index key is timed as well (what the
adapter adds over the raw driver is store_bench's subject). Hits, store GETs and raw GETs
alternate within each round, in an order that flips every round, so drift in the machine's
speed hits them alike. ``cpu us/msg`` is (hit - raw GET) / messages: what the hit costs on top
of one raw read, per message of history.

A second table splits each store's hit into what grows with the history and what does not: the
cost per message is the difference between the hits at 2,000 and at 200 messages divided by the
1,800 messages between them, and the fixed cost is what is left of the 200-message hit over the
raw GET. The per-message target is judged on the first: the fixed part is paid once per call
whatever the history's length. Beside them, the time ``check_messages`` takes over the same
list right after each raw GET of that store returns: the same work everywhere, so it shows how
fast this machine runs Python once a wait on that store ends (the CPU left idle during an S3
GET's milliseconds runs the next microseconds of Python several times slower than in a loop).

Usage::

    uv run python benchmarks/hit_latency.py [--ops N] [--rounds R]
        [--stores memory,redis,sqlite,postgres,s3] [--fingerprint content|id] [--pad N]
        [--parsed] [--unseen] [--counter approx|words] [--alternate]
        [--placement pinned|same|apart|os] [--no-profile]

``--fingerprint id`` gives every message a string ``id`` and builds the compressors with
``fingerprint="id"``, so a hit hashes the ids instead of the messages' text. ``--pad N`` adds
``N`` characters of text to every message (the default turns are about 80 characters long).

By default every hit is given the very list the thread was built from, as a process holding
the conversation would. ``--parsed`` gives each hit a copy of its own, parsed from JSON right
before the call (untimed), as a stateless server parsing each request's body would: equal
strings, not the same objects. ``--unseen`` empties the table of what the process hashed
(``slimcache/core/fingerprints.py``) and keeps it empty, so every hit hashes the covered
text, as the first request a worker sees for a thread does.

``--counter words`` gives the compressors a token counter that runs a regular expression over
each text, as a real tokenizer does (the default, ``approx_tokens``, divides a length by four).

By default each round times a run of hits, then a run of store GETs, then a run of raw GETs (50
each with the default options), so each runs after calls of its own kind. ``--alternate`` makes
them take turns call by call instead, so each runs after the others, as the calls of a server
that does other work between them do.

Where the processes run moves the Redis figures more than anything else: on loopback a GET is
mostly the two processes waking each other, which takes longer across two CPUs than on one. By
default (``--placement pinned``, on Linux) Redis is timed twice, with this process and every
thread of the server pinned to one CPU (``redis same``), then to a CPU each (``redis apart``),
which steadies the raw GET (on one CPU it repeats within a few percent; on two virtual CPUs it
still has two speeds, from one run to another); ``--placement same|apart`` times one of them,
and ``--placement os`` leaves both to the scheduler, which gives either, or moves the processes
between CPUs, from one run to the next.

Every run also times a hit with the default settings on the memory store, at its start and at
its end, as a reference for how fast the machine runs at the time.

Prints medians in microseconds, the targets the project tracks next to the measured figures,
and a cProfile top 10 (by own time) of the 200-message hit on the memory store, whose own
overhead inflates the absolute times; the ranking is what it is for.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# Run as a script, only ``benchmarks/`` is on the path: make the repository root importable
# (store_bench and the test servers live there).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slimcache_redis import RedisStore
from slimcache_s3 import S3Store
from slimcache_sql import SQLStore

from benchmarks.store_bench import contenders, running_servers
from slimcache import (
    MemoryStore,
    Message,
    Store,
    SummarizeCompressor,
    SummaryContext,
    TokenCounter,
    approx_tokens,
)
from slimcache.bench.summarizers import OfflineSummarizer
from slimcache.core.fingerprints import MAX_CHARS, MAX_ENTRIES, hashed
from slimcache.messages import check_messages
from slimcache.stores.keys import ThreadKeys

STORES = ("memory", "redis", "sqlite", "postgres", "s3")
SIZES = (200, 2000)
SUMMARIZER_ID = "hit-latency-offline"
WARMUP_OPS = 20
PROFILE_CALLS = 300
REFERENCE_CALLS = 500
HIT_TARGET_RATIO = 2.0
PER_MESSAGE_TARGET_US = 1.0

Reader = Callable[[str], Awaitable["str | None"]]
Fingerprint = Literal["content", "id"]


# -- the threads --------------------------------------------------------------------------------


def plain_history(count: int, *, with_ids: bool = False, pad: int = 0) -> list[dict[str, Any]]:
    """A system prompt, then alternating user/assistant messages of plain text; ends on a user.

    With ``with_ids``, every message has a string ``id``; ``pad`` characters of text are added
    to every turn.
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    filler = ("More details follow here. " * (pad // 26 + 1))[:pad]
    for i in range(count - 1):
        role = "user" if i % 2 == 0 else "assistant"
        words = " ".join(f"word{j}" for j in range(4 + i % 11))
        text = f"Message {i}: {words}. Anything else?"
        messages.append({"role": role, "content": f"{text} {filler}" if pad else text})
    if with_ids:
        for i, message in enumerate(messages):
            message["id"] = f"msg_{i:06d}"
    return messages


class DictStore:
    """A plain dict behind the store protocol: the thread is built here, then copied."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.data.get(key)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self.data[key] = value

    async def delete(self, key: str) -> None:
        self.data.pop(key, None)


_offline = OfflineSummarizer()


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    """The offline extractive summarizer, called in line (no worker thread)."""
    return _offline(messages, context)


_WORD = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> int:
    """A token counter that runs a regular expression over the text, as tokenizers do."""
    return len(_WORD.findall(text))


COUNTERS: dict[str, TokenCounter] = {"approx": approx_tokens, "words": words}


def compressor(
    store: Store, fingerprint: Fingerprint = "content", counter: str = "approx"
) -> SummarizeCompressor:
    """A compressor with the defaults, recording the same summarizer id everywhere."""
    return SummarizeCompressor(
        summarize,
        store,
        summarizer_id=SUMMARIZER_ID,
        fingerprint=fingerprint,
        token_counter=COUNTERS[counter],
    )


@dataclass(frozen=True)
class Thread:
    """A compressed thread: its history, id, and every entry the store holds for it."""

    history: list[dict[str, Any]]
    thread_id: str
    entries: dict[str, str]
    fingerprint: Fingerprint
    counter: str

    @property
    def index_key(self) -> str:
        return ThreadKeys(self.thread_id).index

    @property
    def index_value(self) -> str:
        return self.entries[self.index_key]


async def build_thread(
    count: int, fingerprint: Fingerprint = "content", pad: int = 0, counter: str = "approx"
) -> Thread:
    """Replay ``count`` messages request by request, as a chat server would, on a dict."""
    history = plain_history(count, with_ids=fingerprint == "id", pad=pad)
    thread_id = f"hit-latency-{count}"
    store = DictStore()
    building = compressor(store, fingerprint, counter)
    for length in range(2, count + 1):
        if history[length - 1]["role"] == "user":
            await building.compress(history[:length], thread_id=thread_id)
    return Thread(history, thread_id, dict(store.data), fingerprint, counter)


# -- the contenders -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """The slimcache store of one server, and a raw driver GET on the same server."""

    store: Store
    raw_set: Callable[[str, str], Awaitable[None]]
    raw_get: Reader


@asynccontextmanager
async def memory_pair() -> AsyncIterator[Pair]:
    data: dict[str, str] = {}

    async def raw_set(key: str, value: str) -> None:
        data[key] = value

    async def raw_get(key: str) -> str | None:
        return data.get(key)

    store = MemoryStore()
    try:
        yield Pair(store, raw_set, raw_get)
    finally:
        await store.aclose()


def _adapter(name: str, servers: dict[str, Any], bucket: str | None) -> Store:
    tag = uuid.uuid4().hex[:12]
    if name == "redis":
        return RedisStore.from_url(servers["redis"].url, prefix=f"bench:hit:{tag}:")
    if name == "sqlite":
        url = f"sqlite+aiosqlite:///{servers['scratch'] / 'bench.db'}"
        return SQLStore.from_url(url, table=f"bench_hit_{tag}")
    if name == "postgres":
        return SQLStore.from_url(servers["postgres"].url, table=f"bench_hit_{tag}")
    if name == "s3":
        server = servers["s3"]
        return S3Store.from_url(
            f"s3://{bucket}",
            endpoint_url=server.endpoint_url,
            region_name=server.region,
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
        )
    raise ValueError(f"unknown store {name!r}")


@asynccontextmanager
async def server_pair(name: str, servers: dict[str, Any]) -> AsyncIterator[Pair]:
    """The slimcache adapter, and store_bench's raw driver, on the server of ``name``."""
    bucket = await asyncio.to_thread(servers["s3"].create_bucket) if name == "s3" else None
    store = _adapter(name, servers, bucket)
    try:
        # store_bench's pair also opens an adapter of its own; only its raw side is used.
        async with contenders(name, servers) as (_, raw):
            yield Pair(store, raw.set, raw.get)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


def pair(name: str, servers: dict[str, Any]) -> AbstractAsyncContextManager[Pair]:
    """The async context manager giving the :class:`Pair` of store ``name``."""
    return memory_pair() if name == "memory" else server_pair(name, servers)


# -- where the processes run --------------------------------------------------------------------

# How the benchmark process and the Redis server share the machine's CPUs. On loopback, a GET's
# time is mostly the two processes waking each other: on one CPU the kernel switches from one to
# the other; on two, each wakes on its own CPU. Left to the scheduler, a run gets either, or
# processes moved between CPUs, so the raw GET (and every ratio to it) changes from run to run.
Placement = Literal["same", "apart", "os"]
PLACEMENTS: tuple[Placement, ...] = ("same", "apart", "os")


def placements_here() -> tuple[Placement, ...]:
    """The pinned placements this machine allows: Linux affinity, and two CPUs for "apart"."""
    if not hasattr(os, "sched_setaffinity"):
        return ()
    cpus = len(os.sched_getaffinity(0))
    return ("same", "apart") if cpus >= 2 else ("same",)


def _threads_of(pid: int) -> list[int]:
    """Every thread of process ``pid`` (a thread's affinity is its own)."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


@contextmanager
def placed(placement: Placement, server_pid: int | None) -> Iterator[None]:
    """Pin this thread and every thread of ``server_pid`` as ``placement`` says, then restore.

    "same": both on this process's first CPU; "apart": the server on its second; "os": as the
    scheduler places them (nothing pinned).
    """
    if placement == "os" or server_pid is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    theirs = {tid: os.sched_getaffinity(tid) for tid in _threads_of(server_pid)}
    cpus = sorted(mine)
    server_cpu = cpus[0] if placement == "same" else cpus[1]
    try:
        try:
            for tid in theirs:
                os.sched_setaffinity(tid, {server_cpu})
            os.sched_setaffinity(0, {cpus[0]})
        except OSError as exc:
            raise RuntimeError(f"could not pin the processes ({exc}); try --placement os") from exc
        yield
    finally:
        os.sched_setaffinity(0, mine)
        for tid, cpus_before in theirs.items():
            with suppress(OSError):  # the thread has ended
                os.sched_setaffinity(tid, cpus_before)


def server_pid(name: str, servers: dict[str, Any]) -> int | None:
    """The pid of the single server process of store ``name``, if it has one to pin."""
    return int(servers["redis"].pid) if name == "redis" else None


# -- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """Medians of one store and history size, in microseconds."""

    store: str
    messages: int
    index_chars: int
    hit_us: float
    store_get_us: float
    raw_us: float
    check_after_get_us: float
    placement: Placement = "os"

    @property
    def label(self) -> str:
        """The store, and where its server ran when this run pinned it."""
        return self.store if self.placement == "os" else f"{self.store} {self.placement}"

    @property
    def ratio(self) -> float:
        return self.hit_us / self.raw_us

    @property
    def cpu_per_message_us(self) -> float:
        return (self.hit_us - self.raw_us) / self.messages


async def _timed_hits(
    hitting: SummarizeCompressor, thread: Thread, calls: int, samples: list[int], parsed: bool
) -> None:
    text = json.dumps(thread.history) if parsed else ""
    for _ in range(calls):
        # A server parses the request's body right before it compresses: untimed here.
        history = json.loads(text) if parsed else thread.history
        start = time.perf_counter_ns()
        await hitting.compress(history, thread_id=thread.thread_id)
        samples.append(time.perf_counter_ns() - start)


async def _timed_gets(
    read: Reader, key: str, expected: str, calls: int, samples: list[int]
) -> None:
    for _ in range(calls):
        start = time.perf_counter_ns()
        got = await read(key)
        samples.append(time.perf_counter_ns() - start)
        if got != expected:
            raise RuntimeError(f"GET of {key!r} read back {got!r:.40}")


async def _check_is_hit(hitting: SummarizeCompressor, thread: Thread, store: str) -> None:
    result = await hitting.compress_detailed(thread.history, thread_id=thread.thread_id)
    if result.outcome != "hit" or result.summarizer_calls:
        raise RuntimeError(f"{store}: expected a cache hit, got {result.outcome!r}")


def _check_counters(hitting: SummarizeCompressor, calls: int, store: str) -> None:
    stats = hitting.stats
    got = (stats.cache_hits, stats.store_reads, stats.store_writes, stats.summarizer_calls)
    if got != (calls, calls, 0, 0):
        raise RuntimeError(
            f"{store}: {calls} hits should be {calls} reads and nothing else; counters "
            f"(hits, reads, writes, summarizer calls) = {got}"
        )


CONTENDERS = ("hit", "store.get", "raw")


@dataclass(frozen=True)
class Subject:
    """One thread on one store, and the three ways of timing a read of it."""

    thread: Thread
    hitting: SummarizeCompressor
    pair: Pair
    raw_key: str
    parsed: bool

    async def time(self, what: str, calls: int, samples: list[int]) -> None:
        """Time ``calls`` hits, store GETs of the index, or raw GETs of its copy."""
        value = self.thread.index_value
        if what == "hit":
            await _timed_hits(self.hitting, self.thread, calls, samples, self.parsed)
        elif what == "store.get":
            await _timed_gets(self.pair.store.get, self.thread.index_key, value, calls, samples)
        else:
            await _timed_gets(self.pair.raw_get, self.raw_key, value, calls, samples)


async def _checks_after_gets(subject: Subject, calls: int) -> float:
    """Median time of checking the thread's history right after each raw GET returns.

    The same work, the same list every time: what differs between stores is what the machine
    did while the GET waited (a CPU left idle for the milliseconds of an S3 GET runs the next
    tens of microseconds of Python slower).
    """
    history, counter = subject.thread.history, COUNTERS[subject.thread.counter]
    samples: list[int] = []
    for _ in range(calls):
        await subject.pair.raw_get(subject.raw_key)
        start = time.perf_counter_ns()
        check_messages(history, counter)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


async def bench_store(
    name: str,
    servers: dict[str, Any],
    threads: list[Thread],
    *,
    ops: int,
    rounds: int,
    parsed: bool = False,
    alternate: bool = False,
    placement: Placement = "os",
) -> list[Row]:
    """Time hits, the store's own GET and raw GETs of one store, in interleaved rounds.

    ``placement`` is only recorded in the rows: the caller pins the processes (:func:`placed`).
    """
    per_round = max(1, ops // rounds)
    rows: list[Row] = []
    async with pair(name, servers) as contender:
        subjects: list[Subject] = []
        for thread in threads:
            for key, value in thread.entries.items():
                await contender.store.set(key, value)
            raw_key = f"raw-index-{len(thread.history)}-{uuid.uuid4().hex[:8]}"
            await contender.raw_set(raw_key, thread.index_value)
            hitting = compressor(contender.store, thread.fingerprint, thread.counter)
            subject = Subject(thread, hitting, contender, raw_key, parsed)
            await _check_is_hit(subject.hitting, thread, name)
            for what in CONTENDERS:  # warm-up: connections, caches, first-call costs
                await subject.time(what, WARMUP_OPS, [])
            subject.hitting.reset_stats()
            subjects.append(subject)
        samples = [{what: list[int]() for what in CONTENDERS} for _ in subjects]
        for round_ in range(rounds):
            order = CONTENDERS if round_ % 2 == 0 else CONTENDERS[::-1]
            for subject, taken in zip(subjects, samples, strict=True):
                if alternate:  # one call of each in turn, per_round times
                    for _ in range(per_round):
                        for what in order:
                            await subject.time(what, 1, taken[what])
                else:  # per_round calls of each in a row
                    for what in order:
                        await subject.time(what, per_round, taken[what])
        for subject, taken in zip(subjects, samples, strict=True):
            _check_counters(subject.hitting, per_round * rounds, name)
            median = {what: statistics.median(taken[what]) / 1000 for what in CONTENDERS}
            rows.append(
                Row(
                    store=name,
                    messages=len(subject.thread.history),
                    index_chars=len(subject.thread.index_value),
                    hit_us=median["hit"],
                    store_get_us=median["store.get"],
                    raw_us=median["raw"],
                    check_after_get_us=await _checks_after_gets(subject, per_round * rounds),
                    placement=placement,
                )
            )
    return rows


async def memory_hitting(thread: Thread) -> tuple[MemoryStore, SummarizeCompressor]:
    """A memory store holding ``thread``'s entries, and a compressor whose next call is a hit."""
    store = MemoryStore()
    for key, value in thread.entries.items():
        await store.set(key, value)
    hitting = compressor(store, thread.fingerprint, thread.counter)
    await _check_is_hit(hitting, thread, "memory")
    return store, hitting


async def profile_memory_hit(thread: Thread, calls: int) -> str:
    """cProfile's top 10 by own time over ``calls`` hits on the memory store."""
    store, hitting = await memory_hitting(thread)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        await hitting.compress(thread.history, thread_id=thread.thread_id)
    profiler.disable()
    await store.aclose()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(10)
    body = out.getvalue()
    return body[body.index("   ncalls") :].rstrip()


# -- report -------------------------------------------------------------------------------------


def render(rows: list[Row]) -> str:
    """The comparison as a plain-text table."""
    header = (
        f"{'store':<13}{'messages':>9}{'index chars':>13}{'hit median us':>15}"
        f"{'raw GET median us':>19}{'ratio':>10}{'cpu us/msg':>12}{'store.get us':>14}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row.label:<13}{row.messages:>9,}{row.index_chars:>13,}{row.hit_us:>15.1f}"
            f"{row.raw_us:>19.1f}{row.ratio:>9.2f}x{row.cpu_per_message_us:>12.3f}"
            f"{row.store_get_us:>14.1f}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Cost:
    """A store's hit cost split into a part per message and a part per call, in microseconds."""

    store: str
    per_message_us: float  # (hit at the larger size - hit at the smaller) / the messages between
    fixed_us: float  # hit at the smaller size - raw GET - its messages x per_message_us
    checks_after_get_us: tuple[float, ...]  # checking each size's history right after a GET


def costs(rows: list[Row]) -> list[Cost]:
    """Split each store's hits into per-message and fixed costs (needs two history sizes)."""
    found: list[Cost] = []
    for store in dict.fromkeys(row.label for row in rows):
        mine = sorted((row for row in rows if row.label == store), key=lambda row: row.messages)
        if len(mine) < 2:
            continue
        small, large = mine[0], mine[-1]
        per_message = (large.hit_us - small.hit_us) / (large.messages - small.messages)
        fixed = small.hit_us - small.raw_us - small.messages * per_message
        found.append(Cost(store, per_message, fixed, tuple(row.check_after_get_us for row in mine)))
    return found


def render_costs(found: list[Cost], sizes: Sequence[int]) -> str:
    """The per-message and fixed costs as a plain-text table."""
    checks = " / ".join(f"{size:,}" for size in sizes)
    header = (
        f"{'store':<13}{'per message us':>16}{'fixed us':>10}"
        f"   check_messages right after a raw GET, {checks} messages (us)"
    )
    lines = [header, "-" * len(header)]
    for cost in found:
        after = " / ".join(f"{us:.1f}" for us in cost.checks_after_get_us)
        lines.append(
            f"{cost.store:<13}{cost.per_message_us:>16.3f}{cost.fixed_us:>10.1f}   {after}"
        )
    return "\n".join(lines)


def targets(rows: list[Row], found: list[Cost]) -> list[str]:
    """The targets the project tracks, each next to what this run measured."""
    lines: list[str] = []
    for row in rows:
        if row.store == "redis" and row.messages == SIZES[0]:
            verdict = "met" if row.ratio <= HIT_TARGET_RATIO else "NOT met"
            where = {
                "same": " (both processes on one CPU)",
                "apart": " (each process on a CPU of its own)",
                "os": "",
            }[row.placement]
            lines.append(
                f"200-message hit on redis{where}: {row.ratio:.2f}x one raw Redis GET "
                f"(target: at most {HIT_TARGET_RATIO:g}x): {verdict}"
            )
    for cost in found:
        verdict = "met" if cost.per_message_us < PER_MESSAGE_TARGET_US else "NOT met"
        lines.append(
            f"per-message cost, {cost.store}: {cost.per_message_us:.3f} us "
            f"(target: under {PER_MESSAGE_TARGET_US:g} us): {verdict}"
        )
    return lines


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--ops", type=int, default=500, help="hits and raw GETs per store and size (default 500)"
    )
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated subset of " + ",".join(STORES)
    )
    parser.add_argument(
        "--fingerprint",
        choices=("content", "id"),
        default="content",
        help="the compressors' fingerprint setting (id: every message has an id)",
    )
    parser.add_argument(
        "--pad", type=int, default=0, help="characters of text added to every message (default 0)"
    )
    parser.add_argument(
        "--counter",
        choices=tuple(COUNTERS),
        default="approx",
        help="the token counter: approx_tokens, or words (a regular expression, as tokenizers run)",
    )
    parser.add_argument(
        "--parsed", action="store_true", help="each hit gets its own copy, parsed from JSON"
    )
    parser.add_argument(
        "--unseen", action="store_true", help="every hit hashes: no table of what was hashed"
    )
    parser.add_argument(
        "--alternate",
        action="store_true",
        help="hit, store.get and raw GET take turns call by call, not in runs of a round's calls",
    )
    parser.add_argument(
        "--placement",
        choices=("pinned", *PLACEMENTS),
        default="pinned",
        help="where the Redis server runs beside this process: pinned (default: 'same' and "
        "'apart' in turn, where the machine allows), same (one CPU), apart (a CPU each), os "
        "(left to the scheduler)",
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile table")
    args = parser.parse_args(argv)
    here = placements_here()
    if args.placement == "pinned":
        args.placements = here or ("os",)
    elif args.placement != "os" and args.placement not in here:
        parser.error(f"--placement {args.placement} needs Linux CPU affinity (and two CPUs)")
    else:
        args.placements = (args.placement,)
    chosen = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(STORES))
    if unknown:
        parser.error(f"unknown store(s) {', '.join(unknown)}; choose from {', '.join(STORES)}")
    if args.ops < 1 or args.rounds < 1 or args.pad < 0:
        parser.error("--ops and --rounds must be positive, --pad not negative")
    if args.rounds > args.ops:
        parser.error("--rounds must not exceed --ops")
    args.stores = chosen
    return args


async def reference_hit_us(reference: Thread, calls: int = REFERENCE_CALLS) -> float:
    """Median of a hit with the default settings on the memory store (200 messages).

    Timed at the start and at the end of every run, whatever its options: how fast the machine
    runs Python at the time, so that runs with different options can be told apart from a
    machine that has slowed down or sped up in between.
    """
    store, hitting = await memory_hitting(reference)
    samples: list[int] = []
    await _timed_hits(hitting, reference, calls, samples, parsed=False)
    await store.aclose()
    return statistics.median(samples) / 1000


async def _run(args: argparse.Namespace) -> tuple[list[Row], str | None, tuple[float, float]]:
    print("building the threads ...", file=sys.stderr, flush=True)
    reference = await build_thread(SIZES[0])
    threads = [
        await build_thread(count, args.fingerprint, args.pad, args.counter) for count in SIZES
    ]
    before = await reference_hit_us(reference)
    if args.unseen:  # a table that keeps nothing: every fingerprint is hashed
        hashed.limit(max_chars=0, max_entries=0)
    rows: list[Row] = []
    with running_servers(set(args.stores)) as servers:
        for name in args.stores:
            pid = server_pid(name, servers)
            placements: tuple[Placement, ...] = args.placements if pid is not None else ("os",)
            for placement in placements:
                print(f"benchmarking {name} ({placement}) ...", file=sys.stderr, flush=True)
                with placed(placement, pid):
                    rows += await bench_store(
                        name,
                        servers,
                        threads,
                        ops=args.ops,
                        rounds=args.rounds,
                        parsed=args.parsed,
                        alternate=args.alternate,
                        placement=placement,
                    )
    if args.unseen:
        hashed.limit(max_chars=MAX_CHARS, max_entries=MAX_ENTRIES)
        reference = await build_thread(SIZES[0])  # hashed again, as by the default run
    after = await reference_hit_us(reference)
    profile = None if args.no_profile else await profile_memory_hit(threads[0], PROFILE_CALLS)
    return rows, profile, (before, after)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures; return the exit status."""
    args = _parse_args(argv)
    rows, profile, (before, after) = asyncio.run(_run(args))
    per_size = max(1, args.ops // args.rounds) * args.rounds
    print(
        f"cache hit of compress() vs one raw GET of the index's size: {per_size} of each per "
        f"store and size, {args.rounds} interleaved rounds, fingerprint={args.fingerprint}, "
        f"pad={args.pad}, parsed={args.parsed}, unseen={args.unseen}, counter={args.counter}, "
        f"alternate={args.alternate}, redis placement={','.join(args.placements)}, "
        f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} "
        f"CPUs, Python {sys.version.split()[0]}"
    )
    print(render(rows))
    print(
        "ratio = hit / raw GET; cpu us/msg = (hit - raw GET) / messages; store.get us = the "
        "slimcache store's own get of the index, for reference; redis same = this process and "
        "the server pinned to one CPU, redis apart = to a CPU each"
    )
    found = costs(rows)
    if found:
        print()
        print(render_costs(found, sorted({row.messages for row in rows})))
        print(
            f"per message = (hit at {SIZES[-1]:,} - hit at {SIZES[0]:,}) / {SIZES[-1] - SIZES[0]:,}"
            f"; fixed = hit at {SIZES[0]:,} - raw GET - {SIZES[0]:,} x per message; the same "
            "check of the same list, timed right after each raw GET, shows how fast this machine "
            "runs Python once a wait on that store ends"
        )
    print(
        f"reference: a default 200-message hit on the memory store took {before:.1f} us at the "
        f"start of this run and {after:.1f} us at its end"
    )
    print()
    if args.alternate:
        print("with --alternate; the project judges its targets on runs without it")
    print("\n".join(targets(rows, found)))
    if profile is not None:
        print()
        print(
            f"--- cProfile, {PROFILE_CALLS} hits of {SIZES[0]} messages on the memory store: "
            "top 10 by own time ---"
        )
        print(profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
