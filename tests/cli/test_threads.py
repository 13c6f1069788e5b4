"""``slimcache inspect`` and ``slimcache clear``, and the maintenance calls behind them."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from slimcache import (
    Compaction,
    ConfigurationError,
    ConversationWindowMemory,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    cached_summarizer,
    open_store,
)
from slimcache.cli.threads import format_age
from slimcache.recipes.maintenance import clear_thread, list_threads, thread_ranges
from slimcache.stores import SupportsClose, ThreadKeys
from slimcache.testing import StoreFactory
from tests.cli.support import SMALL, conversation, flat, invoke, sqlite_url
from tests.fakes import CountingStore, RecordingSummarizer, chat

# ---------------------------------------------------------------- inspect and clear


def test_inspect_and_clear_after_a_bench_run(data_json: Path, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "bench.db")
    out = tmp_path / "out.json"
    ran = invoke("bench", "--store", url, "--dataset", str(data_json), "--json", str(out), *SMALL)
    assert ran.exit_code == 0, ran.stderr
    thread = json.loads(out.read_text())["threads"][1]["thread_id"]
    history = conversation(24, "b")
    good = tmp_path / "history.json"
    good.write_text(json.dumps(history), encoding="utf-8")
    edited = tmp_path / "edited.json"
    history[2] = {"role": "assistant", "content": "changed"}
    edited.write_text(json.dumps({"messages": history}), encoding="utf-8")

    shown = invoke("inspect", url, "--thread", thread, "--history", str(good), "--summaries")
    assert shown.exit_code == 0, shown.stderr
    found = re.search(r"(\d+) cached ranges", shown.stdout)
    assert found is not None, shown.stdout
    count = int(found.group(1))
    assert count >= 2
    assert shown.stdout.count("offline-extractive") == count
    # One per range, plus the column header.
    assert shown.stdout.count(" valid ") == count + 1
    assert "stale" not in shown.stdout
    assert "- user: b says 0." in shown.stdout

    stale = invoke("inspect", url, "--thread", thread, "--history", str(edited))
    assert stale.exit_code == 0
    assert stale.stdout.count(" stale ") == count
    assert stale.stdout.count(" valid ") == 1

    cleared = invoke("clear", url, "--thread", thread)
    assert cleared.exit_code == 0
    assert cleared.stdout.startswith("deleted ")
    assert "keys of thread" in cleared.stdout
    assert int(cleared.stdout.split()[1]) >= 2
    gone = invoke("inspect", url, "--thread", thread)
    assert "no cached summaries" in gone.stdout
    assert invoke("clear", url, "--thread", thread).stdout.startswith("deleted 0 keys")


def test_inspect_errors(tmp_path: Path) -> None:
    assert invoke("inspect", "nosuch://x", "--thread", "t").exit_code == 2
    bad = tmp_path / "two.json"
    bad.write_text(json.dumps([conversation(2, "a"), conversation(2, "b")]))
    result = invoke("inspect", "memory://", "--thread", "t", "--history", str(bad))
    assert result.exit_code == 2
    assert "holds 2 conversations" in result.stderr
    missing = invoke("inspect", "memory://")
    assert missing.exit_code == 2
    assert "--thread" in missing.stderr
    unknown = invoke("inspect", "memory://", "--thread", "t", "--fingerprint", "hash")
    assert unknown.exit_code == 2
    assert "--fingerprint must be content or id" in unknown.stderr


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.0, "0s"),
        (59.4, "59s"),
        (59.5, "1m 0s"),  # halves round up
        (60.0, "1m 0s"),
        (119.6, "2m 0s"),
        (1019.6, "17m 0s"),  # never "16m 60s"
        (3599.4, "59m 59s"),
        (3599.7, "1h 0m"),
        (3629.9, "1h 0m"),  # 60.5 minutes less a little
        (3630.0, "1h 1m"),
        (7199.9, "2h 0m"),
        (86369.0, "23h 59m"),
        (86370.0, "1d 0h"),  # 1439.5 minutes: one day
        (86400.0, "1d 0h"),
        (3 * 86400 + 4 * 3600 + 1799, "3d 4h"),
        (3 * 86400 + 4 * 3600 + 1800, "3d 5h"),
        (2 * 86400 - 1, "2d 0h"),
        (400 * 86400, "400d 0h"),
    ],
)
def test_an_age_is_rounded_once_then_split(seconds: float, shown: str) -> None:
    assert format_age(seconds) == shown


async def test_thread_ranges_and_clear_thread() -> None:
    store = CountingStore()  # no get_many: the plain path
    history = chat(60)
    compressor = SummarizeCompressor(RecordingSummarizer(), store)
    for length in range(2, 61, 2):
        await compressor.compress(history[:length], thread_id="t")
    ranges = await thread_ranges(store, "t", messages=history)
    assert ranges, "the replay made summaries"
    # Checked by id, the same history is not what these entries were made from.
    by_id = await thread_ranges(store, "t", messages=history, fingerprint="id")
    assert by_id == ranges  # no message has an id: content is what identifies them
    named = [{**m, "id": f"m{i}"} for i, m in enumerate(history)]
    assert not any(
        r.valid for r in await thread_ranges(store, "t", messages=named, fingerprint="id")
    )
    with pytest.raises(ConfigurationError, match="fingerprint"):
        await thread_ranges(store, "t", messages=history, fingerprint="hash")  # type: ignore[arg-type]
    assert [r.end for r in ranges] == sorted(r.end for r in ranges)
    assert all(r.valid and r.stored and r.start == 1 for r in ranges)
    assert [r.head for r in ranges] == [False] * (len(ranges) - 1) + [True]
    assert ranges[-1].summary_chars == len(ranges[-1].summary or "")
    assert ranges[-1].summarizer is not None
    assert "RecordingSummarizer" in ranges[-1].summarizer

    edited = [dict(m) for m in history]
    edited[ranges[0].end]["content"] = "edited"
    assert [r.valid for r in await thread_ranges(store, "t", messages=edited)] == [False] * len(
        ranges
    )
    assert [r.valid for r in await thread_ranges(store, "t", messages=history[:10])] == [
        False
    ] * len(ranges)
    assert all(r.valid is None for r in await thread_ranges(store, "t"))
    assert await thread_ranges(store, "t", namespace="other:") == []

    keys_before = len(store.data)
    deleted = await clear_thread(store, "t")
    assert deleted == len(ranges) + 1 == keys_before
    assert store.data == {}
    assert await clear_thread(store, "t") == 0


async def wrapped_turn_by_turn(store: Store, history: list[dict[str, Any]], ends: range) -> None:
    """``cached_summarizer`` called on ``history[: end + 1]`` for every end."""

    @cached_summarizer(store, summarizer_id="counting")
    async def summarize(messages: Any) -> str:
        return f"through {messages[-1]['content'].strip()}"

    for end in ends:
        await summarize(history[: end + 1], thread_id="t")


async def test_thread_ranges_of_cached_summarizer() -> None:
    store = MemoryStore()
    history = chat(20)
    await wrapped_turn_by_turn(store, history, range(5, 21, 5))
    # The compressor's keys are apart: none for this thread.
    assert await thread_ranges(store, "t") == []
    ranges = await thread_ranges(store, "t", messages=history, source="wrapped")
    assert [(r.start, r.end) for r in ranges] == [(0, 5), (0, 10), (0, 15), (0, 20)]
    assert [r.head for r in ranges] == [False, False, False, True]
    assert all(r.valid and r.stored and r.summarizer == "counting" for r in ranges)
    assert [r.summary for r in ranges] == [
        f"through {history[end]['content'].strip()}" for end in (5, 10, 15, 20)
    ]
    assert all(":wrapped:summary:" in r.key for r in ranges)
    # Ranges from the first message: an edit of the system prompt touches every one.
    edited = [{"role": "system", "content": "Be terse."}, *history[1:]]
    assert [
        r.valid for r in await thread_ranges(store, "t", messages=edited, source="wrapped")
    ] == [False] * 4
    # An earlier point of the conversation: the ranges it holds match, the longer ones do not.
    shorter = await thread_ranges(store, "t", messages=history[:12], source="wrapped")
    assert [r.valid for r in shorter] == [True, True, False, False]
    with pytest.raises(ConfigurationError, match="content"):
        await thread_ranges(store, "t", messages=history, fingerprint="id", source="wrapped")
    with pytest.raises(ConfigurationError, match="source"):
        await thread_ranges(store, "t", source="both")  # type: ignore[arg-type]
    await clear_thread(store, "t")
    assert await thread_ranges(store, "t", source="wrapped") == []


def test_inspect_wrapped_on_a_sqlite_file(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "wrapped.db")
    history = chat(12)

    async def fill() -> None:
        store = open_store(url)
        try:
            await wrapped_turn_by_turn(store, history, range(6, 13, 6))
        finally:
            assert isinstance(store, SupportsClose)
            await store.aclose()

    asyncio.run(fill())
    good = tmp_path / "history.json"
    good.write_text(json.dumps(history), encoding="utf-8")
    edited = tmp_path / "edited.json"
    edited.write_text(
        json.dumps([*history[:3], {"role": "user", "content": "changed"}, *history[4:]])
    )

    shown = invoke(
        "inspect", url, "--thread", "t", "--wrapped", "--history", str(good), "--summaries"
    )
    assert shown.exit_code == 0, shown.stderr
    assert "2 cached ranges of cached_summarizer" in flat(shown.stdout)
    assert shown.stdout.count(" valid ") == 3  # two ranges and the column header
    assert f"through {history[6]['content'].strip()}" in shown.stdout
    assert f"through {history[12]['content'].strip()}" in shown.stdout
    stale = invoke("inspect", url, "--thread", "t", "--wrapped", "--history", str(edited))
    assert stale.exit_code == 0, stale.stderr
    assert stale.stdout.count(" stale ") == 2
    # Without --wrapped: the compressor's summaries, of which this thread has none.
    assert "no cached summaries for thread" in invoke("inspect", url, "--thread", "t").stdout
    by_id = invoke("inspect", url, "--thread", "t", "--wrapped", "--fingerprint", "id")
    assert by_id.exit_code == 2
    assert "--fingerprint id does not apply" in by_id.stderr
    assert invoke("clear", url, "--thread", "t").exit_code == 0
    gone = invoke("inspect", url, "--thread", "t", "--wrapped")
    assert "no cached summaries of cached_summarizer" in gone.stdout


async def test_range_whose_entry_is_gone_falls_back_to_the_head() -> None:
    store = MemoryStore()
    history = chat(40)
    await SummarizeCompressor(RecordingSummarizer(), store).compress(history, thread_id=7)
    (only,) = await thread_ranges(store, 7)
    await store.delete(only.key)
    (again,) = await thread_ranges(store, 7, messages=history)
    assert (again.stored, again.head, again.valid) == (False, True, True)
    assert again.summary == only.summary


async def test_clear_thread_removes_every_key_of_the_thread() -> None:
    store = MemoryStore()
    history = chat(30)
    compressor = SummarizeCompressor(RecordingSummarizer(), store)
    await compressor.compress(history, thread_id="t")
    memory = ConversationWindowMemory(store, 4)
    for message in history[1:]:
        await memory.append("t", message)

    @cached_summarizer(store)
    async def summarize(messages: Any) -> str:
        return f"{len(messages)} messages"

    await summarize(history[1:], thread_id="t")
    compaction = Compaction("llm", context_window=1000, store=store)
    started = await compaction.handle_new_session({"summary": "so far"}, thread_id="t")
    await store.set(ThreadKeys("t").lease, "token 1.0")
    await compressor.compress(history, thread_id="other")
    others = {k for k in store.snapshot() if "thread_other:" in k}
    new_thread = getattr(started, "thread_id", None)
    assert new_thread is not None

    assert await clear_thread(store, "t") >= 2
    left = set(store.snapshot())
    assert {k for k in left if k.startswith("thread_t:")} == set()
    assert others <= left  # other threads are untouched


# ---------------------------------------------------------------- threads


LONG_ID = "x" * 300  # kept under its hash


async def _fill(store: Store) -> dict[str, tuple[str, ...]]:
    """Threads of several front doors in ``store``; what list_threads should say of them."""
    compressor = SummarizeCompressor(
        RecordingSummarizer(), store, trigger=MessageThreshold(4), keep=KeepMessages(2)
    )
    ids = [f"chat-{n}" for n in range(7)] + ["a:b c/ü", "1234", LONG_ID]
    for thread in ids:
        await compressor.compress(chat(6), thread_id=thread)
    memory = ConversationWindowMemory(store, 4)
    await memory.append_many("chat-0", chat(3))
    await memory.append_many("notes", chat(3))
    other = SummarizeCompressor(
        RecordingSummarizer(), store, trigger=MessageThreshold(4), keep=KeepMessages(2),
        namespace="tenant",
    )  # fmt: skip
    await other.compress(chat(6), thread_id="elsewhere")
    expected: dict[str, tuple[str, ...]] = {thread: ("compressor",) for thread in ids}
    expected["chat-0"] = ("compressor", "window memory")
    expected["notes"] = ("window memory",)
    hashed = ThreadKeys(LONG_ID).encoded
    expected[hashed] = expected.pop(LONG_ID)
    return expected


async def test_list_threads_pages_through_every_store(store_factory: StoreFactory) -> None:
    store = await store_factory()
    expected = await _fill(store)
    listed: dict[str, set[str]] = {}
    cursor, pages = None, 0
    while True:  # small pages and a small limit: several calls, each bounded
        page = await list_threads(store, cursor=cursor, limit=2, page_size=3)
        for thread, kinds in page.threads.items():
            listed.setdefault(thread, set()).update(kinds)
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        assert pages < 50
    assert pages > 2
    assert listed == {thread: set(kinds) for thread, kinds in expected.items()}
    tenant = await list_threads(store, namespace="tenant")
    assert (tenant.threads, tenant.cursor) == ({"elsewhere": ("compressor",)}, None)


async def test_a_store_that_cannot_list_its_keys_says_so() -> None:
    with pytest.raises(ConfigurationError, match="CountingStore cannot list its keys"):
        await list_threads(CountingStore())


def test_threads_command_lists_and_goes_on_from_its_cursor(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "threads.db")

    async def fill() -> None:
        store = open_store(url)
        try:
            await _fill(store)
        finally:
            assert isinstance(store, SupportsClose)
            await store.aclose()

    asyncio.run(fill())
    everything = invoke("threads", url)
    assert everything.exit_code == 0, everything.stderr
    lines = everything.stdout.splitlines()
    assert "chat-0\tcompressor, window memory" in lines
    assert "a:b c/ü\tcompressor" in lines
    assert "notes\twindow memory" in lines
    assert len(lines) == 11
    assert "more:" not in everything.stderr

    first = invoke("threads", url, "--limit", "1")
    assert first.exit_code == 0
    found = re.search(r"more: slimcache threads \S+ --cursor (\S+)", first.stderr)
    assert found is not None, first.stderr
    rest = invoke("threads", url, "--cursor", found.group(1).strip("'"))
    assert set(first.stdout.splitlines()) | set(rest.stdout.splitlines()) == set(lines)

    tenant = invoke("threads", url, "--namespace", "tenant")
    assert tenant.stdout.splitlines() == ["elsewhere\tcompressor"]
    assert invoke("threads", "nosuch://x").exit_code == 2
