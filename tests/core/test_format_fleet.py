"""Tests: a fleet mixing two format versions shares one store and one thread.

Two real OS processes (``tests/workers/version_worker.py``), one stamping and reading today's
format version and one pinned to the next, answer the same thread's requests in turns on one
store (a real Redis, a real SQLite file). By the compatibility rule of docs/format.md, the worker
that wrote the thread first keeps its cache, and the other answers every request correctly,
uncached, without serving the first one's summaries or overwriting them.
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

from slimcache import open_store
from slimcache.stores import SupportsClose, ThreadKeys
from slimcache.stores.entries import ENTRY_VERSION
from tests.fakes import all_keys
from tests.servers.store_factories import shared_by_processes

ROOT = Path(__file__).resolve().parents[2]

# Seconds a worker may take to start or to answer one request on a loaded machine: a bound on
# a hung worker, not a measure of speed.
WORKER_TIMEOUT = 120.0

TODAY, NEXT = ENTRY_VERSION, ENTRY_VERSION + 1

# Request lengths of the thread's replay: each worker is asked every one, in turns.
LENGTHS = list(range(31, 82, 5))


class Worker:
    """One worker process of a pinned format version, answering one request at a time."""

    def __init__(self, version: int, url: str, options: dict[str, Any], folder: Path) -> None:
        self.version = version
        self._errors = folder / f"worker-v{version}.err"
        with self._errors.open("a") as errors:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.workers.version_worker",
                    f"--url={url}",
                    f"--store-options={json.dumps(options)}",
                    f"--version={version}",
                ],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )

    async def read(self) -> dict[str, Any]:
        """The worker's next line."""
        stdout = self._process.stdout
        assert stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(stdout.readline), WORKER_TIMEOUT)
        if not line:
            pytest.fail(f"worker v{self.version} exited:\n{self._errors.read_text()[-3000:]}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def ask(self, thread: str, length: int) -> dict[str, Any]:
        """Compress the conversation's first ``length`` messages on ``thread``."""
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(json.dumps({"thread": thread, "length": length}) + "\n")
        stdin.flush()
        return await self.read()

    def stop(self) -> None:
        """Close its stdin, and kill it if it does not exit."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@pytest.fixture(params=["redis", "sqlite"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """The store URL and options both workers and the test open."""
    return shared_by_processes(request, tmp_path, request.param, "slimcache-fleet")


async def stored_records(url: str, options: dict[str, Any], thread: str) -> dict[str, Any]:
    """Every record of ``thread`` in the store, parsed, by key."""
    store = open_store(url, **options)
    try:
        keys = await all_keys(store, ThreadKeys(thread).prefix)
        return {key: json.loads(await store.get(key) or "null") for key in sorted(set(keys))}
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()


@pytest.mark.parametrize("first", [TODAY, NEXT], ids=["today's first", "the next first"])
async def test_two_format_versions_share_a_thread(
    shared: tuple[str, dict[str, Any]], tmp_path: Path, first: int
) -> None:
    url, options = shared
    thread = f"fleet-{uuid.uuid4().hex[:8]}"
    workers = {version: Worker(version, url, options, tmp_path) for version in (TODAY, NEXT)}
    try:
        for worker in workers.values():
            assert await worker.read() == {"started": True}
        owner, other = workers[first], workers[NEXT if first == TODAY else TODAY]
        answers: dict[int, list[dict[str, Any]]] = {TODAY: [], NEXT: []}
        for length in LENGTHS:
            for worker in (owner, other):
                answers[worker.version].append(await worker.ask(thread, length))
    finally:
        for worker in workers.values():
            worker.stop()

    for version, given in answers.items():
        # Each served only summaries of its own version, of the range it answered with.
        for answer in given:
            assert answer["summary"].startswith(f"v{version}:"), answer
            assert answer["summary"].endswith("-{}]".format(answer["range"][1])), answer
    mine, theirs = answers[owner.version], answers[other.version]
    # The owner's cache kept working: extended and served, never overwritten by the other.
    assert mine[0]["outcome"] == "summarized"
    assert {a["outcome"] for a in mine[1:]} <= {"extended", "hit"}
    assert "extended" in {a["outcome"] for a in mine[1:]}
    assert all(a["cached"] for a in mine)
    # The other answered every request itself from the messages alone, caching nothing.
    assert {a["outcome"] for a in theirs} == {"summarized"}
    assert not any(a["cached"] for a in theirs)
    assert not any(" + " in a["summary"] for a in theirs)

    records = await stored_records(url, options, thread)
    keys = ThreadKeys(thread)
    assert keys.index in records
    assert keys.lease not in records
    for key, record in records.items():
        assert record["v"] == owner.version, key
        summary = record["head"]["summary"] if key == keys.index else record["summary"]
        assert summary.startswith(f"v{owner.version}:"), key
