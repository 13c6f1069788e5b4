"""The stateful compressor: window, rolling summary, tool units, restore-on-error, snapshots."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from slimcache import (
    AnyOf,
    CompressEvent,
    Concat,
    ConfigurationError,
    ContextWindow,
    ConversationCompressor,
    Custom,
    EvictableTokens,
    Extend,
    Hybrid,
    InvalidInput,
    KeepMessages,
    KeepTokens,
    Manual,
    MemoryStore,
    Message,
    MessageThreshold,
    Prompts,
    Replace,
    Strategy,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
    TokenThreshold,
    WindowState,
)
from slimcache.messages import count_message_tokens
from tests.fakes import RecordingSummarizer, chat

ROOT = Path(__file__).resolve().parents[2]


def make(summarizer: Any = None, **options: Any) -> ConversationCompressor:
    options.setdefault("trigger", MessageThreshold(6))
    options.setdefault("keep", KeepMessages(3))
    return ConversationCompressor(summarizer or RecordingSummarizer(), **options)


def tool_call(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool_turn(n: int) -> list[dict[str, Any]]:
    """A user question, an assistant tool call, its result and the answer (4 messages)."""
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call(f"c{n}")]},
        {"role": "tool", "content": f"result {n}", "tool_call_id": f"c{n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]


def contents(messages: Sequence[Message]) -> list[Any]:
    return [m.get("content") for m in messages]


# ---------------------------------------------------------------- adding and compressing


async def test_adding_messages_never_calls_the_summarizer() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    history = chat(12)
    for message in history:
        compressor.add_message(message)
    assert summarizer.calls == []
    assert compressor.get_window() == history
    assert compressor.get_summary() is None


async def test_get_compressed_folds_the_oldest_messages_past_the_trigger() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    history = chat(8)  # system + 8
    compressor.add_messages(history)
    result = await compressor.get_compressed()
    # Over 6 in the window: down to the last 3, the system message pinned.
    assert len(summarizer.calls) == 1
    assert summarizer.calls[0].messages == history[1:6]
    assert summarizer.calls[0].context.task == "summarize"
    assert (summarizer.calls[0].context.start, summarizer.calls[0].context.end) == (1, 5)
    assert result[0] == history[0]
    assert result[1] == {
        "role": "system",
        "content": "Summary of the earlier conversation:\nsummarize[1-5]",
    }
    assert result[2:] == history[6:]
    assert compressor.get_summary() == "summarize[1-5]"
    assert compressor.get_window() == [history[0], *history[6:]]
    # Below the trigger now: asking again calls nothing.
    assert await compressor.get_compressed() == result
    assert len(summarizer.calls) == 1


async def test_each_message_is_sent_once_and_the_summary_is_extended() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    history = chat(40)
    for message in history:
        compressor.add_message(message)
        await compressor.get_compressed()
    sent = summarizer.sent_contents()
    assert len(sent) == len(set(sent))
    assert set(sent) <= set(contents(history[1:]))
    assert "You are helpful." not in sent
    assert [call.context.task for call in summarizer.calls[1:]] == ["extend"] * (
        len(summarizer.calls) - 1
    )
    # Each extension got the summary before it and only the messages after it.
    for before, after in zip(summarizer.calls, summarizer.calls[1:], strict=False):
        assert after.context.start == before.context.end + 1
        assert after.context.previous_summary is not None
        assert after.context.previous_summary.endswith(
            f"[{before.context.start}-{before.context.end}]"
        )
    stats = compressor.get_stats()
    assert stats.total_messages == len(history)
    assert stats.messages_compressed + stats.messages_in_window == len(history)
    assert stats.summarization_calls == len(summarizer.calls)


@pytest.mark.parametrize(
    ("trigger", "keep"),
    [
        (MessageThreshold(8), KeepMessages(4)),
        (TokenThreshold(120), KeepTokens(50)),
        (AnyOf(MessageThreshold(10), TokenThreshold(150)), KeepMessages(5)),
        (EvictableTokens(40), KeepMessages(4)),
        (ContextWindow(200, 0.8), KeepTokens(60)),
    ],
)
@pytest.mark.parametrize("strategy", [Extend(), Concat()])
async def test_turn_by_turn_it_matches_the_summarize_compressor(
    trigger: Any, keep: Any, strategy: Strategy
) -> None:
    # The same policies make the same batches whether the state lives here or in a store.
    ours, theirs = RecordingSummarizer(), RecordingSummarizer()
    stateful = ConversationCompressor(ours, trigger=trigger, keep=keep, strategy=strategy)
    stateless = SummarizeCompressor(
        theirs, MemoryStore(), trigger=trigger, keep=keep, strategy=strategy
    )
    history = chat(60)
    for length in range(1, len(history) + 1):
        stateful.add_message(history[length - 1])
        expected = await stateless.compress(history[:length], thread_id="t")
        assert await stateful.get_compressed() == expected, f"after {length} messages"
    assert len(theirs.calls) > 3
    assert [c.messages for c in ours.calls] == [c.messages for c in theirs.calls]
    assert [c.context for c in ours.calls] == [
        dataclasses.replace(c.context, thread_id=None) for c in theirs.calls
    ]


async def test_manual_trigger_compresses_only_when_asked() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=Manual(), keep=KeepMessages(2))
    history = chat(30)
    compressor.add_messages(history)
    assert await compressor.get_compressed() == history
    assert summarizer.calls == []
    assert await compressor.compress() == 28
    assert summarizer.calls[0].messages == history[1:29]
    assert compressor.get_window() == [history[0], *history[29:]]


async def test_compress_to_the_keep_policy_below_the_trigger() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    history = chat(5)
    compressor.add_messages(history)
    assert await compressor.get_compressed() == history
    assert await compressor.compress() == 2
    assert summarizer.calls[0].messages == history[1:3]
    assert summarizer.calls[0].context.task == "summarize"
    stats = compressor.get_stats()
    assert stats.messages_compressed == 2


async def test_evict_count_takes_whole_units_from_the_front() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=Manual())
    history: list[dict[str, Any]] = [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [tool_call("c1")]},
        {"role": "tool", "content": "72F", "tool_call_id": "c1"},
        {"role": "assistant", "content": "It is 72F."},
        {"role": "user", "content": "thanks"},
    ]
    compressor.add_messages(history)
    # Asking for one evicts the tool call with its result.
    assert await compressor.compress(evict_count=1) == 2
    assert summarizer.calls[0].messages == history[:2]
    assert compressor.get_window() == history[2:]
    assert await compressor.compress(evict_count=1) == 1
    assert summarizer.calls[1].messages == [history[2]]
    assert summarizer.calls[1].context.task == "extend"
    assert (summarizer.calls[1].context.start, summarizer.calls[1].context.end) == (2, 2)


async def test_evict_count_never_takes_the_last_unit() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=Manual())
    history = [{"role": "user", "content": "look it up"}, *tool_turn(1)[1:3]]
    compressor.add_messages(history)
    assert await compressor.compress(evict_count=100) == 1
    assert compressor.get_window() == history[1:]
    # Nothing left to evict but the last unit.
    assert await compressor.compress(evict_count=100) == 0
    assert len(summarizer.calls) == 1


async def test_automatic_compression_never_splits_a_tool_unit() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=MessageThreshold(7), keep=KeepMessages(3))
    for n in range(12):
        for message in tool_turn(n):
            compressor.add_message(message)
            await compressor.get_compressed()
            window = compressor.get_window()
            assert window[0]["role"] != "tool"
    for call in summarizer.calls:
        assert call.messages[0]["role"] != "tool"
        last = call.messages[-1]
        assert not last.get("tool_calls"), "a tool call was summarized without its result"
    assert len(summarizer.calls) > 3


async def test_a_tool_result_may_follow_its_call_after_a_compression() -> None:
    compressor = make(trigger=MessageThreshold(4), keep=KeepMessages(1))
    compressor.add_messages(chat(5, system=None))
    compressor.add_message({"role": "assistant", "content": None, "tool_calls": [tool_call("k")]})
    await compressor.get_compressed()
    assert compressor.get_window()[0].get("tool_calls")
    compressor.add_message({"role": "tool", "content": "done", "tool_call_id": "k"})
    assert compressor.get_window()[-1]["content"] == "done"


async def test_pinned_system_messages_are_never_summarized() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    compressor.add_messages(
        [{"role": "system", "content": "rules"}, {"role": "developer", "content": "more rules"}]
    )
    compressor.add_messages(chat(20, system=None))
    result = await compressor.get_compressed()
    assert contents(result[:2]) == ["rules", "more rules"]
    assert "rules" not in summarizer.sent_contents()
    assert summarizer.calls[0].context.start == 2
    # A system message later in the conversation is an ordinary one.
    compressor.add_message({"role": "system", "content": "late note"})
    compressor.add_messages(chat(10, start=20, system=None))
    await compressor.compress()
    assert "late note" in summarizer.sent_contents()


async def test_a_sync_summarizer_works() -> None:
    seen: list[int] = []

    def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
        seen.append(len(messages))
        return f"{len(messages)} messages"

    compressor = make(summarize)
    compressor.add_messages(chat(8))
    result = await compressor.get_compressed()
    assert seen == [5]
    assert result[1]["content"].endswith("5 messages")


# ---------------------------------------------------------------- bad input


async def test_a_tool_result_without_its_call_is_invalid_and_nothing_is_added() -> None:
    compressor = make()
    compressor.add_messages(chat(3))
    before = compressor.get_window()
    with pytest.raises(InvalidInput, match="answers no tool call"):
        compressor.add_message({"role": "tool", "content": "x", "tool_call_id": "nope"})
    assert compressor.get_window() == before
    assert compressor.get_stats().total_messages == len(before)


async def test_add_messages_is_all_or_nothing_and_names_the_index() -> None:
    compressor = make()
    compressor.add_messages(chat(2, system=None))
    with pytest.raises(InvalidInput) as caught:
        compressor.add_messages([{"role": "user", "content": "ok"}] * 2 + [{"role": "x"}])
    assert caught.value.index == 2
    assert len(compressor.get_window()) == 2


async def test_a_message_that_cannot_be_saved_as_json_is_refused() -> None:
    compressor = make()
    with pytest.raises(InvalidInput, match="JSON"):
        compressor.add_message({"role": "user", "content": "hi", "metadata": {"at": object()}})
    assert compressor.get_window() == []


@pytest.mark.parametrize("value", [{"role": "user", "content": "a dict, not a list"}, "text", 3])
def test_add_messages_needs_a_list(value: Any) -> None:
    with pytest.raises(InvalidInput, match="list"):
        make().add_messages(value)


@pytest.mark.parametrize("count", [0, -1, True, 1.5, "2"])
async def test_evict_count_must_be_a_positive_integer(count: Any) -> None:
    compressor = make()
    compressor.add_messages(chat(8))
    with pytest.raises(InvalidInput, match="evict_count"):
        await compressor.compress(evict_count=count)
    assert len(compressor.get_window()) == 9


@pytest.mark.parametrize(
    "options",
    [
        {"trigger": MessageThreshold(5), "keep": KeepMessages(5)},
        {"trigger": "often"},
        {"keep": 3},
        {"strategy": "weighed"},
        {"strategy": "custom"},
        {"max_summary_tokens": 0},
        {"message_overhead": -1},
        {"summary_role": "narrator"},
        {"summary_template": "no placeholder"},
        {"summary_template": "{nope}"},
        {"summarizer_timeout": 0},
        {"on_error": "print"},
        {"prompts": "short"},
        {"token_counter": None},
    ],
)
def test_bad_settings_are_configuration_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        make(**options)


def test_the_summarizer_must_be_callable() -> None:
    with pytest.raises(ConfigurationError):
        ConversationCompressor("gpt")  # type: ignore[arg-type]


# ---------------------------------------------------------------- restore on error


async def test_a_failed_summarizer_leaves_the_window_as_it_was() -> None:
    failure = RuntimeError("LLM API unavailable")
    summarizer = RecordingSummarizer(fail_with=failure)
    errors: list[tuple[BaseException, list[dict[str, Any]]]] = []
    compressor = make(summarizer, on_error=lambda exc, msgs: errors.append((exc, msgs)))
    history = chat(8)
    compressor.add_messages(history)
    with pytest.raises(SummarizerError) as caught:
        await compressor.get_compressed()
    assert caught.value.__cause__ is failure
    # The messages that were leaving are back, in order; nothing was summarized.
    assert compressor.get_window() == history
    assert compressor.get_summary() is None
    assert len(errors) == 1
    assert errors[0][0] is caught.value
    assert errors[0][1] == history[1:6]
    stats = compressor.get_stats()
    assert stats.summarizer_errors == 1
    assert stats.messages_compressed == 0
    # Once the summarizer is back, the same messages are summarized.
    summarizer.fail_with = None
    result = await compressor.get_compressed()
    assert summarizer.calls[-1].messages == history[1:6]
    assert result[2:] == history[6:]


async def test_a_failed_extension_keeps_the_previous_summary() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    summary, window = compressor.get_summary(), compressor.get_window()
    compressor.add_messages(chat(6, start=8, system=None))
    window = compressor.get_window()
    summarizer.fail_with = TimeoutError("slow")
    with pytest.raises(SummarizerError):
        await compressor.compress(evict_count=2)
    assert compressor.get_summary() == summary
    assert compressor.get_window() == window


@pytest.mark.parametrize("bad", ["", "   ", None])
async def test_an_empty_summary_is_a_summarizer_error(bad: Any) -> None:
    async def summarize(messages: Sequence[Message], context: SummaryContext) -> Any:
        return bad

    compressor = make(summarize)
    compressor.add_messages(chat(8))
    with pytest.raises(SummarizerError):
        await compressor.get_compressed()
    assert len(compressor.get_window()) == 9


async def test_a_summarizer_timeout_is_a_summarizer_error() -> None:
    compressor = make(RecordingSummarizer(delay=5), summarizer_timeout=0.05)
    compressor.add_messages(chat(8))
    with pytest.raises(SummarizerError, match="timed out"):
        await compressor.get_compressed()
    assert len(compressor.get_window()) == 9


async def test_a_failing_strategy_of_your_own_is_a_summarizer_error() -> None:
    class Broken:
        name = "broken"

        async def combine(self, *args: Any, **kwargs: Any) -> str:
            raise KeyError("oops")

    compressor = make(strategy=Broken())
    compressor.add_messages(chat(8))
    with pytest.raises(SummarizerError) as caught:
        await compressor.get_compressed()
    assert isinstance(caught.value.__cause__, KeyError)
    assert len(compressor.get_window()) == 9


async def test_a_broken_hook_does_not_lose_the_compression() -> None:
    def hook(*args: Any) -> None:
        raise ValueError("hook bug")

    compressor = make(on_evict=hook, on_compress=hook)
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    assert compressor.get_summary() == "summarize[1-5]"


# ---------------------------------------------------------------- strategies and hooks


async def test_concat_appends_the_summary_of_the_new_messages() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, strategy=Concat())
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    compressor.add_messages(chat(4, start=8, system=None))
    await compressor.get_compressed()
    assert compressor.get_summary() == "summarize[1-5]\n\nsummarize[6-9]"
    assert all(call.context.previous_summary is None for call in summarizer.calls)


async def test_replace_keeps_only_the_newest_summary() -> None:
    compressor = make(strategy=Replace())
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    compressor.add_messages(chat(4, start=8, system=None))
    await compressor.get_compressed()
    assert compressor.get_summary() == "summarize[6-9]"


async def test_custom_merge_combines_old_and_new() -> None:
    async def merge(previous: str | None, part: str) -> str:
        return part if previous is None else f"{previous}\n---\n{part}"

    compressor = make(strategy=Custom(merge))
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    compressor.add_messages(chat(4, start=8, system=None))
    await compressor.get_compressed()
    assert compressor.get_summary() == "summarize[1-5]\n---\nsummarize[6-9]"


async def test_hybrid_condenses_past_its_budget() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, strategy=Hybrid(3))
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    compressor.add_messages(chat(4, start=8, system=None))
    await compressor.get_compressed()
    assert [call.context.task for call in summarizer.calls] == [
        "summarize",
        "summarize",
        "condense",
    ]
    condense = summarizer.calls[-1].context
    assert (condense.start, condense.end) == (1, 9)
    assert compressor.get_summary() == "summarize[1-5]\n\nsummarize[6-9] + condense[1-9]"


async def test_hooks_see_the_evicted_messages_and_the_event() -> None:
    evicted: list[tuple[list[dict[str, Any]], str]] = []
    events: list[CompressEvent] = []
    compressor = make(
        on_evict=lambda msgs, reason: evicted.append((msgs, reason)), on_compress=events.append
    )
    history = chat(8)
    compressor.add_messages(history)
    await compressor.get_compressed()
    await compressor.compress(evict_count=1)
    assert evicted == [(history[1:6], "messages>6"), ([history[6]], "evict_count=1")]
    assert [(e.outcome, e.start, e.end, e.new_messages, e.reason) for e in events] == [
        ("summarized", 1, 5, 5, "messages>6"),
        ("extended", 1, 6, 1, "evict_count=1"),
    ]
    assert all(e.summarizer_calls == 1 and e.input_tokens > 0 for e in events)


async def test_async_hooks_are_awaited() -> None:
    seen: list[str] = []

    async def on_compress(event: CompressEvent) -> None:
        await asyncio.sleep(0)
        seen.append(event.outcome)

    compressor = make(on_compress=on_compress)
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    assert seen == ["summarized"]


async def test_prompts_and_budget_reach_the_summarizer() -> None:
    summarizer = RecordingSummarizer()
    prompts = Prompts(summarize="Sum up in {max_tokens}.", extend="Extend in {max_tokens}.")
    compressor = make(summarizer, prompts=prompts, max_summary_tokens=77)
    compressor.add_messages(chat(8))
    await compressor.compress()
    compressor.add_messages(chat(2, start=8, system=None))
    await compressor.compress()
    assert [c.context.prompt for c in summarizer.calls] == ["Sum up in 77.", "Extend in 77."]
    assert all(c.context.max_tokens == 77 for c in summarizer.calls)


async def test_summary_role_and_template() -> None:
    compressor = make(summary_role="user", summary_template="[{count} earlier: {summary}]")
    compressor.add_messages(chat(8))
    result = await compressor.get_compressed()
    assert result[1] == {"role": "user", "content": "[5 earlier: summarize[1-5]]"}


# ---------------------------------------------------------------- concurrency


async def test_concurrent_requests_summarize_once() -> None:
    summarizer = RecordingSummarizer(delay=0.05)
    compressor = make(summarizer)
    compressor.add_messages(chat(8))
    results = await asyncio.gather(*(compressor.get_compressed() for _ in range(5)))
    assert len(summarizer.calls) == 1
    assert all(result == results[0] for result in results)


async def test_messages_added_during_a_compression_are_kept() -> None:
    summarizer = RecordingSummarizer(delay=0.05)
    compressor = make(summarizer)
    history = chat(8)
    compressor.add_messages(history)
    running = asyncio.ensure_future(compressor.get_compressed())
    await asyncio.sleep(0.01)
    late = chat(2, start=8, system=None)
    compressor.add_messages(late)
    await running
    assert compressor.get_window() == [history[0], *history[6:], *late]


async def test_clear_during_a_compression_discards_its_result() -> None:
    summarizer = RecordingSummarizer(delay=0.05)
    compressor = make(summarizer)
    compressor.add_messages(chat(8))
    running = asyncio.ensure_future(compressor.compress())
    await asyncio.sleep(0.01)
    compressor.clear()
    compressor.add_messages(chat(2, system=None))
    assert await running == 0
    assert compressor.get_summary() is None
    assert compressor.get_window() == chat(2, system=None)


# ---------------------------------------------------------------- stats and clear


async def test_stats_count_what_happened() -> None:
    compressor = make(token_counter=lambda text: len(text.split()), message_overhead=1)
    history = chat(8)
    compressor.add_messages(history)
    tokens = [count_message_tokens(m, lambda t: len(t.split()), 1) for m in history]
    await compressor.get_compressed()
    stats = compressor.get_stats()
    assert stats.total_messages == 9
    assert stats.messages_compressed == 5
    assert stats.messages_in_window == 4
    assert stats.total_input_tokens == sum(tokens)
    assert stats.window_tokens == tokens[0] + sum(tokens[6:])
    assert stats.summary_tokens == 1  # "summarize[1-5]" is one word
    assert stats.compression_ratio == pytest.approx(5 / 9)
    assert stats.summarization_calls == 1
    assert stats.summarizer_input_tokens > sum(tokens[1:6])


async def test_reset_stats_keeps_the_conversation() -> None:
    compressor = make()
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    result = await compressor.get_compressed()
    compressor.reset_stats()
    stats = compressor.get_stats()
    assert (stats.total_messages, stats.messages_compressed, stats.summarization_calls) == (0, 0, 0)
    assert stats.compression_ratio == 0.0
    assert stats.messages_in_window == 4
    assert await compressor.get_compressed() == result


async def test_clear_forgets_everything() -> None:
    compressor = make()
    compressor.add_messages(chat(8))
    await compressor.get_compressed()
    compressor.clear()
    assert compressor.get_summary() is None
    assert compressor.get_window() == []
    assert compressor.get_stats().total_messages == 0
    # A system message is pinned again after clearing.
    compressor.add_messages(chat(8))
    result = await compressor.get_compressed()
    assert result[1]["content"].endswith("summarize[1-5]")


# ---------------------------------------------------------------- serialize / deserialize


def round_trip(state: dict[str, Any]) -> Any:
    return json.loads(json.dumps(state))


async def test_a_snapshot_restores_the_same_conversation() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=TokenThreshold(90), keep=KeepTokens(40))
    compressor.add_messages(chat(8))
    compressor.add_messages(tool_turn(1))
    await compressor.get_compressed()
    state = compressor.serialize()
    assert state["version"] == 1
    restored = ConversationCompressor.deserialize(round_trip(state), summarizer)
    assert restored.serialize() == state
    assert await restored.get_compressed() == await compressor.get_compressed()
    assert restored.get_stats() == compressor.get_stats()
    # Both go on the same way.
    more = chat(12, start=20, system=None)
    for each in (compressor, restored):
        for message in more:
            each.add_message(message)
            await each.get_compressed()
    assert await restored.get_compressed() == await compressor.get_compressed()
    assert restored.get_summary() == compressor.get_summary()


async def test_a_snapshot_keeps_the_settings() -> None:
    prompts = Prompts(summarize="S {max_tokens}", extend="E", condense="C")
    compressor = make(
        trigger=AnyOf(MessageThreshold(9), ContextWindow(500, 0.5), EvictableTokens(70)),
        keep=KeepMessages(4),
        strategy=Hybrid(40),
        max_summary_tokens=123,
        prompts=prompts,
        message_overhead=2,
        summary_role="developer",
        summary_template="<{summary}>",
        summarizer_timeout=9.5,
    )
    state = round_trip(compressor.serialize())
    restored = ConversationCompressor.deserialize(state, RecordingSummarizer())
    assert restored.serialize() == compressor.serialize()


async def test_a_snapshot_of_a_pending_tool_call_accepts_its_result() -> None:
    compressor = make()
    compressor.add_messages(tool_turn(1)[:2])
    restored = ConversationCompressor.deserialize(
        round_trip(compressor.serialize()), RecordingSummarizer()
    )
    restored.add_message({"role": "tool", "content": "r", "tool_call_id": "c1"})
    with pytest.raises(InvalidInput):
        restored.add_message({"role": "tool", "content": "r", "tool_call_id": "c9"})


async def test_deserialize_overrides_settings() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    compressor.add_messages(chat(5))
    state = compressor.serialize()
    restored = ConversationCompressor.deserialize(
        state, summarizer, trigger=MessageThreshold(3), keep=KeepMessages(1), summary_role="user"
    )
    result = await restored.get_compressed()
    assert result[1] == {
        "role": "user",
        "content": "Summary of the earlier conversation:\nsummarize[1-4]",
    }


async def test_objects_of_your_own_must_be_given_again() -> None:
    async def merge(previous: str | None, part: str) -> str:
        return f"{previous}|{part}"

    class EveryTime:
        def reason(self, state: WindowState) -> str | None:
            return "always" if state.messages > 1 else None

    compressor = make(strategy=Custom(merge), trigger=EveryTime(), keep=KeepMessages(1))
    state = round_trip(compressor.serialize())
    assert state["settings"]["strategy"] is None
    assert state["settings"]["trigger"] is None
    with pytest.raises(ConfigurationError, match="strategy"):
        ConversationCompressor.deserialize(state, RecordingSummarizer(), trigger=EveryTime())
    with pytest.raises(ConfigurationError, match="trigger"):
        ConversationCompressor.deserialize(state, RecordingSummarizer(), strategy=Custom(merge))
    restored = ConversationCompressor.deserialize(
        state, RecordingSummarizer(), trigger=EveryTime(), strategy=Custom(merge)
    )
    restored.add_messages(chat(3, system=None))
    await restored.get_compressed()
    assert restored.get_summary() == "None|summarize[0-1]"


def valid_state() -> dict[str, Any]:
    compressor = make()
    compressor.add_messages(chat(4))
    state: dict[str, Any] = round_trip(compressor.serialize())
    return state


def change(path: Sequence[str], value: Any) -> dict[str, Any]:
    state = valid_state()
    target = state
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return state


@pytest.mark.parametrize(
    "state",
    [
        "not a dict",
        [],
        {},
        change(["version"], 2),
        change(["version"], "1"),
        change(["format"], "convo-compress"),
        change(["summary"], 5),
        change(["summary"], "a summary of nothing"),  # summarized is 0
        change(["summarized"], -1),
        change(["window"], "messages"),
        change(["window"], [{"role": "tool", "content": "x", "tool_call_id": "q"}]),
        change(["window"], [{"role": "user"}]),
        change(["pinned"], [{"role": "user", "content": "not pinned"}]),
        change(["counters"], {"total_messages": 1}),
        change(["counters", "summarization_calls"], -3),
        change(["settings"], None),
        change(["settings", "trigger"], {"type": "sometimes"}),
        change(["settings", "trigger"], {"type": "messages", "messages": 0}),
        change(["settings", "keep"], {"type": "messages"}),
        change(["settings", "strategy"], {"type": "weighed"}),
        change(["settings", "prompts"], {"summarize": 1}),
        change(["settings", "max_summary_tokens"], "many"),
        change(["settings", "summarizer_timeout"], True),
    ],
)
def test_malformed_or_unknown_snapshots_are_invalid_input(state: Any) -> None:
    with pytest.raises(InvalidInput):
        ConversationCompressor.deserialize(state, RecordingSummarizer())


def test_a_summary_with_an_empty_window_is_invalid() -> None:
    state = change(["summary"], "earlier")
    state["summarized"] = 3
    state["window"] = []
    with pytest.raises(InvalidInput, match="empty window"):
        ConversationCompressor.deserialize(state, RecordingSummarizer())


def test_a_snapshot_is_a_copy() -> None:
    compressor = make()
    compressor.add_messages(chat(3))
    state = compressor.serialize()
    state["window"][0]["content"] = "changed"
    assert compressor.get_window()[1]["content"] != "changed"


# ---------------------------------------------------------------- the docs section's example


def test_the_example_runs_compresses_and_restores() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "compressor_state.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    earlier = ", ".join(f"turn {i}" for i in range(6))
    assert out.splitlines() == [
        "system 'You are terse.'",
        f"system 'Summary of the earlier conversation:\\n{earlier}'",
        "user 'turn 6'",
        "assistant 'turn 7'",
        f"{earlier} | 6 compressed",
    ]


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "compressor-state.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/compressor_state.py"\n```' in guide
