"""CachedSummarizationMiddleware in a real ``create_agent`` agent, sync and async, on real stores.

The agent's model and the summarizing model are LangChain's own fake chat models, recording
what they were sent; the store is a real one, so the cache is the real cache.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from slimcache import ConfigurationError, MemoryStore, Store, SummaryContext
from slimcache.langchain import CachedSummarizationMiddleware
from slimcache.sync import drain, run
from tests.fakes import RecordingSummarizer

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PROMPT = "You plan trips."


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, recording every list of messages it is sent.

    ``bind_tools`` returns the model itself, so an agent with tools can run it.
    """

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def answers(count: int) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[AIMessage(f"answer {i}") for i in range(count)])


def summarizing_model() -> ScriptedChatModel:
    """Writes summary number n on its n-th call."""
    return ScriptedChatModel(responses=[AIMessage(f"summary {n}") for n in range(1, 50)])


def contents(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(message.content) for message in messages]


def transcript_sent(model: ScriptedChatModel, call: int) -> str:
    """The human message (previous summary and transcript) of the summarizer's call."""
    return str(model.seen[call][1].content)


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture(params=["memory", "redis", "sqlite"])
def store(request: pytest.FixtureRequest, open_sync_store: Callable[[str], Store]) -> Store:
    return open_sync_store(request.param)


# ---------------------------------------------------------------------- over several turns


def check_turns(agent_model: ScriptedChatModel, summaries: ScriptedChatModel) -> None:
    """What the agent's model saw and what was summarized, after seven turns.

    Keep 3, trigger at 7: at turn 3 the model would see 7 messages, so 0-3 are summarized; turn
    4 is served from the cache (5 verbatim); at turn 5 the summary is extended with 4-7; turn 6
    is served from the cache again.
    """
    seen = agent_model.seen
    assert contents(seen[2]) == [SYSTEM_PROMPT, "question 0", "answer 0", "question 1",
                                 "answer 1", "question 2"]  # fmt: skip
    assert len(summaries.seen) == 2
    first, second = transcript_sent(summaries, 0), transcript_sent(summaries, 1)
    assert "question 0" in first
    assert "answer 1" in first
    assert "question 2" not in first
    assert "Summary so far:\nsummary 1" in second
    assert "question 0" not in second
    assert "question 2" in second
    assert "answer 3" in second
    assert "question 4" not in second
    # One leading system message: the agent's prompt with the summary after it.
    summary_1 = f"{SYSTEM_PROMPT}\n\nSummary of the earlier conversation:\nsummary 1"
    summary_2 = summary_1.replace("summary 1", "summary 2")
    assert contents(seen[3]) == [summary_1, "question 2", "answer 2", "question 3"]
    assert contents(seen[4]) == [summary_1, "question 2", "answer 2", "question 3", "answer 3",
                                 "question 4"]  # fmt: skip
    assert contents(seen[5]) == [summary_2, "question 4", "answer 4", "question 5"]
    assert contents(seen[6]) == [summary_2, "question 4", "answer 4", "question 5", "answer 5",
                                 "question 6"]  # fmt: skip
    for messages in seen:
        assert [type(m) for m in messages].count(SystemMessage) == 1
        assert isinstance(messages[0], SystemMessage)


