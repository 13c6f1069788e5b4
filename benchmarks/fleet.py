"""A fleet of stateless workers on one shared store: CPU per request, and duplicate summaries.

``N`` worker processes (default 4) each replay the same ``T`` threads (default 1,000) turn by
turn, as stateless chat servers behind a load balancer would if every request went to all of
them: request ``k`` of a thread carries its history up to and including the ``k``-th user
message (24 turns: histories of up to 48 messages, a system prompt and 47 turns). Every request
builds a new :class:`~slimcache.SummarizeCompressor` with the default settings on the
process's one store. Each process keeps ``--in-flight`` requests going at once (default 64):
that many lanes, each replaying one thread's turns in order, then the next thread.

The conversations are real ones: the chitchat dataset's conversations of at least 48 messages
(885 of them, reused round-robin past that count; ``--data synthetic`` for generated turns).
The summarizer takes ``--delay`` seconds (default 50 ms, a sleep) and appends one line per call
to a log shared by every process (``O_APPEND``, one ``write`` per line), so the parent counts
the calls of the whole fleet and the duplicates: the same thread and range summarized twice.

Printed, for the timed run only (the processes load the data and connect first, then start
together):

- requests/s of the fleet, and per worker;
- worker CPU per request: the workers' CPU time (user + system, ``os.times``) / requests;
- server CPU per request, where the server is local (``/proc/<pid>/stat`` of every server
  process: the one the benchmark starts, or ``--server-pid``);
- summarizer calls, duplicate summarizations, requests that failed (by exception type, with
  the longest time a failed request took), and served summaries that did not cover exactly
  the range they claimed for their own thread (``stale``);
- ``lost``: after the run, the parent asks for every thread's last request again with a fresh
  compressor: it must be served (or extended) from a range reaching at least as far as the
  longest one any worker was served from the store, or the store lost a summary.

Usage::

    uv run python benchmarks/fleet.py [--workers 4] [--threads 1000] [--turns 24]
        [--in-flight 64] [--delay 0.05] [--store URL [--server-pid PID ...]]
        [--cluster [--replicas 1 --kill-primary-after SECONDS]] [--data chitchat|synthetic]
        [--hiredis on|off] [--profile OUT] [--refresh inline|background [--ceiling 40]]
        [--pause-every SECONDS [--pause-for 6]]

Without ``--store`` it starts a ``redis-server`` of its own (the test suite's, on loopback);
``--cluster`` starts the test suite's three-primary Redis Cluster instead, with ``--replicas``
replicas per primary. ``--kill-primary-after S`` kills (SIGKILL) the primary of the first slot
range ``S`` seconds into the run, so a replica takes over. ``--profile OUT`` writes a cProfile
(of CPU time) of the first worker to ``OUT``. ``--hiredis off`` hides hiredis from the workers,
so that redis-py parses replies in Python, as without the ``slimcache[redis]`` extra's parser.
``--refresh background`` builds the compressors with ``refresh="background"`` and
``ceiling=MessageThreshold(--ceiling)``; each worker drains its background refreshes before
it reports (their work is in its CPU time), so duplicates, stale and lost summaries are
counted for that mode as for inline. ``--pause-every S`` stops the server (SIGSTOP: the one it
started, or every ``--server-pid``) for ``--pause-for`` seconds (default 6) in every ``S``
seconds of the timed run: the calls in flight reach their bound, and those queued run once it
resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import itertools
import logging
import multiprocessing
import os
import queue
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# --hiredis off: redis-py must not find its C parser (read before redis is imported, in every
# worker, which imports this module again).
if os.environ.get(_NO_HIREDIS := "SLIMCACHE_FLEET_NO_HIREDIS"):
    sys.modules["hiredis"] = None  # type: ignore[assignment]

# Run as a script, only ``benchmarks/`` is on the path: make the repository root importable
# (the test servers live there).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import slimcache.background
from slimcache import (
    Message,
    MessageThreshold,
    StoreError,
    SummarizeCompressor,
    SummaryContext,
    open_store,
)
from slimcache.core.tree import SEPARATOR
from slimcache.stores import SupportsClose
from tests.servers.redis_cluster import RedisClusterServers
from tests.servers.redis_server import RedisServer, find_redis_server

# Named, so that the parent (a script's __main__) and the workers (__mp_main__) agree.
SUMMARIZER_ID = "fleet"

# Seconds a worker waits for the others to be ready before giving up.
_READY_TIMEOUT = 300.0


# -- conversations ------------------------------------------------------------------------------


def conversations(kind: str, turns: int) -> list[list[dict[str, Any]]]:
    """Conversations of at least ``turns`` user turns: chitchat's, or generated ones."""
    needed = 2 * turns  # a system prompt, then user and assistant turns, ending with a user's
    if kind == "synthetic":
        return [_synthetic(index, needed) for index in range(100)]
    from slimcache.bench.datasets import load_chitchat

    found = [c.messages[:needed] for c in load_chitchat().conversations]
    return [messages for messages in found if len(messages) == needed]


