"""A fleet under faults: workers killed and replaced (with wrong clocks), the server frozen and
restarted, and what it costs in duplicate summaries.

``--workers`` processes (default 3) keep ``--in-flight`` requests going each (default 8), as
``benchmarks/fleet.py`` does: a new :class:`~slimcache.SummarizeCompressor` per request, each
lane replaying one thread's turns in order, then the next thread, round the ``--threads``
threads again while the run lasts (``--duration`` seconds, default 45). Meanwhile, every
``--fault-every`` seconds on average (default 2) after the last one ended, one fault at random:

- ``kill``: a worker is killed (SIGKILL) and a replacement takes its place, whose wall clock
  is off by the next of ``--clock-offsets`` (seconds, taken in turn; ``time.time`` is shifted
  before slimcache is imported, as in ``tests/workers/clock_worker.py``). The replacement was
  started beforehand and has loaded its data and connected, so it starts work at once;
- ``freeze``: the server is stopped (SIGSTOP) for 1 to 6 s, then let go (longer than 5 s,
  a store call's default bound, fails the calls waiting on it);
- ``restart``: the server is shut down (its data kept) and started again.

The store is a ``redis-server`` or a PostgreSQL server the benchmark starts itself
(``--store redis|postgres``). Every worker appends one line per request and per summarizer
call to logs the parent reads afterwards, so a killed worker's requests count too.

Printed: the faults by kind, requests and outcomes, summarizer calls and duplicate
summarizations (the same thread and range summarized twice; per fault), leases taken over as
abandoned and holders that lost their lease, failed requests by exception type with the
slowest, stale summaries served and lost summaries (both as in ``benchmarks/fleet.py``).

Usage::

    uv run python benchmarks/fleet_faults.py --store redis|postgres [--clock-offsets 0]
        [--duration 45] [--workers 3] [--in-flight 8] [--fault-every 2] [--seed 0]
"""

from __future__ import annotations

import os
import time

# A replacement's wrong clock: shifted before anything reads time.time (slimcache's lease
# takes it as a default argument when imported).
_OFFSET = "SLIMCACHE_FLEET_CLOCK_OFFSET"
if _shift := float(os.environ.get(_OFFSET) or 0):
    _real_time = time.time
    time.time = lambda: _real_time() + _shift

import argparse  # noqa: E402
import asyncio  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fleet import (  # noqa: E402
    Job,
    LoggedSummarizer,
    WorkerReport,
    _lost,
    _request,
    conversations,
    request_lengths,
)
from slimcache import StoreError, open_store  # noqa: E402
from slimcache.stores import SupportsClose  # noqa: E402

# Seconds the workers get to stop once told to, before they are killed.
_STOP_TIMEOUT = 30.0


# -- one worker ---------------------------------------------------------------------------------