def seven_turn_agent(
    store: Store,
) -> tuple[ScriptedChatModel, ScriptedChatModel, CachedSummarizationMiddleware, Any]:
    """An agent answering seven turns, whose middleware summarizes past 7 messages, keeping 3
    (``extend``: each summary extended with only the new messages): its model, the summarizing
    model, the middleware and the agent."""
    agent_model, summaries = answers(7), summarizing_model()
    middleware = CachedSummarizationMiddleware(
        summaries, store, trigger=("messages", 7), keep=("messages", 3), strategy="extend"
    )
    agent = create_agent(
        agent_model, system_prompt=SYSTEM_PROMPT, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    return agent_model, summaries, middleware, agent


def test_a_sync_agent_over_several_turns(store: Store) -> None:
    agent_model, summaries, middleware, agent = seven_turn_agent(store)
    for turn in range(7):
        state = agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config("trip"))
    check_turns(agent_model, summaries)
    assert len(state["messages"]) == 14  # the state keeps every message
    stats = middleware.stats
    assert (stats.requests, stats.summarizer_calls, stats.cache_hits) == (7, 2, 2)

    # Another worker on the same store (a stateless server): served from the cache.
    other_model, other_summaries = answers(1), summarizing_model()
    other = CachedSummarizationMiddleware(
        other_summaries, store, trigger=("messages", 7), keep=("messages", 3)
    )
    replica = create_agent(other_model, system_prompt=SYSTEM_PROMPT, middleware=[other])
    replica.invoke({"messages": state["messages"][:-1]}, config("trip"))
    assert other_summaries.seen == []
    assert other.stats.cache_hits == 1
    assert contents(other_model.seen[0])[0].endswith("summary 2")


async def test_an_async_agent_over_several_turns(store: Store) -> None:
    agent_model, summaries, middleware, agent = seven_turn_agent(store)
    for turn in range(7):
        state = await agent.ainvoke(
            {"messages": [HumanMessage(f"question {turn}")]}, config("trip")
        )
    check_turns(agent_model, summaries)
    assert len(state["messages"]) == 14
    stats = middleware.stats
    assert (stats.requests, stats.summarizer_calls, stats.cache_hits) == (7, 2, 2)
    # The same middleware, now invoked synchronously: the store is still usable.
    agent.invoke({"messages": [HumanMessage("question 7")]}, config("trip"))
    assert middleware.stats.requests == 8


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"22C in {city}"


