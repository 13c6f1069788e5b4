"""slimcache.langchain: conversions, compressing LangChain lists, a chat model as summarizer."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import Field, SecretStr

from slimcache import (
    ConfigurationError,
    InvalidInput,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    MissingExtraError,
    SummarizeCompressor,
    SummarizerError,
    TrimCompressor,
)
from slimcache._install import pip_install
from slimcache.core.summarizer import summarizer_name
from slimcache.core.truncation import shorter_prompt
from slimcache.langchain import (
    DEVELOPER_ROLE_KEY,
    LangChainSummarizer,
    compress_langchain,
    from_langchain,
    to_langchain,
)
from slimcache.messages import check_messages
from slimcache.stores import ThreadKeys
from tests.fakes import RecordingSummarizer
from tests.servers.llm_server import ANTHROPIC_PATH, OPENAI_PATH, LLMServer, system_text

ROOT = Path(__file__).resolve().parents[2]

RICH: list[dict[str, Any]] = [
    {"role": "system", "content": "You plan trips.", "id": "s1"},
    {"role": "developer", "content": "Answer in English."},
    {"role": "user", "content": "Weather in Paris and Rome?", "name": "ana", "metadata": {"n": 1}},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            # Odd spacing and an empty argument string must come back byte for byte.
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":  "Paris"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}},
        ],
        "id": "a1",
    },
    {"role": "tool", "content": "18C", "tool_call_id": "call_1", "name": "weather"},
    {"role": "tool", "content": [{"type": "text", "text": "09:00"}], "tool_call_id": "call_2"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Paris is 18C."},
            {"type": "refusal", "refusal": "No forecast for Rome."},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Here is my ticket"},
            {"type": "image_url", "image_url": {"url": "https://example.com/t.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": "Looking it up.",
        "tool_calls": [
            {
                "id": "call_3",
                "type": "function",
                "function": {"name": "ocr", "arguments": "{not json"},
            }
        ],
    },
    {"role": "tool", "content": "error: bad arguments", "tool_call_id": "call_3"},
]


def lc_conversation() -> list[BaseMessage]:
    """A LangChain history as an agent builds it: tool calls as parsed dicts, ids set."""
    return [
        SystemMessage("You plan trips.", id="m0"),
        HumanMessage("What's the weather in Lisbon?", id="m1"),
        AIMessage(
            "",
            tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "call_1"}],
            id="m2",
            response_metadata={"model_name": "gpt-x"},
        ),
        ToolMessage("22C, sunny", tool_call_id="call_1", id="m3", artifact={"raw": 22}),
        AIMessage("22C and sunny.", id="m4"),
        HumanMessage(["Book a table", {"type": "text", "text": "for two."}], id="m5"),
        AIMessage("Done, 8pm.", id="m6"),
        HumanMessage("Thanks. A taxi at 7:30?", id="m7"),
        AIMessage("Booked.", id="m8"),
        HumanMessage("What's the total?", id="m9"),
    ]


# ---------------------------------------------------------------- dicts -> LangChain -> dicts


def test_round_trip_of_dicts_is_exact() -> None:
    back = from_langchain(to_langchain(RICH))
    assert back == RICH
    assert check_messages(back).canonical == check_messages(RICH).canonical


def test_to_langchain_types_and_fields() -> None:
    converted = to_langchain(RICH)
    assert [type(m) for m in converted] == [
        SystemMessage,
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        AIMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
    ]
    system, developer, user, calls, result, _, _, image, bad_call, _ = converted
    assert system.id == "s1"
    assert DEVELOPER_ROLE_KEY not in system.additional_kwargs
    assert developer.additional_kwargs[DEVELOPER_ROLE_KEY] == "developer"
    assert user.name == "ana"
    assert user.additional_kwargs["metadata"] == {"n": 1}
    assert isinstance(calls, AIMessage)
    assert calls.content == ""
    assert [(c["name"], c["args"], c["id"]) for c in calls.tool_calls] == [
        ("weather", {"city": "Paris"}, "call_1"),
        ("now", {}, "call_2"),
    ]
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.name, result.content) == ("call_1", "weather", "18C")
    assert image.content == RICH[7]["content"]
    assert image.content is not RICH[7]["content"]  # copied, not shared
    assert isinstance(bad_call, AIMessage)
    assert bad_call.tool_calls == []
    [invalid] = bad_call.invalid_tool_calls
    assert (invalid["name"], invalid["args"], invalid["id"]) == ("ocr", "{not json", "call_3")


def test_human_role_and_integer_ids_normalize() -> None:
    messages = [{"role": "human", "content": "hi", "id": 7}]
    assert from_langchain(to_langchain(messages)) == [{"role": "user", "content": "hi", "id": "7"}]


def test_to_langchain_rejects_what_compress_rejects() -> None:
    with pytest.raises(InvalidInput) as caught:
        to_langchain([{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}])
    assert caught.value.index == 1
    with pytest.raises(InvalidInput, match="answers no tool call"):
        to_langchain([{"role": "tool", "content": "x", "tool_call_id": "nope"}])


# ---------------------------------------------------------------- LangChain -> dicts -> LangChain


def test_from_langchain_writes_openai_tool_calls() -> None:
    history = lc_conversation()
    assert from_langchain(history[2:6]) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
            "id": "m2",
        },
        {"role": "tool", "content": "22C, sunny", "tool_call_id": "call_1", "id": "m3"},
        {"role": "assistant", "content": "22C and sunny.", "id": "m4"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Book a table"},
                {"type": "text", "text": "for two."},
            ],
            "id": "m5",
        },
    ]


def test_round_trip_of_langchain_messages_keeps_what_matters() -> None:
    history = lc_conversation()
    back = to_langchain(from_langchain(history))
    assert [type(m) for m in back] == [type(m) for m in history]
    for before, after in zip(history, back, strict=True):
        assert after.id == before.id
        assert after.name == before.name
        if isinstance(before, HumanMessage) and isinstance(before.content, list):
            assert after.content == [{"type": "text", "text": "Book a table"}, before.content[1]]
        else:
            assert after.content == before.content
        if isinstance(before, AIMessage):
            assert isinstance(after, AIMessage)
            assert after.tool_calls == before.tool_calls
        if isinstance(before, ToolMessage):
            assert isinstance(after, ToolMessage)
            assert after.tool_call_id == before.tool_call_id
    # And once in dict form, the conversion is stable: same dicts, same fingerprints.
    assert from_langchain(back) == from_langchain(history)


def test_edited_tool_calls_win_over_the_kept_originals() -> None:
    [message] = to_langchain(RICH[3:4])
    assert isinstance(message, AIMessage)
    message.tool_calls[0]["args"] = {"city": "Lyon"}
    [back] = from_langchain([message])
    assert [c["function"]["arguments"] for c in back["tool_calls"]] == ['{"city": "Lyon"}', "{}"]


def test_from_langchain_chat_messages_and_unsupported_kinds() -> None:
    assert from_langchain([ChatMessage(role="ai", content="hi")]) == [
        {"role": "assistant", "content": "hi"}
    ]
    assert from_langchain([ChatMessage(role="developer", content="x")])[0]["role"] == "developer"
    for index, bad in enumerate(
        [
            ChatMessage(role="critic", content="x"),
            FunctionMessage(name="f", content="x"),
            RemoveMessage(id="m1"),
        ]
    ):
        with pytest.raises(InvalidInput) as caught:
            from_langchain([HumanMessage("ok")] * index + [bad])
        assert caught.value.index == index
    with pytest.raises(InvalidInput):
        from_langchain("not a list")  # type: ignore[arg-type]


def test_missing_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)
    hint = re.escape(pip_install("langchain"))
    with pytest.raises(MissingExtraError, match=hint):
        to_langchain([{"role": "user", "content": "hi"}])
    with pytest.raises(MissingExtraError, match=hint):
        from_langchain([])


# ---------------------------------------------------------------- compressing LangChain lists


def summarize_compressor(summarizer: Any, store: MemoryStore | None = None) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store or MemoryStore(),
        trigger=MessageThreshold(6),
        keep=KeepMessages(3),
        strategy="extend",
    )


async def test_compress_langchain_summarizes_and_keeps_the_objects() -> None:
    history = lc_conversation()
    recorder = RecordingSummarizer()
    compressor = summarize_compressor(recorder)
    out = await compress_langchain(compressor, history, thread_id="trip")

    [call] = recorder.calls
    assert (call.context.start, call.context.end) == (1, 6)
    assert call.messages == from_langchain(history[1:7])  # exactly the evicted messages
    assert out[0] is history[0]
    assert isinstance(out[1], SystemMessage)
    assert out[1].content == "Summary of the earlier conversation:\nsummarize[1-6]"
    assert all(a is b for a, b in zip(out[2:], history[7:], strict=True))
    assert len(out) == 2 + 3

    # The same request again is served from the store: no call, the same answer.
    again = await compress_langchain(compressor, history, thread_id="trip")
    assert len(recorder.calls) == 1
    assert [m.content for m in again] == [m.content for m in out]

    # More turns: only the new evicted messages are sent, with the previous summary.
    longer = [*history, *(HumanMessage(f"more {i}", id=f"n{i}") for i in range(4))]
    await compress_langchain(compressor, longer, thread_id="trip")
    assert len(recorder.calls) == 2
    assert recorder.calls[1].context.previous_summary == "summarize[1-6]"
    assert recorder.calls[1].messages == from_langchain(longer[7:11])


async def test_compress_langchain_never_splits_a_tool_call_from_its_result() -> None:
    history = [*lc_conversation()[:4], HumanMessage("x"), AIMessage("y"), HumanMessage("z")]
    recorder = RecordingSummarizer()
    compressor = SummarizeCompressor(
        recorder, MemoryStore(), trigger=MessageThreshold(5), keep=KeepMessages(4)
    )
    out = await compress_langchain(compressor, history, thread_id="t")
    [call] = recorder.calls
    assert [m["role"] for m in call.messages] == ["user"]  # the call and its result stay
    assert out[2] is history[2]
    assert out[3] is history[3]


async def test_compress_langchain_below_the_trigger_returns_the_list() -> None:
    history = lc_conversation()[:4]
    recorder = RecordingSummarizer()
    out = await compress_langchain(summarize_compressor(recorder), history, thread_id="t")
    assert out == history
    assert all(a is b for a, b in zip(out, history, strict=True))
    assert recorder.calls == []


async def test_compress_langchain_forced_and_without_thread() -> None:
    history = lc_conversation()[:5]
    recorder = RecordingSummarizer()
    out = await compress_langchain(summarize_compressor(recorder), history, force=True)
    assert len(recorder.calls) == 1
    assert out[0] is history[0]
    assert out[-1] is history[-1]
    assert isinstance(out[1], SystemMessage)
    assert "summarize[" in str(out[1].content)


async def test_compress_langchain_summarizer_failure() -> None:
    recorder = RecordingSummarizer(fail_with=RuntimeError("model down"))
    with pytest.raises(SummarizerError):
        await compress_langchain(summarize_compressor(recorder), lc_conversation(), thread_id="t")


@pytest.mark.parametrize("keep_system", [True, False])
async def test_compress_langchain_with_a_trim(keep_system: bool) -> None:
    history = lc_conversation()
    out = await compress_langchain(
        TrimCompressor(40, keep_system=keep_system), history, thread_id="t"
    )
    assert out[-1] is history[-1]
    assert (out[0] is history[0]) == keep_system
    assert all(any(m is h for h in history) for m in out)
    assert len(out) < len(history)
    assert not isinstance(out[1 if keep_system else 0], ToolMessage)
    untouched = await compress_langchain(TrimCompressor(10_000), history)
    assert all(a is b for a, b in zip(untouched, history, strict=True))
    assert len(untouched) == len(history)


async def test_compress_langchain_rejects_other_compressors() -> None:
    with pytest.raises(TypeError):
        await compress_langchain(object(), lc_conversation())  # type: ignore[arg-type]


# ---------------------------------------------------------------- a chat model as summarizer


class RecordingChatModel(BaseChatModel):
    """A LangChain chat model that records its input and answers from a list."""

    replies: list[str] = Field(default_factory=lambda: ["the summary"])
    received: list[list[BaseMessage]] = Field(default_factory=list)
    options: list[dict[str, Any]] = Field(default_factory=list)
    model_name: str = "recorder-1"

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        self.options.append(dict(kwargs))
        text = self.replies[min(len(self.received), len(self.replies)) - 1]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


async def test_langchain_summarizer_sends_prompt_and_transcript() -> None:
    model = RecordingChatModel()
    summarizer = LangChainSummarizer(model, max_tokens_kwarg="max_tokens")
    assert summarizer.name == "langchain:RecordingChatModel:recorder-1"
    assert (
        summarizer_name(summarizer) == "slimcache.langchain.langchain:RecordingChatModel:recorder-1"
    )
    compressor = SummarizeCompressor(
        summarizer,
        MemoryStore(),
        trigger=MessageThreshold(6),
        keep=KeepMessages(3),
        max_summary_tokens=55,
    )
    out = await compress_langchain(compressor, lc_conversation(), thread_id="t")
    [sent] = model.received
    assert [type(m) for m in sent] == [SystemMessage, HumanMessage]
    assert "at most 55 tokens" in str(sent[0].content).lower()
    assert "weather(" in str(sent[1].content)
    assert "22C, sunny" in str(sent[1].content)
    assert "Thanks. A taxi" not in str(sent[1].content)  # kept verbatim, not summarized
    assert model.options == [{"max_tokens": 55}]
    assert out[1].content == "Summary of the earlier conversation:\nthe summary"


async def test_langchain_summarizer_defaults_and_empty_reply() -> None:
    model = RecordingChatModel(replies=["  "])
    summarizer = LangChainSummarizer(model, name="my-model")
    assert summarizer.name == "my-model"
    with pytest.raises(SummarizerError):
        await compress_langchain(summarize_compressor(summarizer), lc_conversation(), thread_id="t")
    assert model.options == [{}]  # no budget keyword unless asked


# ---------------------------------------------------------------- a reply cut by the budget

# Real chat models (langchain-openai, langchain-anthropic) against the local server, which cuts
# a reply at the request's max_tokens and says so as OpenAI and Anthropic do.
LONG_SUMMARY = "The traveller asked about the weather, a table and a taxi. " * 40
SHORT_SUMMARY = "A trip to Lisbon: table at 8pm, taxi at 7:30."


def shorter_when_asked(path: str, body: dict[str, Any]) -> str:
    return SHORT_SUMMARY if "Write a shorter one" in system_text(path, body) else LONG_SUMMARY


def chat_openai(server: LLMServer, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="tiny", base_url=server.openai_base_url, api_key=SecretStr("k"), **options
    )


def chat_anthropic(server: LLMServer, **options: Any) -> ChatAnthropic:
    return ChatAnthropic(
        model_name="claude-tiny",
        base_url=server.anthropic_base_url,
        api_key=SecretStr("k"),
        **options,
    )


def budget_compressor(summarizer: LangChainSummarizer, store: MemoryStore) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(6),
        keep=KeepMessages(3),
        max_summary_tokens=55,
    )


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
async def test_langchain_cut_reply_is_asked_again_shorter(llm_server: LLMServer, path: str) -> None:
    llm_server.text = shorter_when_asked
    model = chat_openai(llm_server) if path == OPENAI_PATH else chat_anthropic(llm_server)
    summarizer = LangChainSummarizer(model, max_tokens_kwarg="max_tokens")
    store = MemoryStore()
    compressor = budget_compressor(summarizer, store)
    out = await compress_langchain(compressor, lc_conversation(), thread_id="t")
    assert out[1].content == f"Summary of the earlier conversation:\n{SHORT_SUMMARY}"
    first, retry = llm_server.bodies(path)
    prompt = system_text(path, first)
    assert "at most 55 tokens" in prompt.lower()
    assert system_text(path, retry) == shorter_prompt(prompt, 55)
    budget = "max_tokens" if path == ANTHROPIC_PATH else "max_completion_tokens"
    assert first[budget] == retry[budget] == 55
    stats = compressor.stats
    assert (stats.summarizer_calls, stats.truncated_replies, stats.shorter_retries) == (1, 1, 1)
    again = await compressor.compress_detailed(from_langchain(lc_conversation()), thread_id="t")
    assert (again.outcome, again.summary) == ("hit", SHORT_SUMMARY)


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
async def test_langchain_reply_cut_twice_raises_and_nothing_is_cached(
    llm_server: LLMServer, path: str
) -> None:
    llm_server.text = lambda path, body: LONG_SUMMARY
    # The budget is the model's own setting here: the reply's metadata still says it was cut.
    model = (
        chat_openai(llm_server, max_tokens=30)
        if path == OPENAI_PATH
        else chat_anthropic(llm_server, max_tokens=30)
    )
    store = MemoryStore()
    compressor = budget_compressor(LangChainSummarizer(model), store)
    with pytest.raises(SummarizerError) as caught:
        await compress_langchain(compressor, lc_conversation(), thread_id="t")
    reason = "finish_reason='length'" if path == OPENAI_PATH else "stop_reason='max_tokens'"
    assert reason in str(caught.value.__cause__)
    # The limit quoted is the one that cut the reply, not the summary's budget of 55.
    assert "cut at the model's own max_tokens of 30" in str(caught.value)
    assert "55" not in str(caught.value.__cause__)
    first, retry = llm_server.bodies(path)
    assert system_text(path, retry) == shorter_prompt(system_text(path, first), 55, 30)
    assert "at most 15 tokens" in system_text(path, retry).lower()
    assert await store.get(ThreadKeys("t").index) is None
    stats = compressor.stats
    assert (stats.truncated_replies, stats.shorter_retries, stats.summarizer_errors) == (2, 1, 1)


async def test_langchain_cut_reply_accepted_with_a_warning(
    llm_server: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.text = lambda path, body: LONG_SUMMARY
    summarizer = LangChainSummarizer(
        chat_openai(llm_server), max_tokens_kwarg="max_tokens", on_truncated="accept"
    )
    compressor = budget_compressor(summarizer, MemoryStore())
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        result = await compressor.compress_detailed(
            from_langchain(lc_conversation()), thread_id="t"
        )
    assert result.cached
    assert result.summary == LONG_SUMMARY[: 4 * 55].strip()
    assert compressor.stats.truncated_accepted == 1
    assert any("on_truncated='accept'" in r.getMessage() for r in caplog.records)


async def test_langchain_cut_reply_stays_when_its_retry_is_empty(llm_server: LLMServer) -> None:
    llm_server.text = lambda path, body: (
        "" if "Write a shorter one" in system_text(path, body) else LONG_SUMMARY
    )
    summarizer = LangChainSummarizer(
        chat_openai(llm_server), max_tokens_kwarg="max_tokens", on_truncated="accept"
    )
    compressor = budget_compressor(summarizer, MemoryStore())
    result = await compressor.compress_detailed(from_langchain(lc_conversation()), thread_id="t")
    assert (result.cached, result.summary) == (True, LONG_SUMMARY[: 4 * 55].strip())
    assert len(llm_server.bodies(OPENAI_PATH)) == 2
    stats = compressor.stats
    assert (stats.truncated_accepted, stats.summarizer_errors) == (1, 0)


def test_langchain_summarizer_rejects_a_bad_on_truncated() -> None:
    with pytest.raises(ConfigurationError, match="on_truncated"):
        LangChainSummarizer(RecordingChatModel(), on_truncated="drop")  # type: ignore[arg-type]
    for bad in ("", "extra_body.", "a.b.c", "max tokens", 3):
        with pytest.raises(ConfigurationError, match="max_tokens_kwarg must be a keyword"):
            LangChainSummarizer(RecordingChatModel(), max_tokens_kwarg=bad)  # type: ignore[arg-type]


async def test_langchain_budget_sent_as_max_tokens_in_the_body(llm_server: LLMServer) -> None:
    # ChatOpenAI sends max_tokens as max_completion_tokens, which servers reading only max_tokens
    # ignore: "extra_body.max_tokens" puts the budget in the body as max_tokens, beside the
    # model's own extra_body.
    llm_server.text = shorter_when_asked
    model = chat_openai(llm_server, extra_body={"top_k": 5})
    summarizer = LangChainSummarizer(model, max_tokens_kwarg="extra_body.max_tokens")
    compressor = budget_compressor(summarizer, MemoryStore())
    out = await compress_langchain(compressor, lc_conversation(), thread_id="t")
    assert out[1].content == f"Summary of the earlier conversation:\n{SHORT_SUMMARY}"
    first, retry = llm_server.bodies(OPENAI_PATH)
    for body in (first, retry):
        assert (body["max_tokens"], body["top_k"]) == (55, 5)
        assert "max_completion_tokens" not in body
    assert model.extra_body == {"top_k": 5}  # the model's own setting is left as it was
    assert compressor.stats.truncated_replies == 1


async def test_langchain_cut_reply_with_no_known_limit_says_so() -> None:
    class CutModel(RecordingChatModel):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            self.received.append(list(messages))
            cut = AIMessage("A summary that", response_metadata={"finish_reason": "length"})
            return ChatResult(generations=[ChatGeneration(message=cut)])

    compressor = summarize_compressor(LangChainSummarizer(CutModel()))
    with pytest.raises(SummarizerError, match="cut at the model's or the server's own reply limit"):
        await compress_langchain(compressor, lc_conversation(), thread_id="t")


# ---------------------------------------------------------------- the docs example


def test_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_messages.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert (
        "SystemMessage: You plan trips.\nSystemMessage: Summary of the earlier conversation:" in out
    )
    assert "AIMessage: Done: Taberna da Rua, 8pm.\nHumanMessage: And a taxi at 7:30?" in out
    assert "same objects: True True" in out
    assert "'arguments': '{\"city\": \"Lisbon\"}'" in out


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "langchain.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/langchain_messages.py"\n```' in guide


async def test_langchain_messages_given_to_compress_point_to_the_helpers() -> None:
    compressor = SummarizeCompressor(RecordingSummarizer())
    wrong: Any = [HumanMessage("hi"), AIMessage("hello")]  # what a type checker refuses
    with pytest.raises(InvalidInput) as caught:
        await compressor.compress(wrong, thread_id="t")
    assert "got a LangChain HumanMessage" in str(caught.value)
    assert "slimcache.langchain.compress_langchain(compressor, messages" in str(caught.value)
