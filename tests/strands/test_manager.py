"""CachedSummarizingConversationManager in real Strands agents, on real stores.

The agent's model is a Strands ``Model`` of the tests' own (:mod:`tests.strands.models`): it
records what it was sent and overflows past 12 messages, as a model's context window does. Each
turn is a stateless request: a new agent restores the session from a ``FileSessionManager``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.session import FileSessionManager
from strands.types.exceptions import ContextWindowOverflowException

from slimcache import ConfigurationError, MemoryStore, Store, SummarizerError
from slimcache.strands import CachedSummarizingConversationManager, StrandsSummarizer
from tests.fakes import RecordingSummarizer
from tests.strands.models import ScriptedModel, weather

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 12


def question(turn: int) -> str:
    return f"Question {turn}" + (" and the weather?" if turn % 3 == 0 else "")


def replay(
    manager: Callable[[], CachedSummarizingConversationManager],
    sessions: Path,
    turns: int = 20,
) -> tuple[ScriptedModel, Agent]:
    """Twenty stateless requests: each a new agent on the session, with a new manager."""
    model = ScriptedModel(limit=LIMIT)
    agent: Agent | None = None
    for turn in range(turns):
        session = FileSessionManager(session_id="chat-42", storage_dir=str(sessions))
        agent = Agent(model=model, tools=[weather], conversation_manager=manager(),
                      session_manager=session, callback_handler=None)  # fmt: skip
        agent(question(turn))
    assert agent is not None
    return model, agent


def check_pairs(messages: list[dict[str, Any]]) -> None:
    """Every tool result answers a tool use of the message just before it."""
    for index, message in enumerate(messages):
        results = [b["toolResult"]["toolUseId"] for b in message["content"] if "toolResult" in b]
        if results:
            before = messages[index - 1]["content"] if index else []
            assert set(results) <= {b["toolUse"]["toolUseId"] for b in before if "toolUse" in b}


@pytest.fixture(params=["memory", "redis", "sqlite"])
def store(request: pytest.FixtureRequest, open_sync_store: Callable[[str], Store]) -> Store:
    return open_sync_store(request.param)


def test_a_stateless_replay_is_summarized_once_and_a_second_agent_is_served(
    store: Store, tmp_path: Path
) -> None:
    summarizer = RecordingSummarizer()
    model, agent = replay(
        lambda: CachedSummarizingConversationManager(summarizer, store), tmp_path / "first"
    )
    assert model.overflows >= 3
    assert summarizer.calls
    assert max(map(len, model.seen)) <= LIMIT  # what the model sees is compressed
    for seen in [*model.seen, agent.messages]:
        check_pairs(seen)  # type: ignore[arg-type]
    summary = agent.messages[0]["content"][0]["text"]
    assert summary.startswith("Summary of the earlier conversation:")
    assert model.seen[-1][0]["content"][0]["text"] == summary
    # The session keeps every message: 20 questions, 20 answers, 7 tool uses and results.
    kept = FileSessionManager(session_id="chat-42", storage_dir=str(tmp_path / "first"))
    listed = kept.session_repository.list_messages("chat-42", agent.agent_id)
    assert len(listed) == 54
    sent = [m["content"] for call in summarizer.calls for m in call.messages]
    assert "Question 0 and the weather?" in sent
    assert "22C in Lisbon" in sent

    # Another agent (another worker, its own session files) on the same store: all cached.
    second = RecordingSummarizer()
    again, other = replay(
        lambda: CachedSummarizingConversationManager(second, store), tmp_path / "second"
    )
    assert second.calls == []
    assert again.seen == model.seen
    assert [m["content"] for m in other.messages] == [m["content"] for m in agent.messages]


def test_one_agent_across_turns_and_the_thread_id(tmp_path: Path) -> None:
    store = MemoryStore()
    counts = []
    for _ in range(2):
        summarizer = RecordingSummarizer()
        manager = CachedSummarizingConversationManager(summarizer, store, thread_id="t")
        model = ScriptedModel(limit=LIMIT)
        agent = Agent(model=model, tools=[weather], conversation_manager=manager,
                      callback_handler=None)  # fmt: skip
        for turn in range(20):
            agent(question(turn))
        check_pairs(agent.messages)  # type: ignore[arg-type]
        assert max(map(len, model.seen)) <= LIMIT
        counts.append((len(summarizer.calls), manager.stats.cache_hits))
    assert counts[0][0] == counts[1][1] > 0  # every summary of the first agent served again
    assert counts[1][0] == 0


def test_the_same_reductions_as_strands_own_manager(tmp_path: Path) -> None:
    # The same summary_ratio and preserve_recent_messages: the agent's messages have the same
    # shape as under SummarizingConversationManager, the summary aside.
    shapes: list[list[object]] = []
    for make in (
        lambda: SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=4),
        lambda: CachedSummarizingConversationManager(
            RecordingSummarizer(), None, summary_ratio=0.5, preserve_recent_messages=4
        ),
    ):
        model = ScriptedModel(limit=LIMIT, reply="Sure.")
        agent = Agent(model=model, tools=[weather], conversation_manager=make(),
                      callback_handler=None)  # fmt: skip
        for turn in range(20):
            agent(question(turn))
        # Strands' manager summarizes with the agent's model: those requests are left out.
        asked = [seen for seen in model.seen if "Please summarize" not in str(seen[-1])]
        shapes.append([len(seen) for seen in asked])
        shapes.append([m["role"] for m in agent.messages[1:]])
    assert shapes[0] == shapes[2]
    assert shapes[1] == shapes[3]


def test_a_strands_model_writes_the_summaries() -> None:
    writer = ScriptedModel(reply="They asked ten questions.")
    manager = CachedSummarizingConversationManager(writer, None, thread_id="w")
    agent = Agent(model=ScriptedModel(limit=LIMIT), conversation_manager=manager,
                  callback_handler=None)  # fmt: skip
    for turn in range(8):
        agent(f"Question {turn}")
    assert agent.messages[0]["content"][0]["text"].endswith("They asked ten questions.")
    assert writer.seen
    assert "Question 0" in writer.seen[0][0]["content"][0]["text"]
    summarizer = StrandsSummarizer(writer)
    assert (summarizer.name, summarizer.provider) == ("strands:scripted", None)


def test_a_failing_summarizer_replaces_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    fails = RecordingSummarizer(fail_with=RuntimeError("down"))
    history = [{"role": "user", "content": [{"text": f"Question {t // 2}"}]} if t % 2 == 0
               else {"role": "assistant", "content": [{"text": "Sure."}]}
               for t in range(12)]  # fmt: skip

    # Proactive: best effort, the history stays as it was and the model is called.
    manager = CachedSummarizingConversationManager(fails, store, thread_id="f")
    agent = Agent(model=ScriptedModel(), callback_handler=None, conversation_manager=manager)
    agent.messages[:] = [dict(m) for m in history]  # type: ignore[misc]
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        manager.reduce_context(agent)
    assert [m["content"] for m in agent.messages] == [m["content"] for m in history]
    assert manager.stats.summarizer_errors == 1
    assert "down" in caplog.text

    # On an overflow: Strands' own exception, as its manager raises it.
    agent = Agent(model=ScriptedModel(limit=LIMIT), callback_handler=None,
                  conversation_manager=manager)  # fmt: skip
    agent.messages[:] = [dict(m) for m in history]  # type: ignore[misc]
    with pytest.raises(ContextWindowOverflowException):
        agent("Question 6")
    raising = CachedSummarizingConversationManager(
        fails, store, thread_id="r", on_summarizer_error="raise"
    )
    agent = Agent(model=ScriptedModel(limit=LIMIT), callback_handler=None,
                  conversation_manager=raising)  # fmt: skip
    agent.messages[:] = [dict(m) for m in history]  # type: ignore[misc]
    with pytest.raises(SummarizerError):
        agent("Question 6")


def test_a_history_slimcache_cannot_summarize_is_left_as_it_came(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer()
    manager = CachedSummarizingConversationManager(summarizer, None, thread_id="odd")
    agent = Agent(model=ScriptedModel(), callback_handler=None, conversation_manager=manager)
    use = {"toolUse": {"toolUseId": "same", "name": "weather", "input": {}}}
    history: list[Any] = [
        {"role": "user", "content": [{"text": "Weather twice?"}]},
        {"role": "assistant", "content": [use, use]},  # one id for two calls
        {"role": "user", "content": [{"toolResult": {"toolUseId": "same", "content": []}}]},
    ] + [{"role": "user", "content": [{"text": str(n)}]} for n in range(10)]
    agent.messages[:] = history
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        manager.reduce_context(agent)
        manager.reduce_context(agent)
    assert agent.messages == history
    assert manager.uncompressible == 2
    assert caplog.text.count("cannot summarize") == 1  # once per thread
    assert summarizer.calls == []


def test_bad_arguments_raise_before_the_store_is_opened(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'never.db'}"
    for bad in (
        {"summary_ratio": 0.9},
        {"summary_ratio": "half"},
        {"preserve_recent_messages": -1},
        {"trigger": ("messages", 30)},
        {"keep": ("messages", 3)},
        {"ceiling": ("messages", 80)},
        {"summary_placement": "system"},
        {"lease_ttl": -1.0},
        {"thread_id": 42},
    ):
        with pytest.raises(ConfigurationError):
            CachedSummarizingConversationManager(RecordingSummarizer(), url, **bad)
    with pytest.raises(ConfigurationError, match="model must be"):
        CachedSummarizingConversationManager(42, url)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="window_size"):
        CachedSummarizingConversationManager(RecordingSummarizer(), url, window_size=3)  # type: ignore[call-arg]
    assert not (tmp_path / "never.db").exists()
    opened = CachedSummarizingConversationManager(RecordingSummarizer(), url, namespace="app")
    opened.close()
    opened.close()


def test_the_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "strands_manager.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "summarizer calls 1, then 0" in result.stdout
    guide = (ROOT / "docs" / "guides" / "strands.md").read_text()
    assert '```python\n--8<-- "examples/strands_manager.py"\n```' in guide
