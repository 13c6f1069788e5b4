"""CachedSummarizationFilter and CachedSummarySession in real Agents SDK runs, on real stores.

The agent's model is an Agents SDK ``Model`` of the test's own, recording what it was sent; each
turn is a stateless request (the history comes in as JSON), and the store is a real one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage

from slimcache import ConfigurationError, MemoryStore, Store
from slimcache.openai_agents import (
    AgentsSummarizer,
    CachedSummarizationFilter,
    CachedSummarySession,
)
from tests.fakes import RecordingSummarizer

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ["Lisbon in May?", "Weather?", "Hotels?", "Trams?", "Food?", "Weather again?"]


class Planner(Model):
    """The agent's model: answers, and calls the weather tool when asked about the weather."""

    def __init__(self, reply: str | None = None) -> None:
        self.seen: list[list[Any]] = []
        self.loops: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []
        self.reply = reply

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:  # fmt: skip
        self.seen.append(list(input) if isinstance(input, list) else [input])
        self.loops.append((asyncio.get_running_loop(), threading.current_thread()))
        last = self.seen[-1][-1]
        n = len(self.seen)
        if self.reply is None and isinstance(last, dict) and "Weather" in str(last.get("content")):
            output = [function_call("weather", {"city": "Lisbon"}, call_id=f"call-{n}")]
        else:
            output = [assistant_message(self.reply or f"answer {n}", item_id=f"msg-{n}")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"22C in {city}"


def make_agent() -> tuple[Agent[Any], Planner]:
    planner = Planner()
    return Agent("planner", instructions="You plan trips.", model=planner, tools=[weather]), planner


def summarize_past(summarizer: Any, store: Store | str | None, **options: Any) -> Any:
    return CachedSummarizationFilter(
        summarizer, store, thread_id="trip", trigger=("messages", 6), keep=("messages", 3),
        **options,
    )  # fmt: skip


def run_config(cached: Any) -> RunConfig:
    return RunConfig(call_model_input_filter=cached, tracing_disabled=True)


def stateless(history: list[Any]) -> list[Any]:
    """The history as the next request brings it: JSON, loaded again."""
    loaded: list[Any] = json.loads(json.dumps(history))
    return loaded


def turn(question: str) -> Any:
    return {"role": "user", "content": question}


def contents(items: list[Any]) -> list[str]:
    shown = []
    for item in items:
        content = item.get("content") if "content" in item else item.get("output", item["type"])
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        shown.append(str(content))
    return shown


@pytest.fixture(params=["memory", "redis", "sqlite"])
def store(request: pytest.FixtureRequest, open_sync_store: Callable[[str], Store]) -> Store:
    return open_sync_store(request.param)


def check_what_was_sent(planner: Planner, summarizer: RecordingSummarizer) -> None:
    last = planner.seen[-1]
    assert last[0]["role"] == "system"
    assert last[0]["content"].startswith("Summary of the earlier conversation:\n")
    assert "Lisbon in May?" not in contents(last)
    assert last[-1]["type"] == "function_call_output"  # with its call just before it
    assert last[-2]["type"] == "function_call"
    for seen in planner.seen:
        calls = {item["call_id"] for item in seen if item.get("type") == "function_call"}
        outputs = {item["call_id"] for item in seen if item.get("type") == "function_call_output"}
        assert outputs <= calls
    sent = [message for call in summarizer.calls for message in call.messages]
    assert sent[0] == {"role": "user", "content": "Lisbon in May?"}
    assert any(m["role"] == "tool" and m["content"] == "22C in Lisbon" for m in sent)


def test_run_sync_statelessly_and_a_second_worker_from_the_cache(store: Store) -> None:
    summarizer = RecordingSummarizer()
    cached = summarize_past(summarizer, store)
    agent, planner = make_agent()
    history: list[Any] = []
    for question in QUESTIONS:
        given = [*stateless(history), turn(question)]
        result = Runner.run_sync(agent, given, run_config=run_config(cached))
        assert len(given) == len(stateless(history)) + 1  # the caller's list is left intact
        history = result.to_input_list()
    assert len(history) == 16  # every item
    check_what_was_sent(planner, summarizer)
    assert cached.stats.summarizer_calls == len(summarizer.calls) == 3
    assert cached.stats.cache_hits >= 2

    # Another worker on the same store replays the last request: served from the cache.
    other_summarizer = RecordingSummarizer()
    other = summarize_past(other_summarizer, store)
    replica, replica_planner = make_agent()
    Runner.run_sync(replica, stateless(history[:-3]), run_config=run_config(other))
    assert other_summarizer.calls == []
    assert other.stats.cache_hits >= 1
    assert replica_planner.seen[0] == planner.seen[-2]


async def test_run_async_statelessly(store: Store) -> None:
    summarizer = RecordingSummarizer()
    cached = summarize_past(summarizer, store)
    agent, planner = make_agent()
    history: list[Any] = []
    for question in QUESTIONS:
        given = [*stateless(history), turn(question)]
        history = (await Runner.run(agent, given, run_config=run_config(cached))).to_input_list()
    check_what_was_sent(planner, summarizer)
    # The same filter from sync code afterwards: the store is still usable.
    await asyncio.to_thread(
        Runner.run_sync, agent, [*history, turn("Thanks!")], run_config=run_config(cached)
    )
    assert cached.stats.requests == len(planner.seen)


def test_reasoning_stays_with_the_call_it_precedes() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}
    call = {"type": "function_call", "call_id": "c1", "name": "weather",
            "arguments": '{"city":"Lisbon"}', "id": "fc_1"}  # fmt: skip
    output = {"type": "function_call_output", "call_id": "c1", "output": "22C"}
    items: list[Any] = [
        {"role": "developer", "content": "Be brief."},
        turn("a"), {"role": "assistant", "content": "b"}, turn("Weather?"),
        reasoning, call, output, {"role": "assistant", "content": "warm"}, turn("c"),
    ]  # fmt: skip
    summarizer = RecordingSummarizer()
    cached = CachedSummarizationFilter(
        summarizer, thread_id="r", trigger=("messages", 5), keep=("messages", 4)
    )
    planner = Planner(reply="ok")
    Runner.run_sync(Agent("a", model=planner), items, run_config=run_config(cached))
    seen = planner.seen[0]
    assert seen[0] == {"role": "developer", "content": "Be brief."}  # pinned
    assert seen[1]["content"].startswith("Summary of the earlier conversation:\n")
    assert seen[2:4] == [reasoning, call]
    turn_sent = [m for c in summarizer.calls for m in c.messages]
    assert turn_sent[-1] == {"role": "user", "content": "Weather?"}
    assert items[4] is reasoning  # the caller's list is intact


