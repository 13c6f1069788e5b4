"""A SQLite file the store cannot open: the call fails, and aiosqlite's thread is done with it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from slimcache_sql import SQLStore

from slimcache import StoreError
from tests.servers.sqlite_files import sqlite_url

RUNS = 50


def _aiosqlite_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]


async def _fail_once(url: str) -> None:
    store = SQLStore.from_url(url)
    try:
        with pytest.raises(StoreError, match="unable to open database file"):
            await store.get("k")
    finally:
        await store.aclose()


@pytest.mark.parametrize("where", ["missing folder", "folder"])
def test_a_failed_connect_leaves_no_thread_to_the_closed_loop(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncio.run closes its loop as soon as the call has failed: aiosqlite's thread must not
    # hand that loop anything afterwards ("Event loop is closed" in the thread).
    folder = tmp_path / "a-folder"
    folder.mkdir()
    url = sqlite_url(tmp_path / "missing" / "x.db" if where == "missing folder" else folder)
    failures: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    for _ in range(RUNS):
        asyncio.run(_fail_once(url))
    for thread in _aiosqlite_threads():
        thread.join(timeout=30)
    shown = [f"{type(f.exc_value).__name__}: {f.exc_value}" for f in failures]
    assert shown == []
