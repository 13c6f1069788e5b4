"""A slimcache summarizer in LangChain's own SummarizationMiddleware, and LangChain's counters."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from slimcache import ConfigurationError, Store, SummarizeCompressor, cached_summarizer
from slimcache.langchain import as_langchain_summarizer, as_token_counter
from tests.fakes import RecordingSummarizer
from tests.langchain.test_middleware import answers, config

TAKES_SUMMARIZER = "summarizer" in inspect.signature(SummarizationMiddleware).parameters
needs_summarizer_parameter = pytest.mark.skipif(
    not TAKES_SUMMARIZER,
    reason="this LangChain's SummarizationMiddleware has no summarizer parameter",
)
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


def history(count: int) -> list[BaseMessage]:
    return [(HumanMessage, AIMessage)[i % 2](f"message {i}") for i in range(count)]


def langchain_middleware(summarizer: Any) -> SummarizationMiddleware:
    return SummarizationMiddleware(
        FakeListChatModel(responses=["never asked"]),
        trigger=("messages", 5),
        keep=("messages", 2),
        summarizer=summarizer,
    )


@needs_summarizer_parameter
def test_a_slimcache_summarizer_in_langchains_middleware() -> None:
    summarizer = RecordingSummarizer()
    middleware = langchain_middleware(as_langchain_summarizer(summarizer, max_summary_tokens=80))
    agent = create_agent(answers(1), middleware=[middleware])
    state = agent.invoke({"messages": history(5)}, config("lc"))
    [call] = summarizer.calls
    assert [m["content"] for m in call.messages] == ["message 0", "message 1", "message 2"]
    assert (call.context.task, call.context.thread_id, call.context.max_tokens) == (
        "summarize",
        "lc",
        80,
    )
    assert "at most 80 tokens" in call.context.prompt.lower()
    assert state["messages"][0].content == SUMMARY_PREFIX + "summarize[0-2]"


@needs_summarizer_parameter
async def test_a_slimcache_summarizer_in_langchains_middleware_async() -> None:
    summarizer = RecordingSummarizer()
    agent = create_agent(
        answers(1), middleware=[langchain_middleware(as_langchain_summarizer(summarizer))]
    )
    state = await agent.ainvoke({"messages": history(5)}, config("lc"))
    assert len(summarizer.calls) == 1
    assert state["messages"][0].content == SUMMARY_PREFIX + "summarize[0-2]"


@needs_summarizer_parameter
@pytest.mark.parametrize("name", ["memory", "redis"])
async def test_a_cached_summarize_function_serves_a_replay_from_the_store(
    name: str, open_sync_store: Callable[[str], Store]
) -> None:
    calls: list[list[str]] = []

    @cached_summarizer(open_sync_store(name))
    def summarize(messages: list[dict[str, Any]]) -> str:
        calls.append([m["content"] for m in messages])
        return f"{len(messages)} messages"

    adapter = as_langchain_summarizer(summarize)
    for attempt in range(2):  # two workers, or a run replayed: the same thread, the same messages
        agent = create_agent(answers(1), middleware=[langchain_middleware(adapter)])
        if attempt == 0 or sys.version_info < (3, 11):
            # Before 3.11, LangChain cannot hand the run's config (and its thread id) to the
            # summarizer it calls inside ainvoke: the replay runs through invoke there.
            state = agent.invoke({"messages": history(5)}, config("replay"))
        else:
            state = await agent.ainvoke({"messages": history(5)}, config("replay"))
        assert state["messages"][0].content == SUMMARY_PREFIX + "3 messages"
    assert calls == [["message 0", "message 1", "message 2"]]
    assert summarize.stats.cache_hits == 1


def test_as_langchain_summarizer_checks_its_arguments() -> None:
    with pytest.raises(ConfigurationError, match="summarizer must be a callable"):
        as_langchain_summarizer("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_summary_tokens"):
        as_langchain_summarizer(RecordingSummarizer(), max_summary_tokens=0)


# ---------------------------------------------------------------------- token counters


class WordCountingModel(FakeListChatModel):
    """A chat model whose tokenizer counts words."""

    def get_num_tokens(self, text: str) -> int:
        return len(text.split())


def test_a_langchain_message_counter_counts_texts() -> None:
    count = as_token_counter(count_tokens_approximately)
    assert count("") == 0
    assert count("x" * 400) == 100
    assert count("x" * 401) == count_tokens_approximately([HumanMessage("x" * 401)]) - (
        count_tokens_approximately([HumanMessage("")])
    )


async def test_a_models_counter_is_the_compressors_token_counter() -> None:
    count = as_token_counter(WordCountingModel(responses=["x"]))
    assert count("one two three") == 3
    summarizer = RecordingSummarizer()
    compressor = SummarizeCompressor(summarizer, token_counter=count, message_overhead=0)
    long = [{"role": "user", "content": "word " * 600}, {"role": "assistant", "content": "ok"}]
    result = await compressor.compress_detailed(long * 11, thread_id="words")
    # The first 12 messages summarized: 600 words per long one by the model's count (not 750
    # by ceil(len / 4)), 1 per "ok", and the prompt's words.
    assert result.summary_range == (0, 11)
    assert compressor.stats.naive_input_tokens == 600 * 6 + 6 + count(
        compressor._derived.prompts.summarize.replace("{max_tokens}", "1000")
    )


def test_as_token_counter_refuses_what_is_not_a_counter() -> None:
    with pytest.raises(ConfigurationError, match="message token counter"):
        as_token_counter("tiktoken")
