"""CachedSummarization in real Pydantic AI agents, sync, async and streamed, on real stores.

The agent's model is Pydantic AI's own ``FunctionModel``, recording what it was sent; each turn
is a stateless request: the history comes in as JSON, as a server behind a load balancer gets
it, and the store is a real one, so the cache is the real cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import subprocess
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import slimcache.sync
from slimcache import ConfigurationError, MemoryStore, Store, SummaryContext
from slimcache.pydantic_ai import CachedSummarization, PydanticAISummarizer
from tests.fakes import RecordingSummarizer

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PROMPT = "You plan trips."
QUESTIONS = ["Lisbon in May?", "Weather?", "Hotels?", "Trams?", "Food?", "Weather again?"]


class Planner:
    """The agent's model: answers, and calls the weather tool when asked about the weather."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart) and "Weather" in str(last.content):
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Lisbon"})])
        return ModelResponse(parts=[TextPart(f"answer {len(self.seen)}")])


def make_agent(capability: Any) -> tuple[Agent[None, str], Planner]:
    planner = Planner()
    agent = Agent(FunctionModel(planner), system_prompt=SYSTEM_PROMPT, capabilities=[capability])

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"22C in {city}"

    return agent, planner


def summarize_past(summarizer: Any, store: Store | str | None) -> CachedSummarization:
    return CachedSummarization(summarizer, store, trigger=("messages", 6), keep=("messages", 3))


