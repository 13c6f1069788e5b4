"""CachedEventsSummarizer in a real ADK app, offline: the model sees the summaries, the session
keeps every event, tool calls and results stay together, a second process makes no summarizer
call, and four runners compacting one session at once make one call per range."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info < (3, 11):
    pytest.skip("google-adk 2 needs Python 3.11 or later", allow_module_level=True)

from slimcache import ConfigurationError, SummarizerError
from slimcache.google_adk import ADKSummarizer, CachedEventsSummarizer
from slimcache.stores import MemoryStore
from tests.fakes import RecordingSummarizer
from tests.google_adk.fakes import FakeLlm, Stack, sent_texts, turn
from tests.servers.sqlite_files import sqlite_url

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


async def test_a_replay_of_20_turns_compresses_what_the_model_sees() -> None:
    summarizer = RecordingSummarizer()
    stack = Stack(CachedEventsSummarizer(summarizer, MemoryStore()))
    await stack.replay("chat-42", 20)
    events = await stack.events("chat-42")
    raw = [event for event in events if not event.actions.compaction]
    said = [p.text for e in raw if e.author == "user" for p in e.content.parts if p.text]
    assert said == [turn(n) for n in range(20)]  # the session keeps every event
    assert len(raw) > 40  # the answers and the tool's calls and results too
    assert summarizer.calls
    last = sent_texts(stack.model.requests[-1])
    assert turn(0) not in last  # the model sees a summary in its place
    assert any(line.startswith("summarize[") for line in last)
    assert len(last) < len(raw) // 2


async def test_tool_calls_and_results_are_summarized_and_stay_together() -> None:
    summarizer = RecordingSummarizer()
    stack = Stack(CachedEventsSummarizer(summarizer, MemoryStore()))
    await stack.replay("chat-42", 20)
    sent = summarizer.sent_contents()
    assert any('called tool lookup({"query": "topic 2"})' in text for text in sent)
    assert any("tool lookup returned:" in text and "facts about topic 2" in text for text in sent)
    for request in stack.model.requests:
        lines = sent_texts(request)
        calls = {line.split()[1] for line in lines if line.startswith("call ")}
        results = {line.split()[1] for line in lines if line.startswith("result ")}
        assert results <= calls, lines


async def test_the_same_replay_on_the_same_store_makes_no_call() -> None:
    store = MemoryStore()
    first = RecordingSummarizer()
    await Stack(CachedEventsSummarizer(first, store)).replay("chat-42", 20)
    again = RecordingSummarizer()
    stack = Stack(CachedEventsSummarizer(again, store))
    await stack.replay("chat-42", 20)
    assert first.calls
    assert again.calls == []
    compactions = [e for e in await stack.events("chat-42") if e.actions.compaction]
    assert len(compactions) == len(first.calls)


def test_a_second_process_on_the_same_store_makes_no_call(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "adk.db")
    command = [sys.executable, "-m", "tests.workers.adk_worker", f"--url={url}"]
    reports = []
    for _ in range(2):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        reports.append(json.loads(done.stdout.splitlines()[-1]))
    first, second = reports
    assert first["calls"] > 0
    assert second == {"calls": 0, "compactions": first["compactions"]}


async def test_four_runners_compacting_one_session_make_one_call_per_range() -> None:
    store = MemoryStore()
    alone = RecordingSummarizer()
    await Stack(CachedEventsSummarizer(alone, MemoryStore())).replay("solo", 8)
    shared = RecordingSummarizer(delay=0.2)
    stacks = [Stack(CachedEventsSummarizer(shared, store)) for _ in range(4)]
    await asyncio.gather(*(stack.start("chat-42") for stack in stacks))
    for number in range(8):
        await asyncio.gather(*(stack.say("chat-42", turn(number)) for stack in stacks))
    ranges = [(call.context.start, call.context.end) for call in shared.calls]
    assert len(shared.calls) == len(alone.calls) > 0, ranges
    for stack in stacks:
        compactions = [e for e in await stack.events("chat-42") if e.actions.compaction]
        assert len(compactions) == len(alone.calls)


async def test_a_failing_summarizer_leaves_the_events_as_they_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer(fail_with=SummarizerError("the model went away"))
    cached = CachedEventsSummarizer(summarizer, MemoryStore())
    stack = Stack(cached)
    await stack.replay("chat-42", 6)
    events = await stack.events("chat-42")
    assert summarizer.calls
    assert not [e for e in events if e.actions.compaction]
    assert "stay as they were" in caplog.text
    assert cached.stats.summarizer_errors == len(summarizer.calls)


async def test_without_the_plugin_it_summarizes_without_the_cache(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer()
    cached = CachedEventsSummarizer(summarizer, MemoryStore())
    stack = Stack(cached, plugin=False)
    await stack.replay("chat-42", 6)
    assert summarizer.calls
    assert cached.stats.uncached == len(summarizer.calls)
    assert "add summarizer.plugin to App(plugins=[...])" in caplog.text


async def test_an_adk_model_writes_the_summaries() -> None:
    model = FakeLlm()
    cached = CachedEventsSummarizer(model, MemoryStore(), max_summary_tokens=200)
    stack = Stack(cached)
    await stack.replay("chat-42", 4)
    compactions = [e for e in await stack.events("chat-42") if e.actions.compaction]
    assert compactions
    request = model.requests[0]
    assert request.config.max_output_tokens == 200
    assert "turn 0: tell me more" in sent_texts(request)[0]


def test_the_settings_adk_decides_are_refused() -> None:
    for name, value in [("trigger", ("messages", 10)), ("keep", ("messages", 2))]:
        with pytest.raises(ConfigurationError, match=f"takes no {name}: ADK's"):
            CachedEventsSummarizer(RecordingSummarizer(), MemoryStore(), **{name: value})
    with pytest.raises(ConfigurationError, match="lease_ttl"):
        CachedEventsSummarizer(RecordingSummarizer(), MemoryStore(), lease_ttl=-1)
    with pytest.raises(ConfigurationError, match="model must be"):
        CachedEventsSummarizer(42, MemoryStore())
    assert ADKSummarizer(FakeLlm()).name == "google-adk:fake-llm"


async def test_under_a_token_threshold_each_summary_extends_the_last_with_the_new_events() -> None:
    summarizer = RecordingSummarizer()
    cached = CachedEventsSummarizer(summarizer, MemoryStore(), strategy="extend")
    config = {"compaction_interval": None, "overlap_size": None}
    stack = Stack(cached, token_threshold=8, event_retention_size=2, **config)
    await stack.replay("chat-42", 12)
    tasks = [call.context.task for call in summarizer.calls]
    assert tasks[0] == "summarize"
    assert tasks[1:] == ["extend"] * (len(tasks) - 1)
    assert len(tasks) > 2
    sent = sum(len(call.messages) for call in summarizer.calls)
    raw = [e for e in await stack.events("chat-42") if not e.actions.compaction]
    assert sent <= len(raw)  # each message is sent once


def test_the_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "google_adk_app.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "events 10, summarizer calls 2" in result.stdout
    guide = (ROOT / "docs" / "guides" / "google-adk.md").read_text()
    assert '```python\n--8<-- "examples/google_adk_app.py"\n```' in guide
