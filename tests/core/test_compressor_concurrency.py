"""Many workers on one thread and one store: each range is summarized once, by one of them.

The multi-process tests run four real OS processes (``tests/workers/replay_worker.py``), each
running 16 asyncio tasks with a compressor of their own on one shared store object, all on one
thread id, against the real Redis and PostgreSQL servers of the fixtures. Every summarizer call
of every process is appended to one calls log, which the test reads back. The processes are
started once per store and serve one job per test, so the tests pay for starting Python and
importing the drivers only twice.

The in-process tests force the check-then-lock interleaving deterministically: worker A reads
the store, worker B then summarizes and commits, and only then does A go on.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slimcache_sql import SQLStore

from slimcache import (
    CompressionResult,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.stores import ThreadKeys
from slimcache.testing import StoreFactory
from slimcache.types import StrategyName
from tests.fakes import RecordingSummarizer, chat
from tests.workers.replay_worker import (
    SUMMARIZER_ID,
    Report,
    history,
    request_lengths,
    summary_text,
)

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
TASKS = 16
TRIGGER, KEEP = 20, 10
BURST_MESSAGES = 60
ROLLING_MESSAGES = 48
ROLLING_STEP = 2
# Every store call, the stores' and the compressors' bound alike: 64 tasks taking turns on one
# lease row, in processes a busy machine runs by turns, can wait seconds for one statement.
STORE_TIMEOUT = 30.0
# Generous: waiting for the holder is what these tests exercise, never giving up on it. A lease
# outlives any store call its holder makes, as the defaults have it (10 s beside 5 s).
LOCK_WAIT = 60.0
LEASE_TTL = 2 * STORE_TIMEOUT
SUMMARIZER_DELAY = 0.075
FAIL_DELAY = 1.0
# Starting the workers, or one job; only reached when something hangs.
WORKER_TIMEOUT = 150.0

Call = tuple[int, int, str]


# ---------------------------------------------------------------- the worker processes


@dataclass
class Run:
    """What the workers did in one job."""

    thread: str
    reports: list[list[list[Report]]]  # [worker][task][request]
    calls: list[Call]  # every summarizer call, in the order they started

    def all_reports(self) -> list[Report]:
        return [report for worker in self.reports for task in worker for report in task]


def read_calls(log: Path) -> list[Call]:
    calls: list[Call] = []
    for line in log.read_text().splitlines():
        span, task = line.split(" ")
        start, end = span.split("-")
        calls.append((int(start), int(end), task))
    return calls


class WorkerPool:
    """The worker processes of one store, started on the first job and stopped at the end.

    Args:
        name: The store kind (``redis`` or ``postgres``).
        url: The store URL the workers open.
        options: Store options naming a part of the store no other test uses.
        folder: Where the jobs' files and the workers' stderr go.
    """

    def __init__(self, name: str, url: str, options: dict[str, Any], folder: Path) -> None:
        self.name = name
        self.url = url
        self.options = options
        self.folder = folder
        self._processes: list[subprocess.Popen[str]] = []
        self._jobs = itertools.count()

    def _start(self) -> None:
        for worker in range(WORKERS):
            with (self.folder / f"worker-{worker}.err").open("a") as errors:
                self._processes.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "tests.workers.replay_worker",
                            f"--url={self.url}",
                            f"--store-options={json.dumps(self.options)}",
                            f"--worker={worker}",
                        ],
                        cwd=ROOT,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=errors,
                        text=True,
                    )
                )

    def stop(self) -> None:
        """End the workers: close their stdin, and kill those that do not exit."""
        processes, self._processes = self._processes, []
        for process in processes:
            if process.stdin is not None:
                process.stdin.close()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _stderr(self, worker: int) -> str:
        return (self.folder / f"worker-{worker}.err").read_text()[-3000:]

    async def _read(self, worker: int) -> Report:
        stdout = self._processes[worker].stdout
        assert stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(stdout.readline), WORKER_TIMEOUT)
        if not line:
            pytest.fail(f"worker {worker} exited:\n{self._stderr(worker)}")
        message: Report = json.loads(line)
        return message

    def _send(self, worker: int, job: dict[str, Any]) -> None:
        stdin = self._processes[worker].stdin
        assert stdin is not None
        stdin.write(json.dumps(job) + "\n")
        stdin.flush()

    async def run(
        self,
        scenario: str,
        messages: int,
        *,
        fail_first_worker: int | None = None,
        strategy: str = "extend",
    ) -> Run:
        """Run one job on a new thread and collect the reports and the calls.

        All workers are released together once all are ready. With ``fail_first_worker``, that
        worker is released alone; its first summarizer call fails after ``FAIL_DELAY``
        seconds, and the others are released while that call still runs, so they find the
        failing worker's lease and wait for it.
        """
        folder = self.folder / f"job-{next(self._jobs)}"
        folder.mkdir()
        calls_log = folder / "calls.log"
        calls_log.touch()
        thread = f"chat-{uuid.uuid4().hex[:8]}"
        try:
            if not self._processes:
                await asyncio.to_thread(self._start)
                for worker in range(WORKERS):
                    assert await self._read(worker) == {"started": True}
            for worker in range(WORKERS):
                self._send(
                    worker,
                    {
                        "scenario": scenario,
                        "thread": thread,
                        "tasks": TASKS,
                        "messages": messages,
                        "step": ROLLING_STEP,
                        "trigger": TRIGGER,
                        "keep": KEEP,
                        "lock_wait": LOCK_WAIT,
                        "lease_ttl": LEASE_TTL,
                        "store_timeout": STORE_TIMEOUT,
                        "delay": SUMMARIZER_DELAY,
                        "fail_first": worker == fail_first_worker,
                        "fail_delay": FAIL_DELAY,
                        "calls_log": str(calls_log),
                        "go": str(folder / f"go-{worker}"),
                        "strategy": strategy,
                    },
                )
            for worker in range(WORKERS):
                assert await self._read(worker) == {"armed": True}
            if fail_first_worker is not None:
                (folder / f"go-{fail_first_worker}").touch()
                await until_first_call(calls_log)
            for worker in range(WORKERS):
                (folder / f"go-{worker}").touch()
            reports = [(await self._read(worker))["tasks"] for worker in range(WORKERS)]
        except BaseException:
            # A worker may be stuck mid-job: start afresh for the next test.
            await asyncio.to_thread(self.stop)
            raise
        return Run(thread, reports, read_calls(calls_log))


def has_calls(calls_log: Path) -> bool:
    return calls_log.stat().st_size > 0


async def until_first_call(calls_log: Path) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WORKER_TIMEOUT
    while not has_calls(calls_log):
        if loop.time() > deadline:
            pytest.fail("no summarizer call started")
        await asyncio.sleep(0.005)


async def _create_table(url: str, table: str) -> None:
    store = SQLStore.from_url(url, table=table)
    try:
        await store.setup()
    finally:
        await store.aclose()


@pytest.fixture(scope="module", params=["redis", "postgres"])
def pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerPool]:
    """Workers on a fresh key prefix of the Redis server, or a fresh table of PostgreSQL,
    whose store calls may take ``STORE_TIMEOUT`` seconds."""
    name: str = request.param
    server = request.getfixturevalue(f"{name}_server")
    options: dict[str, Any] = {"timeout": STORE_TIMEOUT}
    if name == "redis":
        options["prefix"] = f"slimcache-test:{uuid.uuid4().hex}:"
    else:
        options["table"] = f"t_{uuid.uuid4().hex}"
        # Made here: four processes creating it at once would race.
        asyncio.run(_create_table(server.url, options["table"]))
    workers = WorkerPool(name, server.url, options, tmp_path_factory.mktemp(f"workers-{name}"))
    try:
        yield workers
    finally:
        workers.stop()


@pytest.fixture
def open_shared(pool: WorkerPool, request: pytest.FixtureRequest) -> Callable[[], Awaitable[Store]]:
    """Open the test's own handle on the workers' store (the same keys)."""
    factory = request.getfixturevalue(f"{pool.name}_store_factory")

    async def open_store() -> Store:
        store: Store = await factory(**pool.options)
        return store

    return open_store


# ---------------------------------------------------------------- the reference


@dataclass
class Reference:
    """What one compressor replaying the conversation alone does, request by request."""

    calls: list[Call]
    results: dict[int, CompressionResult]  # by request length


async def sequential_replay(
    conversation: list[dict[str, Any]], lengths: list[int], strategy: StrategyName = "extend"
) -> Reference:
    calls: list[Call] = []

    async def summarizer(messages: Sequence[Any], context: SummaryContext) -> str:
        calls.append((context.start, context.end, context.task))
        return summary_text(context)

    compressor = SummarizeCompressor(
        summarizer,
        MemoryStore(),
        trigger=MessageThreshold(TRIGGER),
        keep=KeepMessages(KEEP),
        summarizer_id=SUMMARIZER_ID,
        strategy=strategy,
    )
    results = {
        length: await compressor.compress_detailed(conversation[:length], thread_id="reference")
        for length in lengths
    }
    return Reference(calls, results)


def assert_served(report: Report, expected: CompressionResult) -> None:
    """The request got exactly the summary the lone compressor gives for that history."""
    expected_range = list(expected.summary_range) if expected.summary_range else None
    assert report["error"] is None, report
    assert report["range"] == expected_range, report
    assert report["summary"] == expected.summary, report


async def assert_no_lease(store: Store, run: Run) -> None:
    """Every holder gave its lease back."""
    assert await store.get(ThreadKeys(run.thread).lease) is None


# ---------------------------------------------------------------- multi-process scenarios


async def test_a_burst_of_identical_requests_makes_one_summarizer_call(
    pool: WorkerPool, open_shared: Callable[[], Awaitable[Store]]
) -> None:
    store = await open_shared()
    conversation = history(BURST_MESSAGES)
    reference = await sequential_replay(conversation, [len(conversation)])
    expected = reference.results[len(conversation)]
    assert expected.outcome == "summarized"  # the burst has work to do

    run = await pool.run("burst", BURST_MESSAGES)

    assert run.calls == reference.calls
    reports = run.all_reports()
    assert len(reports) == WORKERS * TASKS
    for report in reports:
        assert_served(report, expected)
    assert sorted(r["outcome"] for r in reports) == ["hit"] * (WORKERS * TASKS - 1) + ["summarized"]
    await assert_no_lease(store, run)


async def test_a_rolling_replay_summarizes_each_range_once(
    pool: WorkerPool, open_shared: Callable[[], Awaitable[Store]]
) -> None:
    store = await open_shared()
    conversation = history(ROLLING_MESSAGES)
    lengths = request_lengths(len(conversation), ROLLING_STEP)
    reference = await sequential_replay(conversation, lengths)
    assert len(reference.calls) >= 3  # several ranges, made while others replay

    run = await pool.run("rolling", ROLLING_MESSAGES)

    assert Counter(c[:2] for c in run.calls) == Counter(c[:2] for c in reference.calls)
    assert len({c[:2] for c in run.calls}) == len(run.calls)  # each range exactly once
    for worker in run.reports:
        for task in worker:
            assert [r["length"] for r in task] == lengths
            for report in task:
                assert_served(report, reference.results[report["length"]])
    await assert_no_lease(store, run)


async def test_a_tree_builds_each_parent_once_across_processes(
    pool: WorkerPool, open_shared: Callable[[], Awaitable[Store]]
) -> None:
    # Four processes replay one conversation with strategy="tree": each part, and each parent
    # a compaction merges its siblings into, is made by one call of one process.
    store = await open_shared()
    conversation = history(ROLLING_MESSAGES + 24)
    lengths = request_lengths(len(conversation), ROLLING_STEP)
    reference = await sequential_replay(conversation, lengths, "tree")
    # A merge's range starts at a message an earlier call summarized (it reads the parts'
    # original messages, or their summaries).
    calls = reference.calls
    merges = [c for i, c in enumerate(calls) if any(c[0] <= end for _, end, _ in calls[:i])]
    assert merges  # parents are built while the others replay

    run = await pool.run("rolling", ROLLING_MESSAGES + 24, strategy="tree")

    assert Counter(run.calls) == Counter(reference.calls)
    assert len(set(run.calls)) == len(run.calls)  # each part and parent exactly once
    for worker in run.reports:
        for task in worker:
            for report in task:
                assert_served(report, reference.results[report["length"]])
    await assert_no_lease(store, run)


async def test_a_failing_holder_costs_at_most_one_extra_call(
    pool: WorkerPool, open_shared: Callable[[], Awaitable[Store]]
) -> None:
    store = await open_shared()
    conversation = history(BURST_MESSAGES)
    reference = await sequential_replay(conversation, [len(conversation)])
    expected = reference.results[len(conversation)]

    run = await pool.run("burst", BURST_MESSAGES, fail_first_worker=0)

    # The first call is worker 0's, which fails; the others waited for it, then one took over.
    assert 1 <= len(run.calls) <= 2, run.calls
    assert run.calls[0] == reference.calls[0]
    failed = [
        (worker, report)
        for worker, tasks in enumerate(run.reports)
        for task in tasks
        for report in task
        if report["error"] is not None
    ]
    assert len(failed) == 1, failed
    assert failed[0][0] == 0
    assert failed[0][1]["error"].startswith("SummarizerError"), failed
    served = [r for r in run.all_reports() if r["error"] is None]
    assert len(served) == WORKERS * TASKS - 1
    for report in served:
        assert_served(report, expected)
    await assert_no_lease(store, run)


# ---------------------------------------------------------------- the check-then-lock race


class PauseAfterFirstRead:
    """Forwards every call to a store, holding the first read back until :attr:`resume` is set.

    Only a read that completes before any write is held, so the worker it belongs to has read
    the store and decided nothing yet: it holds no lease and has written nothing.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.paused = asyncio.Event()
        self.resume = asyncio.Event()
        self._armed = True

    async def _after_read(self) -> None:
        if self._armed:
            self._armed = False
            self.paused.set()
            await self.resume.wait()

    async def get(self, key: str) -> str | None:
        value: str | None = await self.inner.get(key)
        await self._after_read()
        return value

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        values: list[str | None] = await self.inner.get_many(keys)
        await self._after_read()
        return values

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self._armed = False
        await self.inner.set(key, value, ttl=ttl)

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        self._armed = False
        won: bool = await self.inner.set_if_absent(key, value, ttl=ttl)
        return won

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        self._armed = False
        won: bool = await self.inner.compare_and_set(key, expected, value, ttl=ttl)
        return won

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        self._armed = False
        done: bool = await self.inner.compare_and_delete(key, expected)
        return done

    async def delete(self, key: str) -> None:
        self._armed = False
        await self.inner.delete(key)


