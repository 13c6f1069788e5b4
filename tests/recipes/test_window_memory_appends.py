"""Appends to one window-memory session from many tasks and processes at once, on real servers.

Three OS processes (``tests/workers/append_worker.py``) and fifty asyncio tasks of the test's
own process append 800 messages to one session of one store: none may be lost, none stored
twice, each writer's messages must keep their order, and no append may fail. The tasks of one
process take turns rather than retry against each other, and on SQLite an append waits for
another connection's lock within its time bound.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from slimcache_sql import SQLStore
from sqlalchemy import insert

from slimcache import ConversationWindowMemory, Store, open_store
from slimcache.stores import SupportsClose
from slimcache.testing import StoreFactory
from tests.fakes import CallCountingStore
from tests.workers.append_worker import append_steps, content

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
SESSION = "shared"
CHUNK = 8
# 50 tasks here appending 10 messages each, and 3 processes of 4 tasks appending 25 each.
TASKS, STEPS = 50, 10
WORKERS, WORKER_TASKS, WORKER_STEPS = 3, 4, 25
TOTAL = TASKS * STEPS + WORKERS * WORKER_TASKS * WORKER_STEPS
# Starting the workers, or their appends; only reached when something hangs.
WORKER_TIMEOUT = 120.0


@dataclass
class Shared:
    """A store several processes open: its URL, and options naming a part no other test uses."""

    url: str
    options: dict[str, Any]


@pytest_asyncio.fixture(params=["redis", "sqlite", "postgres"])
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    """A fresh key prefix of Redis, a new SQLite file, or a new PostgreSQL table."""
    name: str = request.param
    if name == "redis":
        server = request.getfixturevalue("redis_server")
        yield Shared(server.url, {"prefix": f"slimcache-test:{uuid.uuid4().hex}:"})
        return
    if name == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
        options: dict[str, Any] = {}
    else:
        url = request.getfixturevalue("postgres_server").url
        options = {"table": f"t_{uuid.uuid4().hex}"}
    # Made here: processes creating the table at once would only wait on each other.
    store = SQLStore.from_url(url, **options)
    try:
        await store.setup()
    finally:
        await store.aclose()
    yield Shared(url, options)


async def start_workers(shared: Shared, go: Path, stderr: Path) -> list[asyncio.subprocess.Process]:
    """Start the worker processes and wait until each has connected to the store."""
    workers = []
    for worker in range(WORKERS):
        with (stderr.parent / f"{stderr.name}-{worker}").open("w") as errors:
            workers.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.workers.append_worker",
                    f"--url={shared.url}",
                    f"--store-options={json.dumps(shared.options)}",
                    f"--worker={worker}",
                    f"--session={SESSION}",
                    f"--tasks={WORKER_TASKS}",
                    f"--steps={WORKER_STEPS}",
                    f"--chunk-size={CHUNK}",
                    f"--go={go}",
                    cwd=ROOT,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=errors,
                )
            )
    for worker, process in enumerate(workers):
        assert await read_line(process, stderr, worker) == {"started": True}
    return workers


async def read_line(process: asyncio.subprocess.Process, stderr: Path, worker: int) -> Any:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), WORKER_TIMEOUT)
    if not line:
        errors = (stderr.parent / f"{stderr.name}-{worker}").read_text()[-3000:]
        pytest.fail(f"worker {worker} exited:\n{errors}")
    return json.loads(line)


def check_history(stored: list[str], writers: dict[str, tuple[int, int]]) -> None:
    """Every message once, each writer's in its order; ``writers``: name -> (tasks, steps)."""
    expected = [
        content(name, task, step)
        for name, (tasks, steps) in writers.items()
        for task in range(tasks)
        for step in range(steps)
    ]
    duplicated = [text for text, times in Counter(stored).items() if times > 1]
    assert duplicated == []
    assert sorted(stored) == sorted(expected)
    for name, (tasks, steps) in writers.items():
        for task in range(tasks):
            prefix = f"{name}:{task}:"
            assert [c for c in stored if c.startswith(prefix)] == [
                content(name, task, step) for step in range(steps)
            ]


async def test_tasks_and_processes_appending_to_one_session_lose_nothing_and_never_fail(
    shared: Shared, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    workers = await start_workers(shared, go, tmp_path / "worker.err")
    store: Store = open_store(shared.url, **shared.options)
    try:
        memory = ConversationWindowMemory(store, 5, chunk_size=CHUNK)
        go.touch()
        results = await asyncio.gather(
            *(append_steps(memory, SESSION, "t", task, STEPS) for task in range(TASKS))
        )
        reports = [
            await read_line(process, tmp_path / "worker.err", worker)
            for worker, process in enumerate(workers)
        ]
        for process in workers:
            await asyncio.wait_for(process.wait(), WORKER_TIMEOUT)
        errors = [e for task_errors in results for e in task_errors]
        errors += [e for report in reports for e in report["errors"]]
        assert errors == []
        stored = [str(m["content"]) for m in await memory.load_all(SESSION)]
        assert await memory.count(SESSION) == TOTAL
    finally:
        for process in workers:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert isinstance(store, SupportsClose)
        await store.aclose()
    writers = {"t": (TASKS, STEPS)}
    writers.update({f"p{w}": (WORKER_TASKS, WORKER_STEPS) for w in range(WORKERS)})
    check_history(stored, writers)


async def test_appends_in_one_process_take_turns_instead_of_retrying(
    make_window_store: StoreFactory,
) -> None:
    store = CallCountingStore(await make_window_store())
    memory = ConversationWindowMemory(store, 5, chunk_size=CHUNK)
    appends = 50 * 4
    results = await asyncio.gather(*(append_steps(memory, SESSION, "t", n, 4) for n in range(50)))
    assert [e for errors in results for e in errors] == []
    # One head read and one head write per append, and one more write per chunk stored: no
    # append lost a compare-and-set to another task of this process.
    assert store.calls["get"] == appends
    assert store.calls["compare_and_set"] == appends + appends // CHUNK
    check_history([str(m["content"]) for m in await memory.load_all(SESSION)], {"t": (50, 4)})


async def test_an_append_on_sqlite_waits_for_a_lock_held_past_busy_timeout(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'held.db'}"
    async with (
        SQLStore.from_url(url) as holder,
        SQLStore.from_url(url, timeout=10.0, busy_timeout=0.05) as store,
    ):
        memory = ConversationWindowMemory(store, 5, store_timeout=10.0)
        await memory.append(SESSION, {"role": "user", "content": "first"})
        async with holder.engine.begin() as conn:
            # This open write transaction holds the file's write lock until the block ends.
            await conn.execute(insert(holder.table).values(key="held", value="x"))
            append = asyncio.create_task(
                memory.append(SESSION, {"role": "user", "content": "second"})
            )
            await asyncio.sleep(0.5)  # ten of SQLite's lock waits
            assert not append.done()  # waiting for the lock, not failed
        await asyncio.wait_for(append, WORKER_TIMEOUT)
        assert [m["content"] for m in await memory.load_all(SESSION)] == ["first", "second"]
