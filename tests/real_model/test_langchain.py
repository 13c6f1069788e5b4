"""``slimcache.langchain`` against a real model: the summarizer and the agent middleware."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from slimcache import KeepMessages, MemoryStore, MessageThreshold, SummarizeCompressor
from slimcache.langchain import (
    CachedSummarizationMiddleware,
    LangChainSummarizer,
    compress_langchain,
    to_langchain,
)
from tests.langchain.test_middleware import answers
from tests.real_model.conftest import RealModel
from tests.real_model.history import trip

pytestmark = pytest.mark.real_model


def chat_model(model: RealModel) -> ChatOpenAI:
    return ChatOpenAI(
        model=model.model, base_url=model.base_url, api_key=SecretStr(model.api_key), temperature=0
    )


async def test_the_summarizer_bounds_the_reply_through_the_body(real_model: RealModel) -> None:
    # ChatOpenAI sends max_tokens as max_completion_tokens, which llama-cpp-python's server ignores;
    # the budget in the body as max_tokens is what bounds (and cuts) the reply there.
    summarizer = LangChainSummarizer(
        chat_model(real_model), max_tokens_kwarg="extra_body.max_tokens", on_truncated="accept"
    )
    compressor = SummarizeCompressor(
        summarizer, MemoryStore(), trigger=MessageThreshold(8), keep=KeepMessages(3),
        max_summary_tokens=4,
    )  # fmt: skip
    out = await compress_langchain(compressor, to_langchain(trip(10)), thread_id="t")
    assert len(out) == 1 + 1 + 3
    stats = compressor.stats
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (2, 1, 1)

    again = await compress_langchain(compressor, to_langchain(trip(10)), thread_id="t")
    assert again[1].content == out[1].content
    assert compressor.stats.cache_hits == 1


def test_an_agent_keeps_running_with_the_default_settings(real_model: RealModel) -> None:
    agent_model = answers(6)
    middleware = CachedSummarizationMiddleware(
        chat_model(real_model),
        MemoryStore(),
        trigger=("messages", 6),
        keep=("messages", 2),
        max_summary_tokens=64,
        max_tokens_kwarg="extra_body.max_tokens",
    )
    agent = create_agent(agent_model, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "agent"}}
    for turn, message in enumerate(trip(6)[1::2]):  # the user's first three messages
        agent.invoke({"messages": [HumanMessage(f"{message['content']} ({turn})")]}, config)
    assert len(agent_model.seen) == 3
    for turn in range(3, 6):
        agent.invoke({"messages": [HumanMessage(f"and then? ({turn})")]}, config)
    assert len(agent_model.seen) == 6  # every turn answered
    stats = middleware.stats
    assert stats.summarizer_calls >= 1
    assert stats.cache_hits >= 1
    summarized = str(agent_model.seen[-1][0].content)
    assert summarized.startswith("Summary of the earlier conversation:")
