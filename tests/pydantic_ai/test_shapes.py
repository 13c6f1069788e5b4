"""CachedSummarization completes a Pydantic AI run on every shape of tool history.

Two responses with tool calls and then one request of their returns, a return whose call is not
in the history, parallel calls answered out of order, and a call never answered: each at the
start of the history (in the part summarized) and at its end (in the part kept verbatim).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from slimcache import MemoryStore
from slimcache.pydantic_ai import CachedSummarization
from slimcache.pydantic_ai._convert import from_pydantic_ai
from tests.fakes import RecordingSummarizer

SHAPES = ["block", "stray", "parallel", "unanswered"]


def calling(*ids: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("lookup", {"q": i}, tool_call_id=i) for i in ids])


def returns(*ids: str) -> ModelRequest:
    return ModelRequest(
        parts=[ToolReturnPart("lookup", f"result {i}", tool_call_id=i) for i in ids]
    )


def asked(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def said(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def shape(name: str, tag: str) -> list[ModelMessage]:
    a, b = f"{tag}a", f"{tag}b"
    made: list[ModelMessage]
    if name == "block":
        made = [calling(a), calling(b), returns(a, b)]
    elif name == "stray":
        made = [returns(f"{tag}gone")]
    elif name == "parallel":
        made = [calling(a, b), returns(b, a)]
    else:
        made = [calling(a), asked("never mind")]
    return [asked(f"{name} question"), *made, said(f"{name} answer")]


def chat(turns: int) -> list[ModelMessage]:
    return [m for n in range(turns) for m in (asked(f"q{n}"), said(f"a{n}"))]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        return said("done")


def calls_of(messages: list[ModelMessage]) -> set[str]:
    return {
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }


def returns_of(messages: list[ModelMessage]) -> set[str]:
    return {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}


@pytest.mark.parametrize("where", ["summarized", "kept"])
@pytest.mark.parametrize("name", SHAPES)
def test_the_run_completes_and_calls_stay_with_their_returns(name: str, where: str) -> None:
    tag = "s" if where == "summarized" else "k"
    history = [*shape(name, tag), *chat(6)] if tag == "s" else [*chat(6), *shape(name, tag)]
    summarizer = RecordingSummarizer()
    capability = CachedSummarization(
        summarizer, MemoryStore(), trigger=("messages", 8), keep=("messages", 4)
    )
    recorder = Recorder()
    agent = Agent(FunctionModel(recorder), capabilities=[capability])
    result = agent.run_sync("last question", message_history=history, conversation_id="c")
    assert result.output == "done"
    sent = recorder.seen[0]
    assert len(summarizer.calls) == 1
    assert capability.stats.invalid_histories == 0
    summarized: list[dict[str, Any]] = summarizer.calls[0].messages
    made = {c["id"] for m in summarized for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in summarized if m["role"] == "tool"}
    assert answered <= made
    shape_calls = calls_of(shape(name, tag))
    # Pydantic AI merges responses in a row and drops a return with no call before the model
    # is called: every return the model gets has its call.
    assert returns_of(sent) <= calls_of(sent)
    if where == "summarized":
        assert shape_calls <= made
        assert not calls_of(sent)
    else:
        assert shape_calls <= calls_of(sent)
        assert not made


def test_the_returns_after_two_responses_in_a_row_answer_either() -> None:
    # As a history processor may be given them, before Pydantic AI merges the two responses.
    dicts, _ = from_pydantic_ai([asked("q"), calling("a"), calling("b"), returns("a", "b")])
    assert [d["role"] for d in dicts] == ["user", "assistant", "assistant", "tool", "tool"]
    assert [d["tool_call_id"] for d in dicts[3:]] == ["a", "b"]
    # Once a return has answered them, a later response starts a block of its own.
    later, _ = from_pydantic_ai([calling("a"), returns("a"), calling("b"), returns("b", "a")])
    assert [d["role"] for d in later] == ["assistant", "tool", "assistant", "tool", "user"]
