"""A block of assistant messages with tool calls and the results answering them is one unit."""

from __future__ import annotations

from typing import Any

import pytest

from slimcache import InvalidInput, KeepMessages, MessageThreshold, SummarizeCompressor
from slimcache.messages.checks import check_messages
from tests.fakes import RecordingSummarizer


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def calls(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"result {call_id}"}


def block_chat(turns: int = 6) -> list[dict[str, Any]]:
    """Turns of two assistant messages with a call each, then both results, then an answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    for turn in range(turns):
        a, b = f"a{turn}", f"b{turn}"
        messages += [
            {"role": "user", "content": f"question {turn}"},
            calls(a),
            calls(b),
            result(a),
            result(b),
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    return messages


def test_two_assistant_messages_and_their_results_are_one_unit() -> None:
    messages = [{"role": "user", "content": "q"}, calls("a"), calls("b"), result("a"), result("b")]
    assert check_messages(messages).unit_end == [0, 4, 4, 4, 4]


def test_an_assistant_message_without_calls_inside_a_block_joins_it() -> None:
    said = {"role": "assistant", "content": "let me look"}
    messages = [calls("a"), said, calls("b"), result("b"), result("a"), said]
    assert check_messages(messages).unit_end == [4, 4, 4, 4, 4, 5]


def test_an_answered_block_ends_at_the_next_assistant_message() -> None:
    messages = [calls("a"), result("a"), calls("b"), result("b")]
    assert check_messages(messages).unit_end == [1, 1, 3, 3]


def test_an_unanswered_call_before_a_block_leaves_the_block_its_own() -> None:
    # The first call is never answered; the assistant message after it is still of its block.
    messages = [calls("a"), calls("b"), result("b"), {"role": "user", "content": "next"}]
    assert check_messages(messages).unit_end == [2, 2, 2, 3]


@pytest.mark.parametrize(
    ("messages", "index", "rule"),
    [
        ([calls("a"), calls("a"), result("a")], 1, "repeats the id 'a' of an assistant message"),
        ([calls("a"), result("a"), calls("b"), result("a")], 3, "answers no tool call"),
        ([calls("a"), {"role": "user", "content": "x"}, calls("b"), result("a")], 3, "answers no"),
        ([{"role": "user", "content": "x"}, result("zz")], 1, "answers no tool call"),
    ],
)
def test_results_that_answer_no_call_of_the_block_stay_invalid(
    messages: list[dict[str, Any]], index: int, rule: str
) -> None:
    with pytest.raises(InvalidInput, match=rule) as caught:
        check_messages(messages)
    assert caught.value.index == index


@pytest.mark.parametrize("keep", range(1, 14))
async def test_the_compressor_summarizes_across_a_block_without_splitting_it(keep: int) -> None:
    history = block_chat()
    summarizer = RecordingSummarizer()
    compressor = SummarizeCompressor(
        summarizer, None, trigger=MessageThreshold(keep + 1), keep=KeepMessages(keep)
    )
    result = await compressor.compress_detailed(history, thread_id="t")
    assert result.summary_range is not None
    end = result.summary_range[1]
    # The verbatim part starts at a question, the first message of a block, or an answer:
    # never at the second assistant message of a block or at a result.
    assert (end + 1 - 1) % 6 in (0, 1, 5)
    sent = summarizer.calls[0].messages
    made = {c["id"] for m in sent for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert made == answered
    kept = result.messages[2:]
    made = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
    assert made == {m["tool_call_id"] for m in kept if m["role"] == "tool"}


async def test_a_block_is_fingerprinted_as_one_and_extended_from_the_cache() -> None:
    history = block_chat(8)
    summarizer = RecordingSummarizer()
    compressor = SummarizeCompressor(
        summarizer, None, trigger=MessageThreshold(12), keep=KeepMessages(5)
    )
    for length in range(2, len(history) + 1):
        done = await compressor.compress_detailed(history[:length], thread_id="t")
        if done.summary_range is not None:
            end = done.summary_range[1]
            assert check_messages(history[:length]).unit_end[end] == end
    calls_made = len(summarizer.calls)
    assert calls_made > 1
    # The same replay again is served from the cache: each range is one block-aligned range.
    for length in range(2, len(history) + 1):
        await compressor.compress_detailed(history[:length], thread_id="t")
    assert len(summarizer.calls) == calls_made


async def test_the_compressor_keeps_its_typed_error_for_a_stray_result() -> None:
    compressor = SummarizeCompressor(RecordingSummarizer(), None)
    stray = [{"role": "user", "content": "q"}, result("gone"), {"role": "user", "content": "x"}]
    with pytest.raises(InvalidInput, match="answers no tool call"):
        await compressor.compress_detailed(stray, thread_id="t")
