"""Two processes on one thread start one background extension: the thread's lease holds across
processes in ``refresh="background"`` as it does inline.

Two real OS processes (``tests/workers/refresh_worker.py``) share a real Redis server, or a
SQLite file, and send the same request of the same thread at once. Each answers at once and
offers a refresh in its process; the refreshes overlap (each summarizer call takes a second),
and the one that does not get the lease leaves the work to the one that has it. Every call of
both processes is appended to one calls log, which the test reads back.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from slimcache_redis import RedisStore
from slimcache_sql import SQLStore

from slimcache import KeepMessages, MessageThreshold, Store, SummarizeCompressor
from tests.fakes import RecordingSummarizer, chat
from tests.servers.store_factories import shared_by_processes
from tests.workers.replay_worker import SUMMARIZER_ID

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 2
MESSAGES = 25  # the trigger fires; 15 messages are due; 25 verbatim is within the ceiling
DELAY = 1.0
TIMEOUT = 150.0


def worker(url: str, options: dict[str, Any], thread: str, folder: Path, number: int) -> Any:
    errors = (folder / f"worker-{number}.err").open("w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.workers.refresh_worker",
            f"--url={url}",
            f"--store-options={json.dumps(options)}",
            f"--thread={thread}",
            f"--messages={MESSAGES}",
            f"--calls-log={folder / 'calls.log'}",
            f"--delay={DELAY}",
            f"--go={folder / 'go'}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )


async def read_line(process: Any, folder: Path, number: int) -> Any:
    line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), TIMEOUT)
    if not line:
        errors = (folder / f"worker-{number}.err").read_text()[-3000:]
        pytest.fail(f"worker {number} exited:\n{errors}")
    return json.loads(line)


@pytest.fixture(params=["redis", "sqlite"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A store URL the processes share, and the options naming a part no other test uses."""
    return shared_by_processes(request, tmp_path, request.param, "slimcache-test")


def open_shared(url: str, options: dict[str, Any]) -> Store:
    if url.startswith("redis"):
        return RedisStore.from_url(url, **options)
    return SQLStore.from_url(url, **options)


async def test_two_processes_on_one_thread_start_one_background_extension(
    shared_store: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    url, options = shared_store
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "calls.log").touch()
    thread = f"chat-{uuid.uuid4().hex[:8]}"
    processes = [worker(url, options, thread, folder, n) for n in range(PROCESSES)]
    try:
        for number, process in enumerate(processes):
            assert await read_line(process, folder, number) == {"armed": True}
        (folder / "go").touch()
        reports = [await read_line(p, folder, n) for n, p in enumerate(processes)]
    finally:
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    # Each process answered at once and offered a refresh; one of them made the summary.
    assert [(r["outcome"], r["range"], r["drained"]) for r in reports] == [
        ("stale", None, True)
    ] * PROCESSES
    assert [r["stats"]["background_started"] for r in reports] == [1] * PROCESSES
    assert [r["stats"]["background_finished"] for r in reports] == [1] * PROCESSES
    assert [r["stats"]["background_failed"] for r in reports] == [0] * PROCESSES
    assert (folder / "calls.log").read_text().splitlines() == [f"1-{MESSAGES - 10} summarize"]
    assert sum(r["stats"]["summarizer_calls"] for r in reports) == 1

    # The summary they made is what a later request of the thread is served.
    store = open_shared(url, options)
    try:
        summarizer = RecordingSummarizer()
        result = await SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(20),
            keep=KeepMessages(10),
            summarizer_id=SUMMARIZER_ID,
        ).compress_detailed(chat(MESSAGES), thread_id=thread)
    finally:
        await store.aclose()  # type: ignore[attr-defined]
    assert (result.outcome, result.summary_range, summarizer.calls) == (
        "hit",
        (1, MESSAGES - 10),
        [],
    )
