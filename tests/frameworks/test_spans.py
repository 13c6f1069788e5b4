"""Exactly a given span of a thread summarized, cached by its range: served again with no call,
extended from a cached prefix with only the new messages, never served once a message changed,
and made once by workers (tasks or processes) asking for it at once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slimcache import InvalidInput, SummarizerError
from slimcache.frameworks.compression import AgentCompression
from slimcache.frameworks.settings import AgentSettings
from slimcache.frameworks.spans import SpanSummaries
from slimcache.stores import MemoryStore
from slimcache.testing import StoreFactory
from tests.fakes import RecordingSummarizer, chat
from tests.servers.sqlite_files import sqlite_url

ROOT = Path(__file__).resolve().parents[2]


def span(count: int, start: int = 0) -> list[dict[str, Any]]:
    return chat(count, start=start, system=None)


async def test_a_span_again_makes_no_call_and_reads_one_key(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    spans = SpanSummaries(summarizer, store)
    first = await spans.summarize(span(6, 10), "t", start=10)
    assert (first.outcome, first.summary_range, first.summary) == (
        "summarized",
        (10, 15),
        first.summary,
    )
    assert await store.get("thread_t:summary:10-15") is not None
    before = spans.stats
    again = await SpanSummaries(summarizer, store).summarize(span(6, 10), "t", start=10)
    assert (again.outcome, again.summary, again.summarizer_calls) == ("hit", first.summary, 0)
    assert len(summarizer.calls) == 1
    assert spans.stats.store_reads == before.store_reads  # the second one read for itself
    assert [m["role"] for m in again.messages] == ["system"]
    assert str(first.summary) in again.messages[0]["content"]


async def test_one_store_read_serves_a_repeat() -> None:
    spans = SpanSummaries(RecordingSummarizer(), MemoryStore())
    await spans.summarize(span(6), "t")
    reads = spans.stats.store_reads
    await spans.summarize(span(6), "t")
    assert spans.stats.store_reads - reads == 1


async def test_a_longer_span_extends_its_cached_prefix_with_only_the_new_messages(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    spans = SpanSummaries(summarizer, store, {"strategy": "extend"})
    short = await spans.summarize(span(4, 20), "t", start=20)
    longer = await spans.summarize(span(10, 20), "t", start=20)
    assert longer.outcome == "extended"
    assert longer.summary_range == (20, 29)
    sent = summarizer.calls[-1]
    assert [m["content"] for m in sent.messages] == [m["content"] for m in span(6, 24)]
    assert sent.context.previous_summary == short.summary
    assert (spans.stats.extensions, spans.stats.misses) == (1, 1)


async def test_a_longer_span_under_the_default_tree_merges_its_prefix_as_stated() -> None:
    # The tree merges the cached part with the new messages by reading the span's messages.
    summarizer = RecordingSummarizer()
    spans = SpanSummaries(summarizer, MemoryStore())
    await spans.summarize(span(4, 20), "t", start=20)
    longer = await spans.summarize(span(10, 20), "t", start=20)
    assert (longer.outcome, longer.summary_range) == ("extended", (20, 29))
    sent = summarizer.calls[-1]
    assert [m["content"] for m in sent.messages] == [m["content"] for m in span(10, 20)]
    assert sent.context.previous_summary is None
    assert len(summarizer.calls) == 2


async def test_spans_of_other_starts_are_their_own_ranges() -> None:
    summarizer = RecordingSummarizer()
    store = MemoryStore()
    spans = SpanSummaries(summarizer, store)
    await spans.summarize(span(6), "t", start=0)
    other = await spans.summarize(span(6, 4), "t", start=4)  # overlapping, not a prefix
    assert other.outcome == "summarized"
    assert (await spans.summarize(span(6), "t", start=0)).outcome == "hit"
    assert (await spans.summarize(span(6, 4), "t", start=4)).outcome == "hit"
    assert len(summarizer.calls) == 2


async def test_a_changed_message_is_never_served(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    spans = SpanSummaries(summarizer, store)
    await spans.summarize(span(6), "t")
    edited = span(6)
    edited[2]["content"] = "an edited message"
    redone = await spans.summarize(edited, "t")
    assert redone.outcome == "summarized"
    assert "an edited message" in summarizer.sent_contents()
    # A prefix edited since it was cached is not extended either.
    longer = span(10)
    longer[1]["content"] = "edited before the prefix was extended"
    extended = await spans.summarize(longer, "t")
    assert extended.outcome == "summarized"
    assert len(summarizer.calls[-1].messages) == 10


async def test_a_prefix_ending_inside_a_tool_call_is_not_extended() -> None:
    summarizer = RecordingSummarizer()
    spans = SpanSummaries(summarizer, MemoryStore(), {"strategy": "extend"})
    calls = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "a", "content": "done"},
        {"role": "assistant", "content": "ok"},
    ]
    await spans.summarize(messages[:3], "t")
    result = await spans.summarize(messages, "t")
    assert result.outcome == "extended"
    assert [m["content"] for m in summarizer.calls[-1].messages] == ["ok"]


async def test_concurrent_tasks_on_one_span_make_one_call(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer(delay=0.3)
    workers = [SpanSummaries(summarizer, store) for _ in range(4)]
    results = await asyncio.gather(*(w.summarize(span(8), "t", start=3) for w in workers))
    assert len(summarizer.calls) == 1
    assert sorted(r.outcome for r in results) == ["hit", "hit", "hit", "summarized"]
    assert len({r.summary for r in results}) == 1


def test_two_processes_on_one_span_make_one_call(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "spans.db")
    go, log = tmp_path / "go", tmp_path / "calls.log"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers.span_worker",
                f"--url={url}",
                "--thread=shared",
                f"--go={go}",
                f"--calls-log={log}",
                "--start=5",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            assert json.loads(process.stdout.readline()) == {"armed": True}, process.stderr
        go.touch()
        outcomes = [json.loads(p.communicate(timeout=120)[0]) for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert sorted(o["outcome"] for o in outcomes) == ["hit", "summarized"]
    assert outcomes[0]["summary"] == outcomes[1]["summary"]
    calls = [line for line in log.read_text().splitlines() if not line.startswith("0-0")]
    assert len(calls) == 1, calls


async def test_catch_up_steps_are_cached_as_prefixes() -> None:
    summarizer = RecordingSummarizer()
    store = MemoryStore()
    spans = SpanSummaries(summarizer, store, {"max_input_tokens": 300, "max_summary_tokens": 50})
    long = [
        {"role": ("user", "assistant")[i % 2], "content": f"{i} " + "word " * 60} for i in range(12)
    ]
    result = await spans.summarize(long, "t", start=2)
    assert len(summarizer.calls) > 1
    prefixes = [key for key in store._data if key.startswith("thread_t:summary:2-")]
    assert len(prefixes) == len(summarizer.calls)  # each step, and the whole span
    assert result.summary_range == (2, 13)


async def test_bad_spans_are_refused_before_anything_is_written() -> None:
    store = MemoryStore()
    spans = SpanSummaries(RecordingSummarizer(), store)
    with pytest.raises(InvalidInput, match="start must be an integer at least 0"):
        await spans.summarize(span(2), "t", start=-1)
    with pytest.raises(InvalidInput, match="start"):
        await spans.summarize(span(2), "t", start=True)
    with pytest.raises(InvalidInput, match="must not be empty"):
        await spans.summarize([], "t")
    assert not store._data


async def test_without_a_thread_nothing_is_cached() -> None:
    summarizer = RecordingSummarizer()
    store = MemoryStore()
    spans = SpanSummaries(summarizer, store)
    assert (await spans.summarize(span(4), None)).outcome == "uncached"
    assert (await spans.summarize(span(4), None)).outcome == "uncached"
    assert len(summarizer.calls) == 2


async def test_the_kit_degrades_a_failed_span_to_the_messages_as_given(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer(fail_with=SummarizerError("down"))
    compression = AgentCompression(summarizer, MemoryStore(), AgentSettings())
    result = await compression.summarize_span(span(4), "t", start=2)
    assert "messages 2.. of thread t stay as they were" in caplog.text
    assert (result.outcome, result.summary, result.messages) == ("passthrough", None, span(4))
    assert (compression.stats.requests, compression.stats.summarizer_errors) == (1, 1)
    raising = AgentCompression(
        summarizer, MemoryStore(), AgentSettings(on_summarizer_error="raise")
    )
    with pytest.raises(SummarizerError, match="down"):
        await raising.summarize_span(span(4), "t")


def test_the_kit_summarizes_a_span_blocking_and_counts_it() -> None:
    summarizer = RecordingSummarizer()
    settings = AgentSettings(compressor={"strategy": "concat"})
    compression = AgentCompression(summarizer, MemoryStore(), settings)
    first = compression.summarize_span_blocking(span(4), "t", start=7)
    again = compression.summarize_span_blocking(span(4), "t", start=7)
    assert (first.summary_range, again.outcome, len(summarizer.calls)) == ((7, 10), "hit", 1)
    assert (compression.stats.requests, compression.stats.cache_hits) == (2, 1)
