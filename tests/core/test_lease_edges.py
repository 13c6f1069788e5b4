"""Leases that no clock or stray value can stall, on every store.

A lease holds ``"<token> <deadline>"``. These tests plant values slimcache did not write, and
run workers whose wall clocks are wrong (real OS processes, ``tests/workers/clock_worker.py``,
with ``time.time`` shifted before slimcache is imported), against the real servers of the
fixtures. What they check is a bound on how long the next request waits: at most
``lease_ttl + WATCH_SLACK`` plus the polling and summarizing around it, never ``lock_wait``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from slimcache import CompressionResult, MemoryStore, Store, SummarizeCompressor, open_store
from slimcache.core.lease import WATCH_SLACK, Lease
from slimcache.core.results import Stats
from slimcache.core.store_io import StoreIO
from slimcache.stores import SupportsClose, ThreadKeys
from slimcache.testing import StoreFactory
from tests.fakes import RecordingSummarizer
from tests.servers.sqlite_files import sqlite_url
from tests.workers.clock_worker import compressor_options, conversation
from tests.workers.signals import signalling_lease_wait

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
LEASE_TTL = 1.0
# Long enough that waiting it out fails every bound below.
LOCK_WAIT = 60.0
# The waiter polls at most every 0.5 s, then summarizes and commits: room for that on a machine
# busy with other work, where a process waits its turn for a core. The bound is what the tests
# hold; it stays far below LOCK_WAIT.
MARGIN = 10.0
BOUND = LEASE_TTL + WATCH_SLACK + MARGIN
# Seconds a live holder summarizes once a waiter waits for it: longer than the waiter watches
# one value, so only the holder's renewals keep the waiter off.
HOLD = 3 * LEASE_TTL + WATCH_SLACK
# Beyond LOCK_WAIT: a waiter that sat it out is reported as such, not as a silent worker.
WORKER_TIMEOUT = 120.0
# The lease of the workers checking single flight once the stray lease is gone: long enough
# that a holder's lease outlives its summarizing and commit on a busy machine.
SINGLE_FLIGHT_TTL = 10.0


def _compressor(
    summarizer: RecordingSummarizer, store: Store, lease_ttl: float = LEASE_TTL
) -> SummarizeCompressor:
    return SummarizeCompressor(summarizer, store, **compressor_options(lease_ttl, LOCK_WAIT))


async def _timed(compressor: SummarizeCompressor, thread: str) -> tuple[CompressionResult, float]:
    started = time.monotonic()
    result = await compressor.compress_detailed(conversation(), thread_id=thread)
    return result, time.monotonic() - started


async def _single_flight_holds(store: Store, *threads: str) -> None:
    """Four workers at once on a longer history of each thread: one summarizer call each."""
    summarizer = RecordingSummarizer(delay=0.2)
    longer = conversation(50)
    await asyncio.gather(
        *(
            _compressor(summarizer, store, SINGLE_FLIGHT_TTL).compress(longer, thread_id=thread)
            for thread in threads
            for _ in range(4)
        )
    )
    assert len(summarizer.calls) == len(threads), [c.context.task for c in summarizer.calls]


# ------------------------------------------------------------------ planted lease values


def _planted() -> dict[str, str]:
    return {
        "infinite": "tok inf",
        "overflowing": "tok 1e400",
        "huge": "tok 1e308",
        "year 5138": "tok 99999999999",
        "an hour ahead": f"tok {time.time() + 3600:.3f}",
        "not a number": "tok soon",
    }


async def test_a_planted_lease_value_delays_a_request_at_most_the_lease_ttl(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    planted = _planted()
    threads = {name: f"planted-{uuid.uuid4().hex}" for name in planted}
    for name, value in planted.items():
        # No TTL: the store never expires it by itself.
        await store.set(ThreadKeys(threads[name]).lease, value)

    summarizer = RecordingSummarizer()

    async def one(name: str) -> tuple[str, CompressionResult, float]:
        result, waited = await _timed(_compressor(summarizer, store), threads[name])
        return name, result, waited

    runs = await asyncio.gather(*(one(name) for name in planted))
    waits = {name: round(waited, 2) for name, _, waited in runs}
    print(f"seconds waited per planted value: {waits}")
    for name, result, waited in runs:
        assert waited < BOUND, (name, waits)
        assert result.outcome == "summarized", name
        assert await store.get(ThreadKeys(threads[name]).lease) is None, name
    assert len(summarizer.calls) == len(planted)
    await _single_flight_holds(store, *threads.values())


# ------------------------------------------------------------------ workers with wrong clocks


@pytest.fixture(params=["sqlite", "postgres", "redis", "s3"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``{"url": ..., "options": {...}}`` opening one store from this process and a worker's."""
    name = request.param
    if name == "sqlite":
        yield {"url": sqlite_url(tmp_path / "shared.db"), "options": {}}
    elif name == "postgres":
        server = request.getfixturevalue("postgres_server")
        yield {"url": server.url, "options": {"table": f"t_{uuid.uuid4().hex}"}}
    elif name == "redis":
        yield {"url": request.getfixturevalue("redis_server").url, "options": {}}
    else:
        server = request.getfixturevalue("s3_server")
        yield {"url": f"s3://{server.create_bucket()}", "options": server.client_options}


