"""The agent integrations against a real model, with slimcache's default settings.

Each agent's own model is the test's (it answers with the trip's next line); the summaries are
written by the real model, through the chat model each framework uses by default for an
OpenAI-compatible server: LangChain's ``ChatOpenAI``, Pydantic AI's ``OpenAIChatModel`` and the
Agents SDK's ``OpenAIChatCompletionsModel``. An event hook on the HTTP client given to each
(``httpx2``, the ``openai`` SDK's) records every request the summarizer sent and the usage of
every reply, so the test can say that each request carried a bound and that no reply went past
it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner
from agents.items import ModelResponse as AgentsResponse
from agents.models.interface import Model as AgentsModel
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.testing import assistant_message
from agents.usage import Usage
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from openai import AsyncOpenAI
from pydantic import SecretStr
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import slimcache.sync
from slimcache import MemoryStore, Stats
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.langchain import CachedSummarizationMiddleware
from slimcache.openai_agents import CachedSummarizationFilter
from slimcache.pydantic_ai import CachedSummarization
from tests.langchain.test_middleware import ScriptedChatModel
from tests.real_model.conftest import RealModel
from tests.real_model.history import trip

pytestmark = pytest.mark.real_model

# The agents' default trigger (50 messages, keep 20) is reached on the 26th turn and again on
# the 41st: the summary is made, served from the cache, then extended.
TURNS = 42
BUDGET = DEFAULTS.max_summary_tokens
CONVERSATION = trip(2 * TURNS)
QUESTIONS = [m["content"] for m in CONVERSATION[1::2]]
ANSWERS = [m["content"] for m in CONVERSATION[2::2]]


@dataclass
class Wire:
    """What went over one HTTP client: each chat request's body and each reply's usage."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    usages: list[dict[str, Any]] = field(default_factory=list)

    def sync_client(self) -> httpx2.Client:
        return httpx2.Client(
            event_hooks={"request": [self._sent], "response": [self._read]}, timeout=600
        )

    def async_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            event_hooks={"request": [self._sent_async], "response": [self._read_async]},
            timeout=600,
        )

    def _sent(self, request: httpx2.Request) -> None:
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))

    def _read(self, response: httpx2.Response) -> None:
        if response.request.url.path.endswith("/chat/completions"):
            response.read()
            self._usage(response)

    async def _sent_async(self, request: httpx2.Request) -> None:
        self._sent(request)

    async def _read_async(self, response: httpx2.Response) -> None:
        if response.request.url.path.endswith("/chat/completions"):
            await response.aread()
            self._usage(response)

    def _usage(self, response: httpx2.Response) -> None:
        reply = response.json() if response.status_code == 200 else {}
        self.usages.append(reply.get("usage") or {})


async def summaries(store: MemoryStore) -> list[str]:
    """The summary keys the store holds."""
    keys, _ = await store.scan_keys("", count=1000)
    return [key for key in keys if ":summary:" in key]


def check_bounded(wire: Wire, stats: Stats) -> None:
    """Summaries were made and served, every request carried a bound as ``max_tokens``
    (which llama.cpp's servers read), and no reply spent more output tokens than its bound.

    A call may fail (a small model sometimes replies with no text): the agent goes on with the
    newest cached summary, and the failed call's request is counted like the others.
    """
    assert stats.summarizer_calls >= 1
    assert stats.misses + stats.extensions >= 1
    assert stats.cache_hits >= 1
    assert len(wire.bodies) == stats.summarizer_requests
    bounds = [body.get("max_tokens") for body in wire.bodies]
    # The tree gives a part's summary its share of the budget: at most the whole of it.
    assert all(isinstance(bound, int) and 0 < bound <= BUDGET for bound in bounds), bounds
    assert len(wire.usages) == len(bounds)
    spent = [usage["completion_tokens"] for usage in wire.usages]
    assert all(tokens <= bound for tokens, bound in zip(spent, bounds, strict=True)), spent
    # The figures, shown with pytest -rP.
    print(f"{stats.summarizer_calls} summarizer calls ({stats.summarizer_errors} failed), "
          f"{stats.summarizer_requests} requests;")  # fmt: skip
    print(f"bounds {bounds}, completion tokens {spent}; {stats.cache_hits} cache hits")


