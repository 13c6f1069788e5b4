"""``create_agent`` with CachedSummarizationMiddleware completes on every shape of tool history.

Two assistant messages with tool calls and then their results (as LangChain merges Anthropic's
turns), a tool result whose call is not in the history, parallel calls answered out of order,
and a call never answered: each at the start of the history (in the part summarized) and at its
end (in the part kept verbatim). What slimcache cannot compress reaches the model as it came.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver

from slimcache import MemoryStore
from slimcache.langchain import CachedSummarizationMiddleware
from tests.fakes import RecordingSummarizer
from tests.langchain.test_middleware import ScriptedChatModel, answers, config

SHAPES = ("block", "stray", "parallel", "unanswered")


def calling(*ids: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": i}, "id": i} for i in ids])


def answering(call_id: str) -> ToolMessage:
    return ToolMessage(f"result {call_id}", tool_call_id=call_id)


def shape(name: str, tag: str) -> list[BaseMessage]:
    """The messages of one shape; ``tag`` keeps the ids of two shapes apart."""
    a, b = f"{tag}a", f"{tag}b"
    if name == "block":
        made = [calling(a), calling(b), answering(a), answering(b)]
    elif name == "stray":
        made = [answering(f"{tag}gone")]
    elif name == "parallel":
        made = [calling(a, b), answering(b), answering(a)]
    else:
        made = [calling(a)]
    return [HumanMessage(f"{name} question"), *made, AIMessage(f"{name} answer")]


def chat(turns: int) -> list[BaseMessage]:
    return [m for n in range(turns) for m in (HumanMessage(f"q{n}"), AIMessage(f"a{n}"))]


def history(name: str, where: str) -> list[BaseMessage]:
    """The shape first (to be summarized) or last (to stay verbatim), and a new question."""
    if where == "summarized":
        return [*shape(name, "s"), *chat(6), HumanMessage("last question")]
    return [*chat(6), *shape(name, "k"), HumanMessage("last question")]


def run_agent(messages: list[BaseMessage]) -> tuple[ScriptedChatModel, Any, Any]:
    model = answers(2)
    summarizer = RecordingSummarizer()
    middleware = CachedSummarizationMiddleware(
        summarizer, MemoryStore(), trigger=("messages", 8), keep=("messages", 4)
    )
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    state = agent.invoke({"messages": messages}, config("shapes"))
    assert state["messages"][-1].content == "answer 0"  # the agent completed its turn
    return model, middleware, summarizer


def ids_made(messages: list[BaseMessage]) -> set[str]:
    return {str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}


def ids_answered(messages: list[BaseMessage]) -> set[str]:
    return {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("where", ["summarized", "kept"])
@pytest.mark.parametrize("name", ["block", "parallel", "unanswered"])
def test_the_agent_completes_and_the_shape_is_summarized_or_kept_whole(
    name: str, where: str
) -> None:
    given = history(name, where)
    model, middleware, summarizer = run_agent(given)
    sent = model.seen[0]
    assert len(summarizer.calls) == 1  # compressed
    assert len(sent) < len(given)
    assert middleware.stats.invalid_histories == 0
    summarized = [m for call in summarizer.calls for m in call.messages]
    made = {c["id"] for m in summarized for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in summarized if m["role"] == "tool"}
    # Every result the model or the summarizer got came with its call.
    assert ids_answered(sent) <= ids_made(sent)
    assert answered <= made
    shape_ids = ids_made(shape(name, "s" if where == "summarized" else "k"))
    if where == "summarized":
        assert shape_ids <= made
        assert not ids_made(sent)
    else:
        assert shape_ids <= ids_made(sent)
        assert not made


@pytest.mark.parametrize("where", ["summarized", "kept"])
def test_a_stray_tool_result_reaches_the_model_as_it_came(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    given = history("stray", where)
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        model, middleware, summarizer = run_agent(given)
    assert [m.content for m in model.seen[0]] == [m.content for m in given]
    assert summarizer.calls == []
    assert middleware.stats.invalid_histories == 1
    assert middleware.stats.requests == 1
    warned = [r for r in caplog.records if "cannot compress the history" in r.getMessage()]
    assert len(warned) == 1
    assert "answers no tool call" in warned[0].getMessage()


def test_a_stray_result_is_warned_of_once_per_thread(caplog: pytest.LogCaptureFixture) -> None:
    model = answers(4)
    middleware = CachedSummarizationMiddleware(
        RecordingSummarizer(), MemoryStore(), trigger=("messages", 8), keep=("messages", 4)
    )
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        agent.invoke({"messages": history("stray", "kept")}, config("one"))
        agent.invoke({"messages": [HumanMessage("again")]}, config("one"))
        agent.invoke({"messages": history("stray", "kept")}, config("two"))
    warned = [r for r in caplog.records if "cannot compress the history" in r.getMessage()]
    assert len(warned) == 2
    assert middleware.stats.invalid_histories == 3


async def test_an_async_agent_passes_a_message_no_rule_covers() -> None:
    # A ChatMessage of a role OpenAI has not: the conversion refuses it, the model gets it.
    odd = ChatMessage(content="from a robot", role="robot")
    model = answers(1)
    middleware = CachedSummarizationMiddleware(
        RecordingSummarizer(), MemoryStore(), trigger=("messages", 8), keep=("messages", 4)
    )
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    messages = [*chat(6), odd, HumanMessage("last question")]
    state = await agent.ainvoke({"messages": messages}, config("odd"))
    assert state["messages"][-1].content == "answer 0"
    assert model.seen[0][-2].content == "from a robot"
    assert middleware.stats.invalid_histories == 1
