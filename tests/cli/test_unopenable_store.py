"""Each command on a SQLite store it cannot open prints its own error and nothing else.

aiosqlite's worker thread outlives a failed connect by a moment; a command whose event loop
closed meanwhile printed that thread's tracebacks ("Event loop is closed") before its error,
in some runs only. Each command therefore runs many times, as the user runs it: a process of
its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.cli.support import conversation, sqlite_url

# Run 4 at a time, about 9 in 10 of these runs printed a traceback before the fix (71 of 80);
# the adapter's own test (adapters/sql/tests/test_sql_connect.py) repeats the cause 50 times
# in one process, cheaply.
RUNS = 6

# The error each command reports, after "error: StoreError: SQLStore ".
COMMANDS = {
    "threads": (["threads", "{url}"], "scan_keys of thread_"),
    "inspect": (["inspect", "{url}", "--thread", "t"], "get of key 'thread_t:index'"),
    "clear": (["clear", "{url}", "--thread", "t"], "get of key 'thread_t:index'"),
    "bench": (
        ["bench", "--store", "{url}", "--dataset", "{data}", "--threshold", "6", "--keep", "3"],
        "get_many of 1 keys starting with 'thread_bench-chats.json-",
    ),
}


def _unopenable(tmp_path: Path) -> list[str]:
    """SQLite URLs the store cannot open: a file in a missing folder, and a folder."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    return [sqlite_url(tmp_path / "missing" / "x.db"), sqlite_url(folder)]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slimcache", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_store_that_cannot_be_opened_is_the_commands_error_only(
    command: str, tmp_path: Path
) -> None:
    data = tmp_path / "chats.json"
    data.write_text(json.dumps([conversation(12, "a")]), encoding="utf-8")
    template, what = COMMANDS[command]
    urls = _unopenable(tmp_path)
    runs = [
        [part.format(url=urls[i % len(urls)], data=data) for part in template] for i in range(RUNS)
    ]
    # Side by side: a busy machine is where the driver's thread lags behind the command.
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda args: _run(args, tmp_path), runs))
    noisy = [run.stderr for run in done if "Traceback" in run.stderr]
    assert not noisy, f"{len(noisy)} of {RUNS} runs printed a traceback:\n{noisy[0]}"
    for run in done:
        assert run.returncode == 1, run.stderr
        assert run.stderr.startswith(f"error: StoreError: SQLStore {what}"), run.stderr
        assert "unable to open database file" in run.stderr, run.stderr
        assert run.stderr.count("\n") == 1, run.stderr  # the error, on one line