@pytest_asyncio.fixture
async def opened(shared_store: dict[str, Any]) -> AsyncIterator[Store]:
    store = open_store(shared_store["url"], **shared_store["options"])
    yield store
    if isinstance(store, SupportsClose):
        await store.aclose()


def _start_worker(
    spec: dict[str, Any], thread: str, offset: float, mode: str, **extra: Any
) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "tests.workers.clock_worker",
        "--store",
        json.dumps(spec),
        "--thread",
        thread,
        "--offset",
        str(offset),
        "--mode",
        mode,
        "--lease-ttl",
        str(LEASE_TTL),
        "--lock-wait",
        str(LOCK_WAIT),
    ]
    for name, value in extra.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)


async def _said(worker: subprocess.Popen[str]) -> str:
    """The worker's next line."""
    assert worker.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(worker.stdout.readline), WORKER_TIMEOUT)
    return line.strip()


async def _until_summarizing(worker: subprocess.Popen[str]) -> None:
    line = await _said(worker)
    assert line == "summarizing", f"worker said {line!r}, exit code {worker.poll()}"


async def _dead_worker(spec: dict[str, Any], thread: str, offset: float) -> None:
    """A worker with its clock ``offset`` seconds off takes the lease, then dies holding it."""
    worker = _start_worker(spec, thread, offset, "die")
    await _until_summarizing(worker)
    assert await asyncio.to_thread(worker.wait, WORKER_TIMEOUT) == 0


async def test_a_worker_an_hour_fast_that_dies_delays_the_next_request_at_most_the_lease_ttl(
    shared_store: dict[str, Any], opened: Store
) -> None:
    thread = f"fast-{uuid.uuid4().hex}"
    await _dead_worker(shared_store, thread, offset=3600)
    assert await opened.get(ThreadKeys(thread).lease) is not None  # it died holding the lease

    summarizer = RecordingSummarizer()
    result, waited = await _timed(_compressor(summarizer, opened), thread)
    print(f"waited {waited:.2f}s after a worker an hour fast died")
    assert waited < BOUND
    assert result.outcome == "summarized"
    assert len(summarizer.calls) == 1
    await _single_flight_holds(opened, thread)


@pytest.mark.parametrize("shared_store", ["sqlite", "postgres", "redis"], indirect=True)
async def test_stores_with_a_clock_of_their_own_expire_a_fast_workers_lease_on_time(
    shared_store: dict[str, Any], opened: Store
) -> None:
    # The database (or Redis) times the lease's expiry, not the worker that wrote it: once
    # lease_ttl has passed, the next request finds the thread free and does not wait at all.
    thread = f"fast-{uuid.uuid4().hex}"
    await _dead_worker(shared_store, thread, offset=3600)
    await asyncio.sleep(LEASE_TTL + 0.5)
    compressor = _compressor(RecordingSummarizer(), opened)
    result = await compressor.compress_detailed(conversation(), thread_id=thread)
    assert result.outcome == "summarized"
    assert compressor.stats.lease_waits == 0