def stateless(history: list[ModelMessage]) -> list[ModelMessage]:
    """The history as the next request brings it: JSON, loaded again."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))


def texts(messages: list[ModelMessage]) -> list[str]:
    return [str(getattr(part, "content", "")) for message in messages for part in message.parts]


def check_calls_answered(messages: list[ModelMessage]) -> None:
    """Every tool return the model is sent answers a call of the response just before it."""
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                before = messages[index - 1]
                assert isinstance(before, ModelResponse)
                assert part.tool_call_id in {
                    p.tool_call_id for p in before.parts if isinstance(p, ToolCallPart)
                }


@pytest.fixture(params=["memory", "redis", "sqlite"])
def store(request: pytest.FixtureRequest, open_sync_store: Callable[[str], Store]) -> Store:
    return open_sync_store(request.param)


def check_what_was_sent(planner: Planner, summarizer: RecordingSummarizer) -> None:
    last = planner.seen[-1]
    assert isinstance(last[0], ModelRequest)
    assert isinstance(last[0].parts[0], SystemPromptPart)
    assert last[0].parts[0].content == SYSTEM_PROMPT
    assert isinstance(last[0].parts[1], SystemPromptPart)
    assert last[0].parts[1].content.startswith("Summary of the earlier conversation:\n")
    assert "Lisbon in May?" not in texts(last)
    assert texts(last)[-1] == "22C in Lisbon"  # the tool's return, with its call before it
    for seen in planner.seen:
        check_calls_answered(seen)
    # The summarizer got the older messages: the question, the tool call and its return.
    sent = [message for call in summarizer.calls for message in call.messages]
    assert sent[0] == {"role": "user", "content": "Lisbon in May?"}
    assert any(m["role"] == "tool" and m["content"] == "22C in Lisbon" for m in sent)


def test_run_sync_statelessly_and_a_second_worker_from_the_cache(store: Store) -> None:
    summarizer = RecordingSummarizer()
    capability = summarize_past(summarizer, store)
    agent, planner = make_agent(capability)
    history: list[ModelMessage] = []
    for question in QUESTIONS:
        result = agent.run_sync(
            question, message_history=stateless(history), conversation_id="trip"
        )
        history = result.all_messages()
    assert len(history) == 16  # the run's history keeps every message
    assert texts(history)[0] == SYSTEM_PROMPT
    check_what_was_sent(planner, summarizer)
    stats = capability.stats
    assert stats.summarizer_calls == len(summarizer.calls) == 3
    assert stats.cache_hits >= 2

    # Another worker on the same store replays the last request: served from the cache.
    other_summarizer = RecordingSummarizer()
    other = summarize_past(other_summarizer, store)
    replica, replica_planner = make_agent(other)
    replica.run_sync(QUESTIONS[-1], message_history=stateless(history[:-4]), conversation_id="trip")
    assert other_summarizer.calls == []
    assert other.stats.cache_hits >= 1
    assert texts(replica_planner.seen[0]) == texts(planner.seen[-2])


async def test_run_async_statelessly(store: Store) -> None:
    summarizer = RecordingSummarizer()
    capability = summarize_past(summarizer, store)
    agent, planner = make_agent(capability)
    history: list[ModelMessage] = []
    for question in QUESTIONS:
        result = await agent.run(question, message_history=stateless(history), conversation_id="t")
        history = result.all_messages()
    assert len(history) == 16
    check_what_was_sent(planner, summarizer)
    # The same capability from sync code afterwards (on a thread of its own, as a sync
    # worker would be): the store is still usable.
    await asyncio.to_thread(
        agent.run_sync, "Thanks!", message_history=stateless(history), conversation_id="t"
    )
    assert capability.stats.requests == len(planner.seen)


async def test_run_stream(store: Store) -> None:
    summarizer = RecordingSummarizer()
    capability = summarize_past(summarizer, store)
    seen: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(list(messages))
        yield f"answer {len(seen)}"

    agent = Agent(
        FunctionModel(stream_function=stream),
        system_prompt=SYSTEM_PROMPT,
        capabilities=[capability],
    )
    history: list[ModelMessage] = []
    for question in ["a", "b", "c", "d"]:
        async with agent.run_stream(
            question, message_history=stateless(history), conversation_id="s"
        ) as streamed:
            assert (await streamed.get_output()).startswith("answer")
        history = streamed.all_messages()
    assert len(history) == 8
    assert len(summarizer.calls) == 1
    assert texts(seen[-1])[1].startswith("Summary of the earlier conversation:\n")
    assert texts(seen[-1])[-1] == "d"


def test_the_thread_is_the_conversation_id_unless_given() -> None:
    store = MemoryStore()
    agent, _ = make_agent(summarize_past(RecordingSummarizer(), store))
    history: list[ModelMessage] = []
    for question in ["a", "b", "c", "d"]:
        history = agent.run_sync(
            question, message_history=stateless(history), conversation_id="chat-7"
        ).all_messages()
    assert any("thread_chat-7:" in key for key in store._data)
    named = MemoryStore()
    agent, _ = make_agent(
        CachedSummarization(
            RecordingSummarizer(), named, trigger=("messages", 6), keep=("messages", 3),
            thread_id=lambda ctx: f"user-{ctx.conversation_id}",
        )
    )  # fmt: skip
    agent.run_sync("e", message_history=stateless(history), conversation_id="chat-7")
    assert any("thread_user-chat-7:" in key for key in named._data)


# ---------------------------------------------------------------------- every kind of part


def legacy_retry(text: str) -> Any:
    """A retry as older histories hold it (deprecated in Pydantic AI 2, still loaded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RetryPromptPart(text, tool_name=None)


def test_every_part_kind_is_summarized_or_kept() -> None:
    image = ImageUrl("https://example.com/tram.png")
    pdf = BinaryContent(b"%PDF-1.4", media_type="application/pdf")
    call = ToolCallPart("weather", {"city": "Lisbon"}, tool_call_id="w1")
    history: list[ModelMessage] = [
        ModelRequest([SystemPromptPart(SYSTEM_PROMPT), UserPromptPart(["Look:", image, pdf])],
                     instructions="Be brief."),
        ModelResponse([ThinkingPart("they want trams"), TextPart("Trams!"), call]),
        ModelRequest([ToolReturnPart("weather", "22C", tool_call_id="w1")]),
        ModelResponse([TextPart("It is warm.")]),
        ModelRequest([legacy_retry("say more")]),
        ModelResponse([TextPart("Warm and sunny.")]),
        ModelRequest([UserPromptPart("And hotels?")], instructions="Be brief."),
    ]  # fmt: skip
    summarizer = RecordingSummarizer()
    capability = CachedSummarization(summarizer, trigger=("messages", 6), keep=("messages", 3))
    planner = Planner()
    agent = Agent(FunctionModel(planner), capabilities=[capability])
    result = agent.run_sync(message_history=history, conversation_id="parts")
    sent = summarizer.calls[0].messages
    digest = hashlib.sha256(b"%PDF-1.4").hexdigest()
    assert sent[0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "https://example.com/tram.png"}},
        {"type": "file", "file": {"filename": pdf.identifier, "sha256": digest}},
    ]  # fmt: skip
    assert sent[1]["content"] == [{"type": "text", "text": "Trams!"}, {"type": "thinking"}]
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "weather", "arguments": '{"city":"Lisbon"}'
    }  # fmt: skip
    assert sent[2] == {"role": "tool", "tool_call_id": "w1", "content": "22C"}
    # The model gets the pinned system prompt and the summary, then what the summary does not
    # stand for: the retry (answering no call) and the rest.
    model_saw = planner.seen[0]
    assert texts(model_saw)[:2] == [SYSTEM_PROMPT, "Summary of the earlier conversation:\n"
                                    "summarize[1-4]"]  # fmt: skip
    assert "say more" in texts(model_saw)[2]
    assert texts(model_saw)[3:] == ["Warm and sunny.", "And hotels?"]
    # The run's history keeps every message and part, as given.
    kept = result.all_messages()
    assert len(kept) == len(history) + 1
    first = kept[0]
    assert isinstance(first, ModelRequest)
    prompt = first.parts[1]
    assert isinstance(prompt, UserPromptPart)
    assert prompt.content == ["Look:", image, pdf]
    assert first.instructions == "Be brief."
    assert kept[1].parts == history[1].parts


