"""CachedSummarizationFilter completes an Agents SDK run on every shape of tool history.

Two assistant turns with function calls and then one run of their outputs, an output whose call
is not in the history, parallel calls answered out of order, and a call never answered: each at
the start of the input (in the part summarized) and at its end (in the part kept verbatim).
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, Runner

from slimcache.openai_agents import CachedSummarizationFilter
from tests.fakes import RecordingSummarizer
from tests.openai_agents.test_filter import Planner, turn

SHAPES = ["block", "stray", "parallel", "unanswered"]


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": "{}"}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": f"result {call_id}"}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def shape(name: str, tag: str) -> list[dict[str, Any]]:
    a, b = f"{tag}a", f"{tag}b"
    if name == "block":
        made = [call(a), said("and also"), call(b), output(a), output(b)]
    elif name == "stray":
        made = [output(f"{tag}gone")]
    elif name == "parallel":
        made = [call(a), call(b), output(b), output(a)]
    else:
        made = [call(a), turn("never mind")]
    return [turn(f"{name} question"), *made, said(f"{name} answer")]


def chat(turns: int) -> list[dict[str, Any]]:
    return [m for n in range(turns) for m in (turn(f"q{n}"), said(f"a{n}"))]


def ids(items: list[Any], kind: str) -> set[str]:
    return {str(item["call_id"]) for item in items if item.get("type") == kind}


@pytest.mark.parametrize("where", ["summarized", "kept"])
@pytest.mark.parametrize("name", SHAPES)
def test_the_run_completes_and_calls_stay_with_their_outputs(name: str, where: str) -> None:
    tag = "s" if where == "summarized" else "k"
    body = [*shape(name, tag), *chat(6)] if tag == "s" else [*chat(6), *shape(name, tag)]
    items = [*body, turn("last question")]
    summarizer = RecordingSummarizer()
    cached = CachedSummarizationFilter(
        summarizer, thread_id="shapes", trigger=("messages", 8), keep=("messages", 4)
    )
    planner = Planner(reply="done")
    config = RunConfig(call_model_input_filter=cached, tracing_disabled=True)
    result = Runner.run_sync(Agent("a", model=planner), items, run_config=config)
    assert result.final_output == "done"
    sent = planner.seen[0]
    assert len(summarizer.calls) == 1
    assert cached.stats.invalid_histories == 0
    summarized = summarizer.calls[0].messages
    made = {c["id"] for m in summarized for c in m.get("tool_calls") or ()}
    assert {m["tool_call_id"] for m in summarized if m["role"] == "tool"} <= made
    calls = ids(shape(name, tag), "function_call")
    if where == "summarized":
        assert calls <= made
        assert not ids(sent, "function_call")
        assert not ids(sent, "function_call_output")
    else:
        assert calls <= ids(sent, "function_call")
        assert not made
        if name == "stray":  # an output with no call reaches the model as it came
            assert ids(sent, "function_call_output") == {"kgone"}
        else:
            assert ids(sent, "function_call_output") <= ids(sent, "function_call")