async def test_a_memory_store_lease_written_by_a_fast_clock_delays_at_most_the_lease_ttl() -> None:
    store = MemoryStore()
    thread = "fast"
    io = StoreIO(store, Stats(), timeout=1.0, ttl=None)
    dying = Lease(io, ThreadKeys(thread).lease, LEASE_TTL, clock=lambda: time.time() + 3600)
    assert await dying.acquire()  # and never releases it
    summarizer = RecordingSummarizer()
    result, waited = await _timed(_compressor(summarizer, store), thread)
    assert waited < BOUND
    assert result.outcome == "summarized"
    await _single_flight_holds(store, thread)


@pytest.mark.parametrize("shared_store", ["redis", "postgres", "sqlite"], indirect=True)
async def test_a_live_holder_whose_clock_is_a_minute_behind_keeps_its_lease(
    shared_store: dict[str, Any], opened: Store, tmp_path: Path
) -> None:
    thread = f"slow-{uuid.uuid4().hex}"
    calls_log, waiting = tmp_path / "calls.log", tmp_path / "waiting"
    # Once the waiter waits, the holder summarizes for longer than a waiter watches one value
    # (lease_ttl + WATCH_SLACK): only its renewals, which change the value, keep the waiter off.
    holder = _start_worker(
        shared_store, thread, -60, "hold", delay=HOLD, calls_log=calls_log, after=waiting
    )
    try:
        await _until_summarizing(holder)
        waiter = RecordingSummarizer()
        compressor = _compressor(waiter, opened)
        result = await signalling_lease_wait(
            compressor,
            waiting,
            compressor.compress_detailed(conversation(), thread_id=thread),
        )
        assert await asyncio.to_thread(holder.wait, WORKER_TIMEOUT) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
    assert waiter.calls == []  # it waited for the holder instead of taking the lease over
    assert result.outcome == "hit"
    assert calls_log.read_text().splitlines() == ["1-20 worker"]
    assert compressor.stats.lease_waits == 1


# A holder and a waiter in processes of their own, with the wall clocks (seconds off) of each.
_CLOCK_PAIRS = {
    "holder an hour slow": (-3600.0, 0.0),
    "waiter an hour fast": (0.0, 3600.0),
    "holder an hour fast, waiter an hour slow": (3600.0, -3600.0),
}


@pytest.mark.parametrize("clocks", list(_CLOCK_PAIRS))
@pytest.mark.parametrize("shared_store", ["redis", "postgres", "sqlite"], indirect=True)
async def test_on_a_store_that_expires_leases_itself_no_clock_error_takes_a_live_lease(
    shared_store: dict[str, Any], tmp_path: Path, clocks: str
) -> None:
    holder_offset, waiter_offset = _CLOCK_PAIRS[clocks]
    thread = f"clocks-{uuid.uuid4().hex}"
    calls_log, go, waiting = tmp_path / "calls.log", tmp_path / "go", tmp_path / "waiting"
    workers: list[subprocess.Popen[str]] = []
    try:
        # The waiter boots first, so that it reaches the lease while the holder summarizes.
        waiter = _start_worker(
            shared_store,
            thread,
            waiter_offset,
            "hold",
            calls_log=calls_log,
            label="waiter",
            go=go,
            waiting=waiting,
        )
        workers.append(waiter)
        assert await _said(waiter) == "ready"
        # Once the waiter waits, the holder summarizes for longer than a waiter watches one
        # value: only its renewals keep the waiter off.
        holder = _start_worker(
            shared_store,
            thread,
            holder_offset,
            "hold",
            delay=HOLD,
            calls_log=calls_log,
            label="holder",
            after=waiting,
        )
        workers.append(holder)
        await _until_summarizing(holder)
        go.touch()
        waited = await _said(waiter)
        assert await asyncio.to_thread(holder.wait, WORKER_TIMEOUT) == 0
        assert await asyncio.to_thread(waiter.wait, WORKER_TIMEOUT) == 0
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    # One summarizer call for the range, the holder's; the waiter waited and was served it.
    assert calls_log.read_text().splitlines() == ["1-20 holder"]
    assert waited == "done hit 1"