def test_works_as_a_plain_history_processor() -> None:
    summarizer = RecordingSummarizer()
    capability = summarize_past(summarizer, None)
    planner = Planner()
    agent = Agent(FunctionModel(planner), capabilities=[ProcessHistory(capability)])
    history: list[ModelMessage] = []
    for question in ["a", "b", "c", "d"]:
        history = agent.run_sync(
            question, message_history=history, conversation_id="p"
        ).all_messages()
    assert len(summarizer.calls) == 1
    assert texts(planner.seen[-1])[0].startswith("Summary of the earlier conversation:\n")


# ---------------------------------------------------------------------- a misbehaving model


def test_a_failing_summarizer_serves_the_last_summary_and_the_messages_since(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer()
    capability = summarize_past(summarizer, MemoryStore())
    agent, planner = make_agent(capability)
    history: list[ModelMessage] = []
    for question in ["a", "b", "c", "d"]:
        history = agent.run_sync(
            question, message_history=history, conversation_id="f"
        ).all_messages()
    first_summary = texts(planner.seen[-1])[1]
    summarizer.fail_with = RuntimeError("model down")
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        for question in ["e", "f"]:
            history = agent.run_sync(
                question, message_history=history, conversation_id="f"
            ).all_messages()
    assert "the summarizer failed" in caplog.text
    assert capability.stats.summarizer_errors >= 1
    last = texts(planner.seen[-1])
    assert last[1] == first_summary  # the previous summary, and every message since
    assert (
        last[2:] == texts(history[4:-1]) == ["c", "answer 3", "d", "answer 4", "e", "answer 5", "f"]
    )


def test_raise_when_asked() -> None:
    summarizer = RecordingSummarizer(fail_with=RuntimeError("model down"))
    capability = CachedSummarization(
        summarizer, trigger=("messages", 2), keep=("messages", 1), on_summarizer_error="raise"
    )
    agent, _ = make_agent(capability)
    with pytest.raises(Exception, match="model down"):
        agent.run_sync("a", message_history=[ModelRequest([UserPromptPart("x")]),
                                             ModelResponse([TextPart("y")])])  # fmt: skip


def test_a_pydantic_ai_model_summarizes_on_the_agents_event_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loops: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    async def write_summary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        loops.append((asyncio.get_running_loop(), threading.current_thread()))
        # The budget reached, twice: a cut summary, kept with a warning.
        return ModelResponse([TextPart("cut summary")], finish_reason="length")

    planner_loops: list[asyncio.AbstractEventLoop] = []

    async def planner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        planner_loops.append(asyncio.get_running_loop())
        return ModelResponse([TextPart("ok")])

    capability = CachedSummarization(
        FunctionModel(function=write_summary), trigger=("messages", 2), keep=("messages", 1)
    )
    agent = Agent(FunctionModel(planner), capabilities=[capability])
    history: list[ModelMessage] = [
        ModelRequest([UserPromptPart("x")]),
        ModelResponse([TextPart("y")]),
    ]

    async def run() -> None:
        with caplog.at_level(logging.WARNING, logger="slimcache"):
            await agent.run("z", message_history=history, conversation_id="loop")

    asyncio.run(run())
    assert len(loops) == 2  # asked once more for a shorter one
    assert {loop for loop, _ in loops} == set(planner_loops)
    assert {thread for _, thread in loops} == {threading.main_thread()}
    assert "cut at the budget" in caplog.text
    assert capability.stats.truncated_accepted == 1


async def test_the_summarizer_of_a_model_name_and_a_test_model() -> None:
    summarizer = PydanticAISummarizer(TestModel(custom_output_text="the summary"))
    context = SummaryContext(
        task="summarize", previous_summary=None, max_tokens=100, prompt="Summarize.",
        thread_id="t", start=0, end=0,
    )  # fmt: skip
    assert await summarizer([{"role": "user", "content": "hello"}], context) == "the summary"
    assert summarizer.name == "pydantic-ai:test"
    with pytest.raises(ConfigurationError, match="nonesuch"):
        PydanticAISummarizer("nonesuch:model")


# ---------------------------------------------------------------------- arguments and the store


def test_bad_arguments_raise_before_the_store_is_opened(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'never.db'}"
    for bad in (
        {"trigger": ("messages", 3), "keep": ("messages", 3)},
        {"trigger": ("minutes", 3)},
        {"summary_placement": "middle"},
        {"on_summarizer_error": "ignore"},
        {"thread_id": 42},
    ):
        with pytest.raises(ConfigurationError):
            CachedSummarization(RecordingSummarizer(), url, **bad)
    assert not (tmp_path / "never.db").exists()
    with pytest.raises(ConfigurationError, match="model must be"):
        CachedSummarization(42, None)  # type: ignore[arg-type]


def test_a_url_store_is_opened_and_closed_by_the_capability(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cache.db'}"
    capability = summarize_past(RecordingSummarizer(), url)
    agent, _ = make_agent(capability)
    agent.run_sync("a", conversation_id="u")
    capability.close()
    capability.close()  # once is enough
    assert (tmp_path / "cache.db").exists()
    given = MemoryStore()
    summarize_past(RecordingSummarizer(), given).close()  # a store given stays the caller's
    assert summarize_past(RecordingSummarizer(), given).store is given


def test_a_fraction_of_the_models_context_window() -> None:
    summarizer = RecordingSummarizer()
    capability = CachedSummarization(summarizer, trigger=("fraction", 0.5), keep=("messages", 1))
    planner = Planner()
    model = FunctionModel(planner, profile={"context_window": 100})
    agent = Agent(model, capabilities=[capability])
    agent.run_sync("x" * 400, message_history=[ModelRequest([UserPromptPart("y" * 400)]),
                                               ModelResponse([TextPart("z")])])  # fmt: skip
    assert len(summarizer.calls) == 1
    no_window = Agent(FunctionModel(planner), capabilities=[capability])
    with pytest.raises(ConfigurationError, match="context size"):
        no_window.run_sync("x", conversation_id="w")


def test_the_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pydantic_ai_agent.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "summarizer calls 1" in result.stdout
    guide = (ROOT / "docs" / "guides" / "pydantic-ai.md").read_text()
    assert '```python\n--8<-- "examples/pydantic_ai_agent.py"\n```' in guide


def test_background_refresh_answers_at_once_and_extends_behind_the_run(store: Store) -> None:
    summarizer = RecordingSummarizer()
    capability = CachedSummarization(
        summarizer,
        store,
        trigger=("messages", 6),
        keep=("messages", 3),
        refresh="background",
        ceiling=("messages", 40),
    )
    agent, planner = make_agent(capability)
    history: list[ModelMessage] = []
    for question in QUESTIONS:
        result = agent.run_sync(question, message_history=stateless(history), conversation_id="bg")
        history = result.all_messages()
        assert slimcache.sync.drain(timeout=30)
    stats = capability.stats
    assert stats.stale_served >= 1  # answered with what the cache had, the summary extended after
    assert stats.background_started >= 1
    assert stats.background_finished == stats.background_started
    assert stats.summarizer_calls == len(summarizer.calls) >= 1
    for seen in planner.seen:
        check_calls_answered(seen)
    # Once the refreshes drained, the same request again is a hit with no summarizer call.
    calls = len(summarizer.calls)
    agent.run_sync(QUESTIONS[-1], message_history=stateless(history[:-4]), conversation_id="bg")
    assert len(summarizer.calls) == calls
    assert capability.stats.cache_hits >= 1


def test_a_ceiling_at_the_trigger_is_refused_before_the_store_opens() -> None:
    with pytest.raises(ConfigurationError, match="ceiling"):
        CachedSummarization(
            RecordingSummarizer(),
            "memory://",
            trigger=("messages", 6),
            keep=("messages", 3),
            refresh="background",
            ceiling=("messages", 6),
        )


def test_a_model_that_overshoots_every_time_keeps_the_agent_running() -> None:
    # Asked for 60 tokens, it writes 600 every time, condense included: each summary is cut to
    # the budget at a sentence, counted, and the agent goes on.
    asked: list[list[ModelMessage]] = []

    def ramble(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append(messages)
        return ModelResponse([TextPart("The trip is to Lisbon in May. " * 80)])

    capability = CachedSummarization(
        FunctionModel(ramble), trigger=("messages", 2), keep=("messages", 1), max_summary_tokens=60
    )
    agent, planner = make_agent(capability)
    history: list[ModelMessage] = [
        ModelRequest([UserPromptPart("x")]),
        ModelResponse([TextPart("y")]),
    ]
    agent.run_sync("z", message_history=history, conversation_id="o")
    summary = texts(planner.seen[-1])[0].split("\n", 1)[1]  # a history brings no prompt
    assert summary.endswith("in May.")
    assert len(summary) <= 4 * 60
    assert (capability.stats.cut_over_budget, capability.stats.summarizer_errors) == (1, 0)
    assert len(asked) == 2  # the summary, then the condense call


def test_cut_replies_refused_when_asked_degrade_to_the_messages() -> None:
    def cut(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse([TextPart("cut summary")], finish_reason="length")

    capability = CachedSummarization(
        FunctionModel(cut), trigger=("messages", 2), keep=("messages", 1), on_truncated="raise"
    )
    agent, planner = make_agent(capability)
    history: list[ModelMessage] = [
        ModelRequest([UserPromptPart("x")]),
        ModelResponse([TextPart("y")]),
    ]
    agent.run_sync("z", message_history=history, conversation_id="c")  # it still answers
    assert texts(planner.seen[-1]) == ["x", "y", "z"]
    assert (capability.stats.truncated_replies, capability.stats.summarizer_errors) == (2, 1)