class _Noted(logging.Handler):
    """Appends a line for each lease taken over or lost, as slimcache logs them."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for marker, word in (("took over the abandoned lease", "takeover"), ("lost the", "lost")):
            if message.startswith(marker):
                os.write(self.fd, (json.dumps({"lease": word}) + "\n").encode())


async def _serve(job: Job, results: str, go: str | None) -> None:
    chats = conversations(job.data, job.turns)
    store = open_store(job.url)
    summarizer = LoggedSummarizer(job.log, job.delay)
    fd = os.open(results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    log = logging.getLogger("slimcache")
    log.addHandler(_Noted(fd))
    log.propagate = False
    threads = _threads(job.threads, f"{results}.at", job.in_flight)
    stop = asyncio.Event()  # set by SIGTERM: the run is over
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    while True:  # connected before it says it is ready, though the server be frozen
        try:
            await store.get(f"{job.namespace}:warm-up")
            break
        except StoreError:
            await asyncio.sleep(0.5)
    os.write(fd, b'{"ready": 1}\n')
    # A standby, started ahead so that booting is not part of the fault: it waits to be let go.
    if go is not None:
        await asyncio.to_thread(_wait_for, go)

    async def lane() -> None:
        for thread in threads:
            messages = chats[thread % len(chats)]
            for length in request_lengths(messages)[: job.turns]:
                if stop.is_set():
                    return
                report = WorkerReport()
                await _request(store, summarizer, job, f"t{thread}", messages[:length], report)
                os.write(fd, (json.dumps(_line(report)) + "\n").encode())

    await asyncio.gather(*(lane() for _ in range(job.in_flight)))
    if isinstance(store, SupportsClose):
        await store.aclose()


def _wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.05)


def _threads(count: int, position: str, lanes: int) -> Iterator[int]:
    """The threads a worker replays, in the fleet's order from where the fleet is.

    Every worker goes through the same threads in the same order, so that they meet at each
    thread's lease, as workers behind a load balancer do. A replacement joins the threads the
    others are on: each thread taken is written to ``position``, and the next worker starts
    ``lanes`` threads before the last one.
    """
    fd = os.open(position, os.O_RDWR | os.O_CREAT, 0o644)
    last = int(os.pread(fd, 16, 0) or -1)
    for number in itertools.count(max(0, last - lanes + 1)):
        os.pwrite(fd, f"{number:16d}".encode(), 0)
        yield number % count


def _line(report: WorkerReport) -> dict[str, Any]:
    """One request, as a line of the results log."""
    return {
        "outcomes": dict(report.outcomes),
        "errors": dict(report.errors),
        "slowest_error": report.slowest_error,
        "stale": report.stale,
        "lease_waits": report.lease_waits,
        "clock": _shift,
        "cached_ends": report.cached_ends,
    }


# -- the servers --------------------------------------------------------------------------------


@dataclass
class _Server:
    url: str
    freeze: Any
    thaw: Any
    stop: Any
    start: Any


@contextmanager
def _server(kind: str) -> Iterator[_Server]:
    # Imported here: a worker needs neither, and boots faster without SQLAlchemy.
    from tests.servers.postgres_server import PostgresServer
    from tests.servers.redis_server import RedisServer, find_redis_server

    scratch = Path(tempfile.mkdtemp(prefix="slimcache-faults-"))
    try:
        if kind == "redis":
            redis = RedisServer(find_redis_server(), scratch)
            redis.start()
            try:
                yield _Server(redis.url, redis.freeze, redis.thaw, redis.stop, redis.start)
            finally:
                redis.thaw()
                redis.stop(save=False)
        else:
            postgres = PostgresServer()
            postgres.start()
            try:
                yield _Server(
                    postgres.url, postgres.freeze, postgres.thaw, postgres.stop, postgres.start
                )
            finally:
                postgres.thaw()
                postgres.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- the fleet and its faults -------------------------------------------------------------------


class _Fleet:
    """The worker processes, and one standby to replace the next one killed.

    The standby boots (imports, loads the conversations, connects) while the others run, with
    the wall clock of the next of ``offsets``, and starts work when a worker is killed.
    """

    def __init__(self, job: Job, results: str, offsets: list[float], scratch: Path) -> None:
        self.job = job
        self.results = results
        self.offsets = itertools.cycle(offsets)
        self.scratch = scratch
        self.workers: list[subprocess.Popen[bytes]] = []
        self.standby: tuple[subprocess.Popen[bytes], Path] | None = None
        self.started = 0

    def _spawn(self, offset: float, go: Path | None) -> subprocess.Popen[bytes]:
        argv = [sys.executable, __file__, "--worker", json.dumps(asdict(self.job))]
        argv += ["--results", self.results]
        if go is not None:
            argv += ["--go", str(go)]
        self.started += 1
        return subprocess.Popen(argv, env={**os.environ, _OFFSET: repr(offset)})

    def start(self, workers: int) -> None:
        """Start ``workers`` workers with the right clock, and the first standby."""
        self.workers = [self._spawn(0.0, None) for _ in range(workers)]
        self._new_standby()

    def _new_standby(self) -> None:
        go = self.scratch / f"go-{self.started}"
        self.standby = (self._spawn(next(self.offsets), go), go)

    def replace(self, rng: random.Random) -> None:
        """Kill a worker at random (SIGKILL), let the standby go and boot the next one."""
        victim = self.workers.pop(rng.randrange(len(self.workers)))
        victim.kill()
        victim.wait()
        assert self.standby is not None
        replacement, go = self.standby
        go.touch()
        self.workers.append(replacement)
        self._new_standby()

    def finish(self) -> None:
        """Tell every worker to stop (SIGTERM), and kill the standby."""
        if self.standby is not None:
            self.standby[0].kill()
            self.standby[0].wait()
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def _until_ready(results: str, workers: int) -> None:
    """Wait until ``workers`` workers have loaded their data and connected."""
    deadline = time.monotonic() + 300
    while Path(results).read_text().count('"ready"') < workers:
        if time.monotonic() > deadline:
            raise SystemExit("the workers did not get ready within 300 s")
        time.sleep(0.1)


def _faults(args: argparse.Namespace, fleet: _Fleet, server: _Server) -> Counter[str]:
    """Break things at random until the run's time is up; the faults by kind."""
    rng = random.Random(args.seed)
    kinds = args.faults.split(",")
    done: Counter[str] = Counter()
    ends = time.monotonic() + args.duration
    while (left := ends - time.monotonic()) > 0:
        time.sleep(min(left, rng.uniform(0.5, 1.5) * args.fault_every))
        if time.monotonic() >= ends:
            break
        kind = rng.choice(kinds)
        if kind == "kill":
            fleet.replace(rng)
        elif kind == "freeze":
            server.freeze()
            try:
                time.sleep(rng.uniform(1.0, 6.0))
            finally:
                server.thaw()
        else:
            server.stop()
            time.sleep(rng.uniform(0.2, 1.0))
            server.start()
        done[kind] += 1
    return done


