"""The ``slimcache`` command line: bench, inspect and clear, and their errors."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slimcache import (
    Compaction,
    ConfigurationError,
    ConversationWindowMemory,
    MemoryStore,
    Store,
    SummarizeCompressor,
    cached_summarizer,
    open_store,
)
from slimcache.cli.app import build_app
from slimcache.recipes.maintenance import clear_thread, thread_ranges
from slimcache.stores import SupportsClose, ThreadKeys
from tests.fakes import CountingStore, RecordingSummarizer, chat

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SMALL = ["--threshold", "6", "--keep", "3", "--summary-tokens", "60"]

runner = CliRunner()


def conversation(turns: int, tag: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"{tag} says {i}. Then some more words."})
    return messages


def flat(text: str) -> str:
    """Text without rich's box drawing and line wrapping."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return runner.invoke(build_app(), list(args), env=env)


@pytest.fixture
def data_json(tmp_path: Path) -> Path:
    path = tmp_path / "chats.json"
    convs = [conversation(30, "a"), {"id": "b", "messages": conversation(24, "b")}]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


@pytest.fixture
def data_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "chats.jsonl"
    lines = [json.dumps(conversation(n, f"t{n}")) for n in (26, 18, 32)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--conversations", "0"], "'--conversations' / '-n': Input should be greater than"),
        (["-n", "x"], "unable to parse string as an integer"),
        (["--summarizer", "gpt"], "summarizer must be 'offline' or 'openai:MODEL'"),
        (["--keep", "20", "--threshold", "20"], "keep (20) must be below threshold (20)"),
        (["--strategy", "custom"], "strategy must be one of"),
        (["--store", "nosuch://x"], "unknown store URL scheme 'nosuch'"),
        (["--store", "sqlite:///x.db"], "use sqlite+aiosqlite:// instead"),
        (["--dataset", "missing.json"], "dataset file not found"),
        (["--dataset", "chats.txt"], "dataset must be 'chitchat' or a .json / .jsonl file"),
        (["--price-per-mtok", "-1"], "--price-per-mtok"),
        (["--json", "/nonexistent/dir/out.json"], "--json: no such directory: /nonexistent/dir"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], message: str) -> None:
    result = invoke("bench", "--store", "memory://", *args)
    assert result.exit_code == 2, result.output
    assert message in flat(result.stderr)


def test_missing_openai_key_fails_before_anything(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    result = invoke(
        "bench",
        "--store",
        sqlite_url(db),
        "--summarizer",
        "openai:gpt-4o-mini",
        env={"OPENAI_API_KEY": None},
    )
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr
    assert not db.exists()


def test_dead_openai_endpoint_fails_fast(data_json: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = invoke(
        "bench",
        "--store",
        "memory://",
        "--dataset",
        str(data_json),
        "--summarizer",
        "openai:tiny",
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"},
    )
    assert result.exit_code == 2
    assert "summarizer endpoint is not usable" in result.stderr
    assert f"127.0.0.1:{port}/v1/models" in result.stderr


def test_invalid_message_names_file_conversation_and_index(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    rows = [conversation(4, "a"), [{"role": "user", "content": "hi"}, {"role": "robot"}]]
    bad.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    result = invoke("bench", "--store", "memory://", "--dataset", str(bad))
    assert result.exit_code == 2
    assert "bad.jsonl: conversation 1, messages[1]: unknown role 'robot'" in result.stderr


def test_too_few_long_conversations(data_json: Path) -> None:
    result = invoke(
        "bench", "--store", "memory://", "--dataset", str(data_json), "--min-messages", "500"
    )
    assert result.exit_code == 2
    assert "lower --min-messages" in result.stderr


# ---------------------------------------------------------------- bench


def test_bench_json_dataset_on_memory(data_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = invoke(
        "bench", "--store", "memory://", "--dataset", str(data_json), "--json", str(out), *SMALL
    )
    assert result.exit_code == 0, result.stderr
    assert "(no cache)" in result.stdout
    assert "summarizer calls" in result.stdout
    assert "Floor:" in result.stdout
    assert "exactly the floor" in result.stdout
    figures = json.loads(out.read_text())
    modes = figures["modes"]
    assert figures["conversations"] == 2
    assert figures["settings"]["dataset"] == "chats.json"
    assert figures["settings"]["min_messages"] == 0
    assert [t["conversation"] for t in figures["threads"]] == ["0", "b"]
    assert modes["naive"]["summarizer_calls"] > modes["memory"]["summarizer_calls"] > 0
    assert modes["memory"]["summarizer_calls"] == modes["store"]["summarizer_calls"]
    assert modes["memory"]["message_tokens"] == figures["floor_tokens"]
    assert modes["store"]["message_tokens"] == figures["floor_tokens"]
    assert modes["naive"]["message_tokens"] > 2 * figures["floor_tokens"]
    assert modes["second_pass"]["cache_hits"] > 0
    assert modes["store"]["cost_usd"] == pytest.approx(modes["store"]["input_tokens"] * 0.15e-6)


def test_bench_jsonl_on_sqlite_twice_with_plot(data_jsonl: Path, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "bench.db")
    plot, first_json, second_json = tmp_path / "b.png", tmp_path / "1.json", tmp_path / "2.json"
    first = invoke(
        "bench",
        "--store",
        url,
        "--dataset",
        str(data_jsonl),
        "-n",
        "2",
        "--seed",
        "3",
        "--json",
        str(first_json),
        "--plot",
        str(plot),
        "--price-per-mtok",
        "1",
        *SMALL,
    )
    assert first.exit_code == 0, first.stderr
    assert "cold" in first.stdout
    assert plot.read_bytes().startswith(PNG_SIGNATURE)
    figures = json.loads(first_json.read_text())
    assert figures["conversations"] == 2
    assert figures["store_warm_threads"] == 0
    store = figures["modes"]["store"]
    assert store["latency_median_ms"] is not None
    assert store["store_round_trips"] > 0
    assert store["cost_usd"] == pytest.approx(store["input_tokens"] / 1e6)

    second = invoke(
        "bench",
        "--store",
        url,
        "--dataset",
        str(data_jsonl),
        "-n",
        "2",
        "--seed",
        "3",
        "--json",
        str(second_json),
        *SMALL,
    )
    assert second.exit_code == 0, second.stderr
    assert "warm (2/2 threads cached) before this run" in flat(second.stdout)
    again = json.loads(second_json.read_text())
    assert again["threads"] == figures["threads"]
    assert again["store_warm_threads"] == 2
    assert again["modes"]["store"]["cache_hits"] > 0
    for run, output in ((figures, first.stdout), (again, second.stdout)):
        hits = run["modes"]["second_pass"]
        assert hits["hit_samples"] == hits["cache_hits"] > 0
        assert hits["hit_median_ms"] > 0
        assert hits["index_get_median_ms"] > 0
        assert "cache hit / store.get median" in output
        assert "A cache hit took " in flat(output)
        assert "one plain store.get of the thread's index" in flat(output)


def test_bench_on_chitchat(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    result = invoke("bench", "--store", "memory://", "-n", "2", "--json", str(out))
    assert result.exit_code == 0, result.stderr
    figures = json.loads(out.read_text())
    assert figures["settings"]["dataset"] == "chitchat"
    assert figures["settings"]["min_messages"] == 40
    assert figures["messages"] >= 2 * 41
    assert (
        figures["modes"]["naive"]["summarizer_calls"]
        > figures["modes"]["memory"]["summarizer_calls"]
    )


def test_python_m_slimcache(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slimcache", "bench", "--summarizer", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "summarizer must be 'offline' or 'openai:MODEL'" in done.stderr


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