def _synthetic(index: int, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(count - 1):
        role = "user" if i % 2 == 0 else "assistant"
        words = " ".join(f"w{index}-{i}-{j}" for j in range(i % 9 + 4))
        messages.append({"role": role, "content": f"turn {i}: {words}."})
    return messages


def request_lengths(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Lengths of a thread's requests: up to and including each user message."""
    return [i + 1 for i, m in enumerate(messages) if m["role"] == "user"]


# -- the summarizer -----------------------------------------------------------------------------


class LoggedSummarizer:
    """Sleeps ``delay`` seconds and answers; logs ``"<thread> <start>-<end>"`` per call.

    The summary names its thread and the ranges it was made from, ``"t7:1-11|12-23"``, so a
    request can check that what it was served covers exactly the range it claims.
    """

    def __init__(self, log: str, delay: float) -> None:
        self._fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._delay = delay

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        # One write of one line: appends from several processes never interleave.
        os.write(self._fd, f"{context.thread_id} {context.start}-{context.end}\n".encode())
        await asyncio.sleep(self._delay)
        step = f"{context.start}-{context.end}"
        if context.previous_summary is None:
            return f"{context.thread_id}:{step}"
        return f"{context.previous_summary}|{step}"


def covers(summary: str | None, thread: str, served: tuple[int, int] | None) -> bool:
    """Whether ``summary`` was made for ``thread`` from exactly the range ``served``.

    A ``tree`` summary is its parts' summaries joined by a blank line, each made for the thread
    (``"t7:1-23\n\nt7:24-35|36-47"``): together they must cover the range, in order.
    """
    if summary is None or served is None:
        return summary is None and served is None
    bounds: list[tuple[int, ...]] = []
    for part in summary.split(SEPARATOR):
        owner, _, steps = part.partition(":")
        if owner != thread:
            return False
        bounds += [tuple(int(n) for n in step.split("-")) for step in steps.split("|")]
    contiguous = all(a[1] + 1 == b[0] for a, b in itertools.pairwise(bounds))
    return contiguous and (bounds[0][0], bounds[-1][1]) == served


# -- one worker ---------------------------------------------------------------------------------


@dataclass
class Job:
    """What every worker process runs."""

    url: str
    namespace: str
    threads: int
    turns: int
    in_flight: int
    delay: float
    data: str
    log: str
    profile: str | None = None
    refresh: str = "inline"
    ceiling: int = 40


@dataclass
class WorkerReport:
    """What one worker did in the timed run."""

    requests: int = 0
    cpu_seconds: float = 0.0
    system_seconds: float = 0.0
    wall_seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    slowest_error: float = 0.0
    # Unix times of the first and the last failed request.
    failed_from: float = 0.0
    failed_until: float = 0.0
    stale: int = 0
    round_trips: int = 0
    lease_waits: int = 0
    # Per thread: the last message of the longest range a request was served from the store.
    cached_ends: dict[str, int] = field(default_factory=dict)
    logged: Counter[str] = field(default_factory=Counter)


class _Counted(logging.Handler):
    """Counts slimcache's log records by level, instead of printing them."""

    def __init__(self, counts: Counter[str]) -> None:
        super().__init__()
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.levelname.lower()] += 1


def _work(job: Job, worker: int, barrier: Any, reports: Any) -> None:
    """A worker process: load, connect, wait for the others, replay, report."""
    report = asyncio.run(_serve(job, worker, barrier))
    reports.put(report)


async def _serve(job: Job, worker: int, barrier: Any) -> WorkerReport:
    chats = conversations(job.data, job.turns)
    store = open_store(job.url)
    summarizer = LoggedSummarizer(job.log, job.delay)
    report = WorkerReport()
    log = logging.getLogger("slimcache")
    log.addHandler(_Counted(report.logged))
    log.propagate = False
    await store.get(f"{job.namespace}:warm-up")  # the connection is open before the clock
    barrier.wait(_READY_TIMEOUT)
    # Timed by CPU time, not wall time: a worker preempted in a send is not charged for it.
    profiler = cProfile.Profile(time.process_time) if job.profile and worker == 0 else None
    threads = iter(range(job.threads))

    async def lane() -> None:
        for thread in threads:
            messages = chats[thread % len(chats)]
            for length in request_lengths(messages)[: job.turns]:
                await _request(store, summarizer, job, f"t{thread}", messages[:length], report)

    if profiler is not None:
        profiler.enable()
    cpu, wall = os.times(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(job.in_flight)))
    await slimcache.background.drain()  # refresh="background": the work left behind counts
    after = os.times()
    report.wall_seconds = time.perf_counter() - wall
    report.cpu_seconds = (after.user - cpu.user) + (after.system - cpu.system)
    report.system_seconds = after.system - cpu.system
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(job.profile)  # type: ignore[arg-type]
    if isinstance(store, SupportsClose):
        await store.aclose()
    return report


