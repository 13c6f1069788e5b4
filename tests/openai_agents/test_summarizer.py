"""An Agents SDK model as a summarizer, against a local chat API on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from slimcache import KeepMessages, MessageThreshold, SummarizeCompressor, SummarizerError
from slimcache.openai_agents import AgentsSummarizer
from tests.fakes import chat
from tests.servers.llm_server import LLMServer


@pytest.fixture
async def client(llm_server: LLMServer) -> AsyncIterator[AsyncOpenAI]:
    client = AsyncOpenAI(base_url=llm_server.openai_base_url, api_key="test-key")
    yield client
    await client.close()


def compressor(summarizer: AgentsSummarizer) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        "memory://",
        trigger=MessageThreshold(6),
        keep=KeepMessages(2),
        max_summary_tokens=40,
    )


async def test_a_reply_that_spends_its_whole_budget_is_asked_for_shorter(
    llm_server: LLMServer, client: AsyncOpenAI
) -> None:
    # The server cuts a reply longer than max_tokens there and reports the tokens it spent.
    llm_server.text = lambda path, body: "The trip is to Lisbon in May. " * 40
    model = OpenAIChatCompletionsModel(model="tiny", openai_client=client)
    accepting = compressor(AgentsSummarizer(model))
    await accepting.compress(chat(10), thread_id="t")
    stats = accepting.stats
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (2, 1, 1)
    assert [body["max_tokens"] for body in llm_server.bodies()] == [40, 40]

    refusing = compressor(AgentsSummarizer(model, on_truncated="raise"))
    with pytest.raises(SummarizerError, match="used all 40 output tokens"):
        await refusing.compress(chat(10), thread_id="u")


async def test_a_reply_within_its_budget_is_taken_at_once(
    llm_server: LLMServer, client: AsyncOpenAI
) -> None:
    model = OpenAIChatCompletionsModel(model="tiny", openai_client=client)
    summarizing = compressor(AgentsSummarizer(model))
    result = await summarizing.compress_detailed(chat(10), thread_id="t")
    assert result.summary_range is not None
    assert (summarizing.stats.truncated_replies, len(llm_server.bodies())) == (0, 1)