def test_the_session_reads_summaries_and_never_rewrites_the_history(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    inner = SQLiteSession("trip", str(tmp_path / "sessions.db"))
    session = CachedSummarySession(
        inner, summarizer, MemoryStore(), trigger=("messages", 6), keep=("messages", 3)
    )
    agent, planner = make_agent()
    for question in QUESTIONS:
        Runner.run_sync(
            agent, question, session=session, run_config=RunConfig(tracing_disabled=True)
        )
    stored = asyncio.run(inner.get_items())
    assert len(stored) == 16
    assert contents(stored)[0] == "Lisbon in May?"
    assert planner.seen[-2][0]["content"].startswith("Summary of the earlier conversation:\n")
    assert session.stats.summarizer_calls == len(summarizer.calls) >= 1
    assert asyncio.run(session.get_items(2)) == stored[-2:]
    # A second worker with a session on the same database and the same store: from the cache.
    again = CachedSummarySession(
        SQLiteSession("trip", str(tmp_path / "sessions.db")), RecordingSummarizer(),
        session.store, trigger=("messages", 6), keep=("messages", 3),
    )  # fmt: skip
    first, second = asyncio.run(session.get_items()), asyncio.run(again.get_items())
    assert first == second
    assert again.stats.summarizer_calls == 0


def test_a_failing_summarizer_serves_the_last_summary(caplog: pytest.LogCaptureFixture) -> None:
    summarizer = RecordingSummarizer()
    cached = summarize_past(summarizer, MemoryStore())
    agent, planner = make_agent()
    history: list[Any] = []
    for question in ["a", "b", "c", "d"]:
        history = Runner.run_sync(agent, [*history, turn(question)],
                                  run_config=run_config(cached)).to_input_list()  # fmt: skip
    first_summary = planner.seen[-1][0]
    summarizer.fail_with = RuntimeError("model down")
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        for question in ["e", "f"]:
            history = Runner.run_sync(agent, [*history, turn(question)],
                                      run_config=run_config(cached)).to_input_list()  # fmt: skip
    assert "the summarizer failed" in caplog.text
    assert cached.stats.summarizer_errors >= 1
    assert planner.seen[-1][0] == first_summary
    assert contents(planner.seen[-1][1:]) == contents(history[4:-1])


def test_an_agents_model_summarizes_on_the_runs_event_loop() -> None:
    writer = Planner(reply="the summary")
    cached = CachedSummarizationFilter(writer, thread_id="w", trigger=("messages", 2),
                                       keep=("messages", 1))  # fmt: skip
    planner = Planner(reply="ok")
    history: list[Any] = [turn("x"), {"role": "assistant", "content": "y"}, turn("z")]
    asyncio.run(Runner.run(Agent("a", model=planner), history, run_config=run_config(cached)))
    assert writer.seen[0][0]["role"] == "user"
    assert writer.loops[0] == planner.loops[0]  # the run's own loop and thread
    assert planner.seen[0][0]["content"].endswith("the summary")
    assert AgentsSummarizer(writer).name == "openai-agents:Planner"


def test_bad_arguments_raise_before_the_store_is_opened(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'never.db'}"
    for bad in (
        {"trigger": ("messages", 3), "keep": ("messages", 3)},
        {"trigger": ("fraction", 0.5)},
        {"context_window": 0},
        {"summary_placement": "middle"},
        {"thread_id": 42},
    ):
        with pytest.raises(ConfigurationError):
            CachedSummarizationFilter(RecordingSummarizer(), url, **bad)
    with pytest.raises(ConfigurationError, match="Session"):
        CachedSummarySession(object(), RecordingSummarizer(), url)  # type: ignore[arg-type]
    assert not (tmp_path / "never.db").exists()
    opened = CachedSummarizationFilter(RecordingSummarizer(), url, thread_id="t")
    opened.close()
    opened.close()


def test_the_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_filter.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "summarizer calls 1" in result.stdout
    guide = (ROOT / "docs" / "guides" / "openai-agents.md").read_text()
    assert '```python\n--8<-- "examples/openai_agents_filter.py"\n```' in guide


def test_a_model_that_overshoots_every_time_keeps_the_run_going() -> None:
    # Asked for 60 tokens, it writes 600 every time, condense included: each summary is cut to
    # the budget at a sentence, counted, and the run goes on (this model reports no usage).
    writer = Planner(reply="The trip is to Lisbon in May. " * 80)
    cached = CachedSummarizationFilter(writer, thread_id="o", trigger=("messages", 2),
                                       keep=("messages", 1), max_summary_tokens=60)  # fmt: skip
    planner = Planner(reply="ok")
    history: list[Any] = [turn("x"), {"role": "assistant", "content": "y"}, turn("z")]
    asyncio.run(Runner.run(Agent("a", model=planner), history, run_config=run_config(cached)))
    summary = planner.seen[0][0]["content"].split("\n", 1)[1]
    assert summary.endswith("in May.")
    assert len(summary) <= 4 * 60
    assert (cached.stats.cut_over_budget, cached.stats.summarizer_errors) == (1, 0)
    assert len(writer.seen) == 2  # the summary, then the condense call