def compressor(summarizer: RecordingSummarizer, store: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(TRIGGER),
        keep=KeepMessages(KEEP),
        lock_wait=LOCK_WAIT,
    )


@pytest.mark.parametrize("store_factory", ["memory", "redis"], indirect=True)
@pytest.mark.parametrize("cached", [0, 30], ids=["cold", "extend"])
async def test_a_request_that_read_before_another_committed_makes_no_second_call(
    store_factory: StoreFactory, cached: int
) -> None:
    inner = await store_factory()
    summarizer = RecordingSummarizer(delay=0.05)
    conversation = chat(45)
    thread = "race"
    if cached:
        warm = await compressor(summarizer, inner).compress_detailed(
            conversation[:cached], thread_id=thread
        )
        assert warm.outcome == "summarized"
        summarizer.calls.clear()
    gate = PauseAfterFirstRead(inner)

    first = asyncio.create_task(
        compressor(summarizer, gate).compress_detailed(conversation, thread_id=thread)
    )
    try:
        await asyncio.wait_for(gate.paused.wait(), 30)
        # A has read the store and stands still; B does the whole job meanwhile.
        second = await asyncio.wait_for(
            compressor(summarizer, inner).compress_detailed(conversation, thread_id=thread), 30
        )
        assert second.outcome == ("extended" if cached else "summarized")
    finally:
        gate.resume.set()
    result = await asyncio.wait_for(first, 30)

    assert len(summarizer.calls) == 1
    assert result.outcome == "hit"
    assert result.summary == second.summary
    assert result.summary_range == second.summary_range
    assert not await inner.get(ThreadKeys(thread).lease)