def test_tool_calls_within_a_turn_and_a_human_summary() -> None:
    call = {"name": "weather", "args": {"city": "Lisbon"}, "id": "call_1", "type": "tool_call"}
    agent_model = ScriptedChatModel(
        responses=[AIMessage("answer 0"), AIMessage("answer 1"),
                   AIMessage("", tool_calls=[call]), AIMessage("answer 2")]
    )  # fmt: skip
    summarizer = RecordingSummarizer()
    middleware = CachedSummarizationMiddleware(
        summarizer, trigger=("messages", 5), keep=("messages", 2), summary_placement="human"
    )
    agent = create_agent(
        agent_model, tools=[weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    for turn in range(3):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config("tools"))
    # Turn 2 calls the model twice: before the tool call, and with its result.
    before_tool, with_result = agent_model.seen[2], agent_model.seen[3]
    assert contents(before_tool) == [SYSTEM_PROMPT, "Summary of the earlier conversation:\n"
                                     "summarize[0-2]", "answer 1", "question 2"]  # fmt: skip
    assert isinstance(before_tool[1], HumanMessage)
    assert before_tool[1].additional_kwargs == {"lc_source": "summarization"}
    # The tool call and its result stay together, after the cached summary.
    assert contents(with_result)[:2] == contents(before_tool)[:2]
    assert [type(m).__name__ for m in with_result[2:]] == [
        "AIMessage", "HumanMessage", "AIMessage", "ToolMessage"
    ]  # fmt: skip
    assert [c.context.task for c in summarizer.calls] == ["summarize"]
    assert [m["content"] for m in summarizer.calls[0].messages] == [
        "question 0", "answer 0", "question 1"
    ]  # fmt: skip
    assert middleware.stats.cache_hits == 1


def test_the_summary_is_not_streamed_as_the_agents_output() -> None:
    summaries = summarizing_model()
    middleware = CachedSummarizationMiddleware(
        summaries, trigger=("messages", 3), keep=("messages", 1)
    )
    agent = create_agent(answers(1), middleware=[middleware])
    history = [HumanMessage("question 0"), AIMessage("answer 0"), HumanMessage("question 1")]
    parts = agent.stream({"messages": history}, config("s"), stream_mode="messages")
    streamed = [str(chunk.content) for chunk, _ in parts]  # type: ignore[union-attr]
    assert len(summaries.seen) == 1
    assert "".join(streamed) == "answer 0"


# ---------------------------------------------------------------------- sizes


def test_a_fraction_of_the_agents_context_window() -> None:
    agent_model = ScriptedChatModel(
        responses=[AIMessage("answer")], profile={"max_input_tokens": 200}
    )
    summarizer = RecordingSummarizer()
    middleware = CachedSummarizationMiddleware(
        summarizer, trigger=("fraction", 0.5), keep=("fraction", 0.2)
    )
    agent = create_agent(agent_model, middleware=[middleware])
    # Each message counts 4 + 25 tokens: four of them reach 100, half the window.
    long = "x" * 100
    three = [HumanMessage(long), AIMessage(long), HumanMessage(long)]
    agent.invoke({"messages": three}, config("f3"))
    assert summarizer.calls == []
    agent.invoke({"messages": [*three, AIMessage(long), HumanMessage("next")]}, config("f4"))
    # Keep 40 tokens: the last message alone (5 + 4) and one more (29) fit, not a third.
    assert [len(c.messages) for c in summarizer.calls] == [3]


def test_a_fraction_without_a_profile_is_refused_at_the_first_call() -> None:
    middleware = CachedSummarizationMiddleware(RecordingSummarizer(), trigger=("fraction", 0.8))
    agent = create_agent(answers(1), middleware=[middleware])
    with pytest.raises(ConfigurationError, match="max_input_tokens"):
        agent.invoke({"messages": [HumanMessage("hi")]}, config("p"))


def test_any_of_a_list_and_all_of_a_dict() -> None:
    summarizer = RecordingSummarizer()
    both = CachedSummarizationMiddleware(
        summarizer, trigger=[{"messages": 3, "tokens": 1000}, ("messages", 6)], keep=("messages", 1)
    )
    agent = create_agent(answers(2), middleware=[both])

    def short(count: int) -> list[BaseMessage]:
        return [(HumanMessage, AIMessage)[i % 2](f"m{i}") for i in range(count)]

    agent.invoke({"messages": short(3)}, config("d1"))  # 3 messages but few tokens: no
    assert summarizer.calls == []
    agent.invoke({"messages": short(5)}, config("d2"))
    assert summarizer.calls == []
    agent.invoke({"messages": short(6)}, config("d3"))  # 6 messages: the list's second
    assert len(summarizer.calls) == 1


def test_without_a_thread_id_it_warns_and_caches_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer()
    middleware = CachedSummarizationMiddleware(
        summarizer, MemoryStore(), trigger=("messages", 3), keep=("messages", 1)
    )
    agent = create_agent(answers(2), middleware=[middleware])
    history = [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        agent.invoke({"messages": history})
        agent.invoke({"messages": history})
    assert len(summarizer.calls) == 2
    assert [r.message for r in caplog.records if "thread_id" in r.message][:1]
    assert middleware.stats.uncached == 2


def test_a_store_url_is_opened_and_closed_by_the_middleware(tmp_path: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    summarizer = RecordingSummarizer()
    middleware = CachedSummarizationMiddleware(
        summarizer, url, trigger=("messages", 3), keep=("messages", 1)
    )
    agent = create_agent(answers(2), middleware=[middleware])
    history = [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    agent.invoke({"messages": history}, config("u"))
    agent.invoke({"messages": history}, config("u"))
    assert (len(summarizer.calls), middleware.stats.cache_hits) == (1, 1)
    assert type(middleware.store).__name__ == "SQLStore"
    assert not middleware.store.closed  # type: ignore[attr-defined]
    middleware.close()
    assert middleware.store.closed  # type: ignore[attr-defined]
    middleware.close()  # again: nothing more to do


async def test_a_store_url_is_closed_by_aclose(tmp_path: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    middleware = CachedSummarizationMiddleware(RecordingSummarizer(), url)
    await middleware.aclose()
    assert middleware.store.closed  # type: ignore[attr-defined]


async def test_a_store_passed_in_stays_open(store: Store) -> None:
    middleware = CachedSummarizationMiddleware(
        RecordingSummarizer(), store, trigger=("messages", 3), keep=("messages", 1)
    )
    agent = create_agent(answers(1), middleware=[middleware])
    history = [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    await agent.ainvoke({"messages": history}, config("open"))
    middleware.close()
    await middleware.aclose()
    assert middleware.store is store
    assert middleware.stats.summarizer_calls == 1
    run(store.set("still", "open"))
    assert run(store.get("still")) == "open"


def test_in_the_background_the_model_is_called_at_once_and_the_summary_follows(
    store: Store,
) -> None:
    release = threading.Event()
    summarizer = RecordingSummarizer()

    async def held(messages: Sequence[Any], context: SummaryContext) -> str:
        await asyncio.to_thread(release.wait)
        return await summarizer(messages, context)

    agent_model = answers(5)
    middleware = CachedSummarizationMiddleware(
        held,
        store,
        trigger=("messages", 7),
        keep=("messages", 3),
        refresh="background",
        ceiling=("messages", 12),
    )
    agent = create_agent(
        agent_model, system_prompt=SYSTEM_PROMPT, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    for turn in range(4):  # the fourth call sees 7 messages: answered without waiting
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config("bg"))
    assert contents(agent_model.seen[3]) == [SYSTEM_PROMPT] + [
        f"{kind} {n}" for n in range(3) for kind in ("question", "answer")
    ] + ["question 3"]
    assert summarizer.calls == []  # the refresh waits for its summarizer
    release.set()
    assert drain()
    assert [(c.context.start, c.context.end) for c in summarizer.calls] == [(0, 3)]
    agent.invoke({"messages": [HumanMessage("question 4")]}, config("bg"))
    summary = f"{SYSTEM_PROMPT}\n\nSummary of the earlier conversation:\nsummarize[0-3]"
    assert contents(agent_model.seen[4])[:2] == [summary, "question 2"]
    stats = middleware.stats
    assert (stats.stale_served, stats.background_finished, stats.cache_hits) == (1, 1, 1)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"refresh": "background"}, "needs a ceiling"),
        ({"ceiling": ("messages", 80)}, "only with refresh"),
        ({"refresh": "later"}, "refresh must be"),
        ({"refresh": "background", "ceiling": ("messages", 50)}, "must be above the trigger"),
        ({"refresh": "background", "ceiling": ("turns", 80)}, "ceiling sizes are"),
        ({"trigger": ("messages", 3), "keep": ("messages", 3)}, "must be below the trigger"),
        ({"trigger": ("turns", 3)}, "trigger sizes are"),
        ({"trigger": []}, "trigger must be"),
        ({"trigger": [[("messages", 3)]]}, "do not nest"),
        ({"trigger": ("fraction", 1.5)}, r"fraction must be in \(0, 1\]"),
        ({"keep": ("messages", 0)}, "keep messages must be a positive integer"),
        ({"summary_placement": "user"}, "summary_placement"),
        ({"store": "redis:/nowhere"}, "redis:/nowhere"),
    ],
)
def test_wrong_arguments_are_refused_when_built(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CachedSummarizationMiddleware(RecordingSummarizer(), **arguments)


# ---------------------------------------------------------------------- the docs


def test_the_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.splitlines() == [
        "the state keeps 12 messages",
        "requests 6, summarizer calls 2, hits 1",
    ]


def test_the_guide_includes_the_example_and_the_readme_shows_the_middleware() -> None:
    guide = (ROOT / "docs" / "guides" / "langchain.md").read_text()
    assert '```python\n--8<-- "examples/langchain_agent.py"\n```' in guide
    readme = (ROOT / "README.md").read_text()
    assert "CachedSummarizationMiddleware" in readme
