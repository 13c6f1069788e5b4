"""The summary's budget reaches the server in the field it obeys, from every integration.

A local chat API that obeys only ``max_tokens`` (as llama.cpp's server) and one that refuses it
(as OpenAI's reasoning models, HTTP 400) and obeys only ``max_completion_tokens``; the
summarizers are the ones each integration makes of a default model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI
from pydantic import SecretStr
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from slimcache import Summarizer, SummaryContext
from slimcache.core.limit_field import refuses_max_tokens
from slimcache.langchain._porting import summary_writer
from slimcache.llm import OpenAISummarizer
from slimcache.openai_agents import AgentsSummarizer
from slimcache.pydantic_ai import PydanticAISummarizer
from tests.fakes import chat
from tests.servers.llm_server import OPENAI_PATH, LLMServer, count_tokens

BUDGET = 40
RAMBLING = "The trip is to Lisbon in May, and then it is not. " * 40  # far over the budget


def _llm(server: LLMServer, client: AsyncOpenAI) -> Summarizer:
    return OpenAISummarizer("tiny", client=client, on_truncated="accept")


def _langchain(server: LLMServer, client: AsyncOpenAI) -> Summarizer:
    # What the middleware makes of a default ChatOpenAI.
    model = ChatOpenAI(model="tiny", base_url=server.openai_base_url, api_key=SecretStr("k"))
    return summary_writer(model, None, None, "accept", None)


def _pydantic_ai(server: LLMServer, client: AsyncOpenAI) -> Summarizer:
    return PydanticAISummarizer(
        OpenAIChatModel("tiny", provider=OpenAIProvider(openai_client=client))
    )


def _agents(server: LLMServer, client: AsyncOpenAI) -> Summarizer:
    return AgentsSummarizer(OpenAIChatCompletionsModel(model="tiny", openai_client=client))


INTEGRATIONS: dict[str, Callable[[LLMServer, AsyncOpenAI], Summarizer]] = {
    "llm": _llm,
    "langchain": _langchain,
    "pydantic_ai": _pydantic_ai,
    "agents": _agents,
}


def context() -> SummaryContext:
    return SummaryContext(
        "summarize", None, BUDGET, f"Summarize in at most {BUDGET} tokens.", "t", 0, 5
    )


async def summarize(summarizer: Summarizer) -> tuple[str, SummaryContext]:
    ctx = context()
    summary = summarizer(chat(6), ctx)
    assert not isinstance(summary, str)
    return await summary, ctx


@pytest.mark.parametrize("integration", INTEGRATIONS)
async def test_a_server_that_obeys_only_max_tokens_gets_it_every_time(
    llm_server: LLMServer, client: AsyncOpenAI, integration: str
) -> None:
    llm_server.limit_fields = ("max_tokens",)
    llm_server.text = lambda path, body: RAMBLING
    summarizer = INTEGRATIONS[integration](llm_server, client)
    summary, ctx = await summarize(summarizer)
    assert count_tokens(summary) <= BUDGET  # the server cut it at the budget
    bodies = llm_server.bodies(OPENAI_PATH)
    assert len(bodies) == 2 == ctx.report.requests  # cut, then asked for shorter: cut again
    assert [body.get("max_tokens") for body in bodies] == [BUDGET, BUDGET]
    assert not any("max_completion_tokens" in body for body in bodies)


@pytest.mark.parametrize("integration", INTEGRATIONS)
async def test_a_server_that_refuses_max_tokens_gets_max_completion_tokens_from_then_on(
    llm_server: LLMServer, client: AsyncOpenAI, integration: str
) -> None:
    llm_server.refused_fields = ("max_tokens",)
    llm_server.limit_fields = ("max_completion_tokens",)
    llm_server.text = lambda path, body: "The trip is to Lisbon."
    summarizer = INTEGRATIONS[integration](llm_server, client)
    first, ctx = await summarize(summarizer)
    assert first == "The trip is to Lisbon."
    assert ctx.report.requests == 2  # refused once, then sent again
    again, ctx = await summarize(summarizer)
    assert again == first
    assert ctx.report.requests == 1  # remembered
    refused, *bodies = llm_server.bodies(OPENAI_PATH)
    assert refused.get("max_tokens") == BUDGET
    assert [body.get("max_completion_tokens") for body in bodies] == [BUDGET, BUDGET]
    assert not any("max_tokens" in body for body in bodies)


async def test_a_field_the_user_chose_is_kept(llm_server: LLMServer, client: AsyncOpenAI) -> None:
    llm_server.refused_fields = ("max_tokens",)
    chosen = OpenAISummarizer("tiny", client=client, token_limit="max_tokens")
    with pytest.raises(openai.BadRequestError) as caught:
        await summarize(chosen)
    assert refuses_max_tokens(caught.value)
    assert len(llm_server.bodies()) == 1  # not sent again in the other field
    # A ChatOpenAI with its own limit sends that one, as it does itself.
    own = ChatOpenAI(
        model="tiny",
        base_url=llm_server.openai_base_url,
        api_key=SecretStr("k"),
        max_completion_tokens=30,
    )
    llm_server.refused_fields = ()
    await summarize(summary_writer(own, None, None, "accept", None))
    body: dict[str, Any] = llm_server.bodies()[-1]
    assert (body.get("max_completion_tokens"), "max_tokens" in body) == (30, False)


def test_only_a_400_naming_max_tokens_is_a_refusal() -> None:
    class Refused(Exception):
        status_code = 400

    assert refuses_max_tokens(Refused("Unsupported parameter: 'max_tokens' is not supported"))
    assert not refuses_max_tokens(Refused("request (5000 tokens) exceeds the context size"))
    assert not refuses_max_tokens(Exception("max_tokens is not supported"))  # no status
    wrapped = RuntimeError("the model failed")
    wrapped.__cause__ = Refused("'max_tokens' ... use 'max_completion_tokens' instead")
    assert refuses_max_tokens(wrapped)