# ---------------------------------------------------------------------------- LangChain


def test_langchain_middleware_over_a_default_chat_openai(real_model: RealModel) -> None:
    wire = Wire()
    summarizer = ChatOpenAI(
        model=real_model.model,
        base_url=real_model.base_url,
        api_key=SecretStr(real_model.api_key),
        http_client=wire.sync_client(),
        http_async_client=wire.async_client(),
    )
    store = MemoryStore()
    middleware = CachedSummarizationMiddleware(summarizer, store)
    agent_model = ScriptedChatModel(responses=[AIMessage(text) for text in ANSWERS])
    agent = create_agent(agent_model, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    for question in QUESTIONS:
        agent.invoke({"messages": [HumanMessage(question)]}, config)
    assert len(agent_model.seen) == TURNS  # every turn answered
    assert str(agent_model.seen[-1][0].content).startswith("Summary of the earlier conversation:")
    check_bounded(wire, middleware.stats)
    assert slimcache.sync.run(summaries(store))


# ---------------------------------------------------------------------------- Pydantic AI


async def test_pydantic_ai_capability_over_a_default_openai_chat_model(
    real_model: RealModel,
) -> None:
    wire, store = Wire(), MemoryStore()
    async with wire.async_client() as client:
        provider = OpenAIProvider(
            base_url=real_model.base_url, api_key=real_model.api_key, http_client=client
        )
        capability = CachedSummarization(
            OpenAIChatModel(real_model.model, provider=provider), store
        )
        seen: list[list[ModelMessage]] = []

        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append(list(messages))
            return ModelResponse(parts=[TextPart(ANSWERS[len(seen) - 1])])

        agent = Agent(FunctionModel(answer), system_prompt="You plan trips.",
                      capabilities=[capability])  # fmt: skip
        history: list[ModelMessage] = []
        for question in QUESTIONS:
            result = await agent.run(question, message_history=history, conversation_id="trip")
            history = result.all_messages()
    assert len(seen) == TURNS
    assert len(history) == 2 * TURNS  # the run's history keeps every message
    assert len(seen[-1]) < len(history)  # the model was sent the summary, not everything
    check_bounded(wire, capability.stats)
    assert await summaries(store)


# ---------------------------------------------------------------------------- Agents SDK


class TripAnswers(AgentsModel):
    """The agent's model: the trip's next answer."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any,
                           **kwargs: Any) -> AgentsResponse:  # fmt: skip
        self.seen.append(list(input) if isinstance(input, list) else [input])
        n = len(self.seen)
        output = [assistant_message(ANSWERS[n - 1], item_id=f"msg-{n}")]
        return AgentsResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


async def test_agents_filter_over_openai_chat_completions_model(real_model: RealModel) -> None:
    wire, store = Wire(), MemoryStore()
    async with wire.async_client() as client:
        openai_client = AsyncOpenAI(
            base_url=real_model.base_url, api_key=real_model.api_key, http_client=client
        )
        summarize = CachedSummarizationFilter(
            OpenAIChatCompletionsModel(real_model.model, openai_client),
            store,
            thread_id="trip",
        )
        answers = TripAnswers()
        agent = AgentsAgent("planner", instructions="You plan trips.", model=answers)
        run_config = RunConfig(call_model_input_filter=summarize, tracing_disabled=True)
        history: list[Any] = []
        for question in QUESTIONS:
            result = await Runner.run(
                agent, [*history, {"role": "user", "content": question}], run_config=run_config
            )
            history = result.to_input_list()
    assert len(answers.seen) == TURNS
    assert len(history) == 2 * TURNS
    assert len(answers.seen[-1]) < len(history)
    check_bounded(wire, summarize.stats)
    assert await summaries(store)
