"""CachedSummarizationMiddleware keeps the agent running when the summarizing model misbehaves.

A model that fails, one that cuts every reply at its limit, and one that overshoots the
summary's budget every time: with the default settings the agent answers every turn, and
what was served instead is counted.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from slimcache import MemoryStore, SummarizerError, approx_tokens
from slimcache.langchain import CachedSummarizationMiddleware
from tests.langchain.test_middleware import (
    SYSTEM_PROMPT,
    ScriptedChatModel,
    answers,
    config,
    contents,
)

SUMMARY = "Summary of the earlier conversation:\n"


class FailsAfter(ScriptedChatModel):
    """Answers ``good`` calls from its responses, then fails as a server that went away does."""

    good: int = 1

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if len(self.seen) >= self.good:
            self.seen.append(list(messages))
            raise ConnectionError("the summarizing model went away")
        return super()._generate(messages, stop, run_manager, **kwargs)


def always_cut() -> ScriptedChatModel:
    """Every reply stops at the model's limit, as ``finish_reason="length"`` says."""
    cut = {"finish_reason": "length"}
    return ScriptedChatModel(
        responses=[AIMessage(f"cut summary {n}", response_metadata=cut) for n in range(1, 50)]
    )


def agent_with(summarizing: ScriptedChatModel, **options: Any) -> tuple[Any, Any, Any]:
    """A seven-turn agent (trigger 7, keep 3): its model, its middleware, the agent."""
    agent_model = answers(7)
    middleware = CachedSummarizationMiddleware(
        summarizing, MemoryStore(), trigger=("messages", 7), keep=("messages", 3), **options
    )
    agent = create_agent(
        agent_model, system_prompt=SYSTEM_PROMPT, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    return agent_model, middleware, agent


def seven_turns(agent: Any, thread: str = "trip") -> None:
    for turn in range(7):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config(thread))


def test_a_failing_summarizer_serves_the_previous_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent_model, middleware, agent = agent_with(FailsAfter(responses=[AIMessage("summary 1")]))
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        seven_turns(agent)  # every turn is answered
    summary_1 = f"{SYSTEM_PROMPT}\n\n{SUMMARY}summary 1"
    # Turn 5 would extend the summary: the model gets summary 1 and every message after it.
    assert contents(agent_model.seen[5]) == [
        summary_1, "question 2", "answer 2", "question 3", "answer 3", "question 4", "answer 4",
        "question 5",
    ]  # fmt: skip
    assert contents(agent_model.seen[6])[0] == summary_1
    assert len(agent_model.seen[6]) == 10
    stats = middleware.stats
    assert (stats.requests, stats.summarizer_errors) == (7, 2)
    assert stats.cache_hits == 1 + 2  # turn 4, then turns 5 and 6 served after the failure
    assert "the model gets the newest cached summary" in caplog.text
    assert "went away" in caplog.text


def test_a_failure_before_anything_is_cached_sends_the_messages_as_they_are() -> None:
    agent_model, middleware, agent = agent_with(FailsAfter(responses=[], good=0))
    agent.invoke({"messages": [HumanMessage("hello")]}, config("t"))
    history = [HumanMessage(f"m{i}") if i % 2 == 0 else AIMessage(f"m{i}") for i in range(9)]
    agent.invoke({"messages": history}, config("t"))
    assert contents(agent_model.seen[1]) == [SYSTEM_PROMPT, "hello", "answer 0"] + [
        f"m{i}" for i in range(9)
    ]
    assert middleware.stats.summarizer_errors == 1


@pytest.mark.parametrize("choice", ["raise", "uncompressed"])
def test_the_other_choices_on_a_failure(choice: str) -> None:
    agent_model, middleware, agent = agent_with(
        FailsAfter(responses=[AIMessage("summary 1")]), on_summarizer_error=choice
    )
    for turn in range(5):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config("t"))
    if choice == "raise":
        with pytest.raises(SummarizerError, match="went away"):
            agent.invoke({"messages": [HumanMessage("question 5")]}, config("t"))
    else:
        agent.invoke({"messages": [HumanMessage("question 5")]}, config("t"))
        assert len(agent_model.seen[5]) == 1 + 11  # the system prompt and every message
        assert middleware.stats.summarizer_errors == 1


def test_a_model_that_cuts_every_reply_keeps_the_agent_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summaries = always_cut()
    agent_model, middleware, agent = agent_with(summaries)
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        seven_turns(agent)
    # Each summary was asked for twice (cut, then cut again when asked for a shorter one) and
    # the first cut reply was kept: the retry was no better.
    assert contents(agent_model.seen[3])[0] == f"{SYSTEM_PROMPT}\n\n{SUMMARY}cut summary 1"
    assert contents(agent_model.seen[5])[0] == f"{SYSTEM_PROMPT}\n\n{SUMMARY}cut summary 3"
    assert len(summaries.seen) == 4
    stats = middleware.stats
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (4, 2, 2)
    assert stats.summarizer_errors == 0
    assert "the model's or the server's own reply limit" in caplog.text


def test_cut_replies_refused_serve_the_previous_summary() -> None:
    agent_model, middleware, agent = agent_with(always_cut(), on_truncated="raise")
    seven_turns(agent)
    assert len(agent_model.seen[3]) == 1 + 7  # nothing cached: the messages as they are
    stats = middleware.stats
    assert (stats.truncated_accepted, stats.summarizer_errors) == (0, 4)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"on_summarizer_error": "skip"}, "on_summarizer_error must be 'degrade', 'uncompressed'"),
        ({"on_truncated": "keep"}, "on_truncated must be 'raise' or 'accept', got 'keep'"),
        ({"max_tokens_kwarg": "a.b.c"}, "max_tokens_kwarg must be a keyword"),
    ],
)
def test_wrong_choices_are_refused_when_built(arguments: dict[str, Any], message: str) -> None:
    from slimcache import ConfigurationError

    with pytest.raises(ConfigurationError, match=message):
        CachedSummarizationMiddleware(always_cut(), **arguments)


RAMBLING = "The trip is to Lisbon. Ada booked the flight for May 12. " * 200  # 2,850 tokens


def test_a_model_that_overshoots_every_time_keeps_the_agent_running() -> None:
    # Asked for 1,000 tokens (the default budget), it writes 2,850, and again when asked to
    # condense: the summary is cut to the budget at a sentence, counted, and served.
    summaries = ScriptedChatModel(responses=[AIMessage(RAMBLING) for _ in range(20)])
    agent_model, middleware, agent = agent_with(summaries, strategy="extend")
    seven_turns(agent)
    assert len(agent_model.seen) == 7
    system = str(agent_model.seen[5][0].content)
    summary = system.split(SUMMARY, 1)[1]
    assert summary.endswith("May 12.")
    assert 800 < approx_tokens(summary) <= 1000
    stats = middleware.stats
    assert (stats.condensed_over_budget, stats.cut_over_budget) == (2, 2)
    assert (stats.summarizer_calls, stats.summarizer_errors) == (4, 0)