def run(args: argparse.Namespace) -> None:
    """Start the server and the fleet, break things, then print what it cost."""
    offsets = [float(part) for part in args.clock_offsets.split(",")]
    with _server(args.store) as server, tempfile.TemporaryDirectory() as scratch:
        log, results = str(Path(scratch) / "calls"), str(Path(scratch) / "results")
        Path(log).touch()
        Path(results).touch()
        job = Job(
            server.url,
            f"faults-{uuid.uuid4().hex[:8]}",
            args.threads,
            args.turns,
            args.in_flight,
            args.delay,
            "chitchat",
            log,
        )
        fleet = _Fleet(job, results, offsets, Path(scratch))
        fleet.start(args.workers)
        _until_ready(results, args.workers + 1)
        try:
            faults = _faults(args, fleet, server)
        finally:
            fleet.finish()
        calls = Counter(Path(log).read_text().splitlines())
        lines = [json.loads(line) for line in Path(results).read_text().splitlines()]
        cached_ends: dict[str, int] = {}
        for line in lines:
            for thread, end in line.get("cached_ends", {}).items():
                cached_ends[thread] = max(end, cached_ends.get(thread, end))
        lost = asyncio.run(_lost(job, cached_ends))
    _print(args, faults, calls, lines, lost)


def _print(
    args: argparse.Namespace,
    faults: Counter[str],
    calls: Counter[str],
    lines: list[dict[str, Any]],
    lost: int,
) -> None:
    requests = [line for line in lines if "outcomes" in line]
    outcomes = sum((Counter(line["outcomes"]) for line in requests), Counter[str]())
    errors = sum((Counter(line["errors"]) for line in requests), Counter[str]())
    leases = Counter(line["lease"] for line in lines if "lease" in line)
    duplicates = sum(n - 1 for n in calls.values())
    total = sum(faults.values())
    print(
        f"fleet under faults: store {args.store}, {args.workers} workers x {args.in_flight} in "
        f"flight, {args.duration:g} s, replacements' clocks off by {args.clock_offsets} s, "
        f"seed {args.seed}"
    )
    print(f"faults                   {total} ({dict(sorted(faults.items()))})")
    print(f"requests                 {len(requests):,}: {dict(sorted(outcomes.items()))}")
    waits: Counter[float] = Counter()
    for line in requests:
        waits[line["clock"]] += line["lease_waits"]
    print(f"lease waits              {sum(waits.values()):,} (by clock offset: {dict(waits)})")
    print(f"summarizer calls         {sum(calls.values()):,}")
    per_fault = f" ({duplicates / total:.1f} per fault)" if total else ""
    print(f"duplicate summarizations {duplicates}{per_fault}")
    print(
        f"leases                   {leases['takeover']} taken over as abandoned, "
        f"{leases['lost']} lost by their holder"
    )
    slowest = max((line["slowest_error"] for line in requests), default=0.0)
    failed = ", ".join(f"{name}: {n}" for name, n in sorted(errors.items())) or "none"
    print(f"failed requests          {failed}" + (f" (slowest {slowest:.2f} s)" if errors else ""))
    print(f"stale summaries served   {sum(line['stale'] for line in requests)}")
    print(f"lost summaries           {lost}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("redis", "postgres"), default="redis")
    parser.add_argument("--clock-offsets", default="0", help="seconds, comma-separated")
    parser.add_argument("--duration", type=float, default=45.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--fault-every", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", default="kill,freeze,restart", help="the kinds to pick from")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--go", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(_serve(Job(**json.loads(args.worker)), args.results, args.go))
        return
    run(args)


if __name__ == "__main__":
    main()