async def _request(
    store: Any,
    summarizer: LoggedSummarizer,
    job: Job,
    thread: str,
    history: list[dict[str, Any]],
    report: WorkerReport,
) -> None:
    report.requests += 1
    started = time.perf_counter()
    try:
        background: dict[str, Any] = (
            {"refresh": "background", "ceiling": MessageThreshold(job.ceiling)}
            if job.refresh == "background"
            else {}
        )
        compressor = SummarizeCompressor(
            summarizer, store, namespace=job.namespace, summarizer_id=SUMMARIZER_ID, **background
        )
        try:
            result = await compressor.compress_detailed(history, thread_id=thread)
        finally:
            stats = compressor.stats
            report.round_trips += (
                stats.store_reads + stats.store_writes + stats.store_deletes + stats.store_batches
            )
            report.lease_waits += stats.lease_waits
    except StoreError as exc:
        report.errors[type(exc).__name__] += 1
        report.slowest_error = max(report.slowest_error, time.perf_counter() - started)
        report.failed_from = report.failed_from or time.time()
        report.failed_until = time.time()
        return
    except Exception as exc:  # counted as a failure of its own kind, never hidden
        report.errors[f"untyped {type(exc).__name__}: {exc}"] += 1
        return
    report.outcomes[result.outcome] += 1
    if result.outcome != "unchanged" and not covers(result.summary, thread, result.summary_range):
        report.stale += 1
    if result.cached and result.summary_range is not None:
        end = result.summary_range[1]
        report.cached_ends[thread] = max(end, report.cached_ends.get(thread, end))


# -- the fleet ----------------------------------------------------------------------------------


