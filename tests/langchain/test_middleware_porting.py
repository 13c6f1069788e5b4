"""Porting from LangChain's ``SummarizationMiddleware`` is a rename: each of its keywords means
on ``CachedSummarizationMiddleware`` what it means there, in a real ``create_agent`` agent."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from slimcache import ConfigurationError, MemoryStore
from slimcache.langchain import CachedSummarizationMiddleware
from tests.langchain.test_middleware import (
    SYSTEM_PROMPT,
    ScriptedChatModel,
    answers,
    config,
    contents,
    summarizing_model,
)


def run_turns(middleware: CachedSummarizationMiddleware, turns: int, thread: str = "t") -> Any:
    """``turns`` questions through an agent with ``middleware``; its model."""
    agent_model = answers(turns)
    agent = create_agent(
        agent_model, system_prompt=SYSTEM_PROMPT, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config(thread))
    return agent_model


def test_every_keyword_of_langchains_middleware_is_taken() -> None:
    theirs = inspect.signature(SummarizationMiddleware.__init__).parameters
    ours = inspect.signature(CachedSummarizationMiddleware.__init__).parameters
    named = {name for name, p in theirs.items() if p.kind is not p.VAR_KEYWORD} - {"self"}
    assert named <= set(ours)
    assert {"summary_prompt", "trim_tokens_to_summarize", "summarizer"} <= named
    # The same arguments build both.
    arguments: dict[str, Any] = {
        "trigger": ("tokens", 3000),
        "keep": ("messages", 6),
        "token_counter": count_tokens_approximately,
        "summary_prompt": "Summarize this:\n{messages}",
        "trim_tokens_to_summarize": 4000,
        "summarizer": summarizing_model(),
    }
    SummarizationMiddleware(answers(1), **arguments)
    CachedSummarizationMiddleware(answers(1), **arguments)


def test_a_message_token_counter_counts_as_langchain_counts() -> None:
    # 12 short messages: below LangChain's count of them by a margin, so nothing is due.
    history = [HumanMessage(f"question {i}") if i % 2 == 0 else AIMessage(f"answer {i}")
               for i in range(12)]  # fmt: skip
    theirs = count_tokens_approximately([*history, HumanMessage(SYSTEM_PROMPT)])
    summaries = summarizing_model()
    middleware = CachedSummarizationMiddleware(
        summaries,
        MemoryStore(),
        trigger=("tokens", theirs + 30),
        keep=("messages", 4),
        token_counter=count_tokens_approximately,
    )
    run_turns(middleware, 6)  # 12 messages by the last turn's model call
    assert middleware.stats.summarizer_calls == 0  # counted as text it summarized every turn
    fires = CachedSummarizationMiddleware(
        summarizing_model(),
        MemoryStore(),
        trigger=("tokens", theirs // 2),
        keep=("messages", 4),
        token_counter=count_tokens_approximately,
    )
    run_turns(fires, 6)
    assert fires.stats.summarizer_calls >= 1


def test_summary_prompt_is_sent_with_the_messages_in_its_place() -> None:
    summaries = summarizing_model()
    middleware = CachedSummarizationMiddleware(
        summaries,
        MemoryStore(),
        trigger=("messages", 7),
        keep=("messages", 3),
        summary_prompt="Write the {{facts}} down.\n<messages>\n{messages}\n</messages>",
        strategy="extend",
    )
    agent_model = run_turns(middleware, 6)
    [sent, extended] = summaries.seen
    assert [type(message) for message in sent] == [HumanMessage]  # one message, as LangChain
    text = str(sent[0].content)
    assert text.startswith("Write the {facts} down.\n<messages>\n")
    assert "question 0" in text
    assert "answer 1" in text
    assert "question 2" not in text
    assert text.endswith("</messages>")
    # Extending: the previous summary is among what {messages} holds.
    assert "summary 1" in str(extended[0].content)
    assert "summary 2" in contents(agent_model.seen[5])[0]


def test_trim_tokens_to_summarize_bounds_each_summarizer_call() -> None:
    summaries = summarizing_model()
    middleware = CachedSummarizationMiddleware(
        summaries,
        MemoryStore(),
        trigger=("messages", 21),
        keep=("messages", 2),
        trim_tokens_to_summarize=700,
        max_summary_tokens=100,
    )
    long = "word " * 120  # about 150 tokens a message
    agent_model = answers(1)
    agent = create_agent(agent_model, middleware=[middleware])
    history: list[AnyMessage] = [HumanMessage(f"{i} {long}") for i in range(21)]
    agent.invoke({"messages": history}, config("trim"))
    # Nothing is dropped, as LangChain's trimming drops it: the rest is folded in further calls.
    assert len(summaries.seen) >= 3
    covered = " ".join(str(call[-1].content) for call in summaries.seen)
    assert all(f"{i} word" in covered for i in range(19))
    with pytest.raises(ConfigurationError, match="trim_tokens_to_summarize"):
        CachedSummarizationMiddleware(summaries, trim_tokens_to_summarize=0)
    # Room for the prompt, a previous summary and as much of messages (1,000 tokens by default).
    with pytest.raises(ConfigurationError, match=r"^trim_tokens_to_summarize must leave room"):
        CachedSummarizationMiddleware(summaries, trim_tokens_to_summarize=2000)


def test_summarizer_writes_the_summaries_in_place_of_model() -> None:
    model, writer = summarizing_model(), summarizing_model()
    middleware = CachedSummarizationMiddleware(
        model, MemoryStore(), trigger=("messages", 7), keep=("messages", 3), summarizer=writer
    )
    run_turns(middleware, 6)
    assert (len(model.seen), len(writer.seen)) == (0, 2)


def test_summarizer_may_be_a_function_of_the_messages() -> None:
    received: list[list[BaseMessage]] = []

    def summarize(messages: Sequence[BaseMessage]) -> str:
        received.append(list(messages))
        return f"{len(messages)} messages"

    middleware = CachedSummarizationMiddleware(
        answers(1), MemoryStore(), trigger=("messages", 7), keep=("messages", 3),
        summarizer=summarize, strategy="extend",
    )  # fmt: skip
    agent_model = run_turns(middleware, 6)
    first, extended = received
    assert contents(first) == ["question 0", "answer 0", "question 1", "answer 1"]
    # The previous summary comes first, as LangChain hands its own summary back.
    assert contents(extended)[0].endswith("4 messages")
    assert contents(extended)[1:] == ["question 2", "answer 2", "question 3", "answer 3"]
    assert contents(agent_model.seen[5])[0].endswith("5 messages")


def test_the_deprecated_keywords_warn_and_mean_what_they_meant() -> None:
    summaries = summarizing_model()
    with pytest.warns(DeprecationWarning, match=r"max_tokens_before_summary is deprecated"):
        middleware = CachedSummarizationMiddleware(
            summaries, MemoryStore(), max_tokens_before_summary=40, keep=("messages", 2)
        )
    with pytest.warns(DeprecationWarning, match=r"messages_to_keep is deprecated"):
        kept = CachedSummarizationMiddleware(
            summarizing_model(), MemoryStore(), trigger=("messages", 7), messages_to_keep=3
        )
    run_turns(middleware, 4)  # 40 tokens reached well before 50 messages
    assert middleware.stats.summarizer_calls >= 1
    agent_model = run_turns(kept, 4)
    assert (
        contents(agent_model.seen[3])[1:] == ["answer 2", "question 3"][-3:]
        or len(agent_model.seen[3]) == 1 + 3
    )
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_tokens_befor'"):
        CachedSummarizationMiddleware(summaries, max_tokens_befor=40)


def test_trigger_none_never_summarizes_as_in_langchain() -> None:
    middleware = CachedSummarizationMiddleware(summarizing_model(), MemoryStore(), trigger=None)
    agent_model = run_turns(middleware, 6)
    assert middleware.stats.summarizer_calls == 0
    assert len(agent_model.seen[5]) == 1 + 11


def test_the_summary_call_is_retried_as_langchain_retries_it() -> None:
    # The summarizing model fails once (a dropped connection), then answers.
    summaries = _FailsOnce(responses=[AIMessage("summary 1")])
    middleware = CachedSummarizationMiddleware(
        summaries, MemoryStore(), trigger=("messages", 7), keep=("messages", 3)
    )
    agent_model = run_turns(middleware, 4)
    assert len(summaries.seen) == 2
    assert middleware.stats.summarizer_errors == 0
    assert "summary 1" in contents(agent_model.seen[3])[0]


class _FailsOnce(ScriptedChatModel):
    """Fails its first call as a dropped connection does, then answers."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if not self.seen:
            self.seen.append(list(messages))
            raise ConnectionError("connection reset")
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"summary_prompt": "Summarize."}, "must hold {messages}"),
        ({"summary_prompt": "Summarize {transcript}: {messages}"}, "only placeholder"),
        ({"summary_prompt": "{messages}", "prompts": object()}, "not both"),
        ({"token_counter": 42}, "token_counter must count"),
        ({"summarizer": 42}, "summarizer must be"),
    ],
)
def test_wrong_porting_arguments_are_refused(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CachedSummarizationMiddleware(summarizing_model(), **arguments)
