"""A summarizing ``ChatOpenAI`` (or ``ChatAnthropic``) whose server answers HTTP 500 costs
CachedSummarizationMiddleware two calls of three requests each, then none for the breaker's
cool-down: its client retries a failed request, so LangChain's retries are not stacked on it.

The summarizer is a default ``ChatOpenAI`` (or ``ChatAnthropic``) against the local chat API;
each turn is a stateless request (a new middleware and agent, the whole conversation sent).
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from slimcache import MemoryStore, Stats
from slimcache.langchain import CachedSummarizationMiddleware
from tests.langchain.test_messages import chat_anthropic, chat_openai
from tests.langchain.test_middleware import SYSTEM_PROMPT, answers, config
from tests.servers.llm_server import ANTHROPIC_PATH, OPENAI_PATH, LLMServer, Reply

QUICK = {"retry-after-ms": "1"}


def history(turn: int) -> list[AnyMessage]:
    """The conversation a stateless client sends on ``turn``: every question and answer so far,
    and the new question."""
    sent: list[AnyMessage] = []
    for n in range(turn):
        sent += [HumanMessage(f"question {n}"), AIMessage(f"answer {n}")]
    return [*sent, HumanMessage(f"question {turn}")]


def turns(
    summarizing: BaseChatModel, store: MemoryStore, count: int, first: int = 4
) -> tuple[Stats, str]:
    """``count`` stateless requests past the trigger, a new middleware and agent for each: the
    middlewares' stats, and the system prompt the agent's model got on the last one."""
    total = Stats()
    system = ""
    for turn in range(first, first + count):
        middleware = CachedSummarizationMiddleware(
            summarizing, store, trigger=("messages", 7), keep=("messages", 3)
        )
        agent_model = answers(1)
        agent = create_agent(agent_model, system_prompt=SYSTEM_PROMPT, middleware=[middleware])
        result = agent.invoke({"messages": history(turn)}, config("t"))
        assert result["messages"][-1].content == "answer 0"  # the agent answered
        total.add(middleware.stats)
        system = str(agent_model.seen[0][0].content)
    return total, system


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_twelve_failing_turns_send_the_server_at_most_six_requests(
    llm_server: LLMServer, path: str
) -> None:
    llm_server.enqueue(*[Reply(500, headers=QUICK)] * 200)
    model = chat_openai(llm_server) if path == OPENAI_PATH else chat_anthropic(llm_server)
    stats, _ = turns(model, MemoryStore(), 12)
    assert len(llm_server.bodies(path)) <= 6
    assert len(llm_server.bodies(path)) == 6  # two calls, each tried three times by the client
    assert (stats.summarizer_calls, stats.summarizer_errors) == (2, 12)
    assert (stats.breaker_opened, stats.breaker_refused) == (1, 10)


def test_a_transient_500_is_retried_and_the_summary_written(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(500, headers=QUICK))
    stats, system = turns(chat_openai(llm_server), MemoryStore(), 1)
    assert len(llm_server.bodies(OPENAI_PATH)) == 2  # the 500, then the answer
    assert (stats.summarizer_calls, stats.summarizer_errors) == (1, 0)
    assert "openai summary of" in system


def test_a_client_that_does_not_retry_is_tried_three_times(llm_server: LLMServer) -> None:
    # ChatOpenAI(max_retries=0): LangChain's retries, as its middleware makes them.
    llm_server.enqueue(Reply(500, headers=QUICK), Reply(500, headers=QUICK))
    stats, system = turns(chat_openai(llm_server, max_retries=0), MemoryStore(), 1)
    assert len(llm_server.bodies(OPENAI_PATH)) == 3  # two 500s, then the answer
    assert (stats.summarizer_calls, stats.summarizer_errors) == (1, 0)
    assert "openai summary of" in system