def server_cpu(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used, from ``/proc``; 0 for a
    process that is gone."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


@dataclass
class Servers:
    """The store to use, and what the benchmark may watch or break."""

    url: str
    pids: list[int]
    cluster: RedisClusterServers | None = None


@contextmanager
def servers(args: argparse.Namespace) -> Iterator[Servers]:
    """Start the Redis server or cluster the run uses, unless given a store URL."""
    if args.store:
        yield Servers(args.store, list(args.server_pid))
        return
    with ExitStack() as stack:
        scratch = Path(tempfile.mkdtemp(prefix="slimcache-fleet-"))
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        if args.cluster:
            cluster = RedisClusterServers(find_redis_server(), scratch, replicas=args.replicas)
            stack.callback(cluster.stop)
            cluster.start()
            yield Servers(cluster.url, [node.pid for node in cluster.all_nodes], cluster)
        else:
            server = RedisServer(find_redis_server(), scratch)
            stack.callback(server.stop, save=False)
            server.start()
            yield Servers(server.url, [server.pid])


def run_fleet(args: argparse.Namespace, where: Servers) -> None:
    """Run the workers, then print what they did."""
    namespace = f"fleet-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="slimcache-fleet-log-") as scratch:
        log = str(Path(scratch) / "calls.log")
        Path(log).touch()
        job = Job(
            where.url,
            namespace,
            args.threads,
            args.turns,
            args.in_flight,
            args.delay,
            args.data,
            log,
            args.profile,
            args.refresh,
            args.ceiling,
        )
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(args.workers + 1)
        reports = context.Queue()
        processes = [
            context.Process(target=_work, args=(job, worker, barrier, reports))
            for worker in range(args.workers)
        ]
        for process in processes:
            process.start()
        barrier.wait(_READY_TIMEOUT)
        server_before, wall = server_cpu(where.pids), time.perf_counter()
        args.started_at = time.time()
        killer = _kill_later(where, args.kill_primary_after)
        with _paused_now_and_then(where, args.pause_every, args.pause_for):
            done = _collect(reports, processes)
        wall = time.perf_counter() - wall
        server_used = server_cpu(where.pids) - server_before
        for process in processes:
            process.join()
        if killer is not None:
            killer.join()
        calls = Counter(Path(log).read_text().splitlines())
    cached_ends: dict[str, int] = {}
    for report in done:
        for thread, end in report.cached_ends.items():
            cached_ends[thread] = max(end, cached_ends.get(thread, end))
    lost = asyncio.run(_lost(job, cached_ends))
    _print(args, where, done, wall, server_used, calls, lost)


def _collect(reports: Any, processes: Sequence[Any]) -> list[WorkerReport]:
    """Every worker's report; a worker that died without one stops the run."""
    done: list[WorkerReport] = []
    while len(done) < len(processes):
        try:
            done.append(reports.get(timeout=1.0))
        except queue.Empty:
            dead = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            if dead:
                raise SystemExit(f"a worker died (exit codes {dead})") from None
    return done


def _kill_later(where: Servers, seconds: float | None) -> threading.Thread | None:
    """Kill the primary of the first slot range ``seconds`` into the run, in the background."""
    if seconds is None:
        return None
    cluster = where.cluster
    if cluster is None:
        raise SystemExit("--kill-primary-after needs --cluster")

    def kill() -> None:
        time.sleep(seconds)
        victim = cluster.primary_for_slot(0)
        print(f"killing the primary {victim.address} (pid {victim.pid}) at {seconds:g} s")
        victim.kill()

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@contextmanager
def _paused_now_and_then(where: Servers, every: float | None, length: float) -> Iterator[None]:
    """Stop the local server processes (SIGSTOP) for ``length`` seconds in every ``every``
    seconds while the block runs, the first stop ``every - length`` seconds in; let them go
    (SIGCONT) at each stop's end and when the block ends."""
    if every is None:
        yield
        return
    if not where.pids:
        raise SystemExit("--pause-every needs a local server: its own, or --server-pid")
    if not 0 < length < every:
        raise SystemExit("--pause-for must be more than 0 and less than --pause-every")
    done = threading.Event()
    stops = 0

    def signal_all(number: signal.Signals) -> None:
        for pid in where.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def pause() -> None:
        nonlocal stops
        while not done.wait(every - length):
            signal_all(signal.SIGSTOP)
            stops += 1
            try:
                done.wait(length)
            finally:
                signal_all(signal.SIGCONT)

    thread = threading.Thread(target=pause, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        signal_all(signal.SIGCONT)
        print(f"stopped the server {stops} times for {length:g} s, one in every {every:g} s")


class _FirstCalls:
    """A summarizer that answers at once and records where each thread's first call starts."""

    def __init__(self) -> None:
        self.starts: dict[str, int] = {}

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.starts.setdefault(str(context.thread_id), context.start)
        return f"{context.thread_id}:{context.start}-{context.end}"


async def _lost(job: Job, cached_ends: dict[str, int]) -> int:
    """Threads whose store no longer holds a range the fleet served from it.

    Every thread's last request is asked again with a fresh compressor: it must be served, or
    extended, from a range reaching at least as far as the longest one a worker was served
    (``cached_ends``). A summary a request made and could not store (the store failed) is not
    counted: the request failed with it.
    """
    chats = conversations(job.data, job.turns)
    store = open_store(job.url)
    summarizer = _FirstCalls()
    lost = 0
    for thread in range(job.threads):
        thread_id = f"t{thread}"
        messages = chats[thread % len(chats)]
        length = request_lengths(messages)[: job.turns][-1]
        compressor = SummarizeCompressor(
            summarizer, store, namespace=job.namespace, summarizer_id=SUMMARIZER_ID
        )
        result = await compressor.compress_detailed(messages[:length], thread_id=thread_id)
        served = cached_ends.get(thread_id)
        if served is None:
            continue
        if result.outcome == "hit" and result.summary_range is not None:
            reach = result.summary_range[1]
        else:
            reach = summarizer.starts.get(thread_id, 0) - 1
        lost += reach < served
    if isinstance(store, SupportsClose):
        await store.aclose()
    return lost


def _print(
    args: argparse.Namespace,
    where: Servers,
    done: Sequence[WorkerReport],
    wall: float,
    server_used: float,
    calls: Counter[str],
    lost: int,
) -> None:
    requests = sum(report.requests for report in done)
    cpu = sum(report.cpu_seconds for report in done)
    outcomes = sum((report.outcomes for report in done), Counter())
    errors = sum((report.errors for report in done), Counter())
    per_worker = [report.requests / report.wall_seconds for report in done]
    store = "Redis Cluster" if where.cluster else ("Redis" if not args.store else args.store)
    print(
        f"fleet: {args.workers} workers x {args.threads:,} threads x {args.turns} turns, "
        f"{args.in_flight} in flight per worker, summarizer {args.delay * 1000:g} ms, "
        f"{args.data} conversations, store {store}, refresh {args.refresh}"
        + (f" (ceiling MessageThreshold({args.ceiling}))" if args.refresh == "background" else "")
    )
    print(f"requests                 {requests:,} in {wall:.1f} s: {requests / wall:,.0f}/s")
    print(
        f"requests/s per worker    median {statistics.median(per_worker):,.0f} "
        f"({', '.join(f'{rate:,.0f}' for rate in per_worker)})"
    )
    system = sum(report.system_seconds for report in done)
    print(
        f"worker CPU per request   {cpu / requests * 1e6:,.0f} us "
        f"({system / requests * 1e6:,.0f} us of it in the kernel)"
    )
    server = f"{server_used / requests * 1e6:,.1f} us" if where.pids else "not local"
    print(f"server CPU per request   {server}")
    print(f"outcomes                 {dict(sorted(outcomes.items()))}")
    trips = sum(report.round_trips for report in done)
    waits = sum(report.lease_waits for report in done)
    print(f"store round trips        {trips / requests:.2f} per request; {waits:,} lease waits")
    print(f"summarizer calls         {sum(calls.values()):,}")
    print(f"duplicate summarizations {sum(n - 1 for n in calls.values())}")
    print(f"lost summaries           {lost}")
    print(f"stale summaries served   {sum(report.stale for report in done)}")
    slowest = max(report.slowest_error for report in done)
    failed = ", ".join(f"{name}: {n}" for name, n in errors.items()) or "none"
    print(f"failed requests          {failed}" + (f" (slowest {slowest:.2f} s)" if errors else ""))
    if errors:
        first = min(r.failed_from for r in done if r.failed_from) - args.started_at
        last = max(r.failed_until for r in done) - args.started_at
        print(f"                         from {first:.1f} s to {last:.1f} s into the run")
    logged = sum((report.logged for report in done), Counter())
    print(f"slimcache log records    {dict(sorted(logged.items())) or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--store", help="a store URL (default: a redis-server of its own)")
    parser.add_argument("--server-pid", type=int, action="append", default=[])
    parser.add_argument("--cluster", action="store_true", help="a Redis Cluster of its own")
    parser.add_argument("--replicas", type=int, default=0, help="replicas per cluster primary")
    parser.add_argument("--kill-primary-after", type=float, default=None)
    parser.add_argument("--data", choices=("chitchat", "synthetic"), default="chitchat")
    parser.add_argument("--profile", help="write a cProfile of the first worker here")
    parser.add_argument("--refresh", choices=("inline", "background"), default="inline")
    parser.add_argument("--ceiling", type=int, default=40, help="MessageThreshold of --refresh")
    parser.add_argument(
        "--hiredis", choices=("on", "off"), default="on", help="off: redis-py's Python parser"
    )
    parser.add_argument(
        "--pause-every",
        type=float,
        help="stop the server (SIGSTOP: its own, or every --server-pid) once in this many "
        "seconds of the run, for --pause-for seconds",
    )
    parser.add_argument("--pause-for", type=float, default=6.0, help="seconds of each stop")
    args = parser.parse_args()
    if args.hiredis == "off":
        os.environ[_NO_HIREDIS] = "1"
    with servers(args) as where:
        run_fleet(args, where)


if __name__ == "__main__":
    main()
