"""Message validation, token counting and transcripts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slimcache import (
    InvalidInput,
    approx_tokens,
    count_message_tokens,
    render_transcript,
)
from slimcache._messages import NON_TEXT_PART_TOKENS, check_messages

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("messages", "index", "rule"),
    [
        ("hello", None, "messages must be a list"),
        ([{"role": "user", "content": "hi"}, "oops"], 1, "each message must be a dict"),
        ([{"role": "robot", "content": "x"}], 0, "unknown role 'robot'"),
        ([{"content": "x"}], 0, "unknown role None"),
        ([{"role": "user"}], 0, "a user message needs 'content'"),
        ([{"role": "user", "content": None}], 0, "needs 'content'"),
        (
            [{"role": "assistant", "content": None}],
            0,
            "an? assistant message needs|needs 'content'",
        ),
        ([{"role": "user", "content": 42}], 0, "must be a string or a list of parts, got int"),
        ([{"role": "user", "content": [{"text": "no type"}]}], 0, "content part 0 must be a dict"),
        ([{"role": "user", "content": [{"type": "text"}]}], 0, "text content part 0 needs"),
        ([{"role": "user", "content": "x", "name": 5}], 0, "'name' must be a string"),
        ([{"role": "user", "content": "x", "metadata": []}], 0, "'metadata' must be a dict"),
        ([{"role": "user", "content": "x", "tool_calls": [CALL]}], 0, "only assistant messages"),
        (
            [{"role": "assistant", "content": "x", "tool_calls": {}}],
            0,
            "'tool_calls' must be a list",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"id": ""}]}],
            0,
            "non-empty string 'id'",
        ),
        ([{"role": "assistant", "tool_calls": [CALL, CALL]}], 0, "repeats the id 'c1'"),
        ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {}}]}], 0, "string 'name'"),
        ([{"role": "tool", "content": "r"}], 0, "needs a string 'tool_call_id'"),
        ([{"role": "tool", "content": "r", "tool_call_id": "zz"}], 0, "answers no tool call"),
        (
            [
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "user", "content": "interrupt"},
                {"role": "tool", "content": "r", "tool_call_id": "c1"},
            ],
            2,
            "answers no tool call",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "content": "r", "tool_call_id": "c1"},
                {"role": "tool", "content": "again", "tool_call_id": "c1"},
            ],
            2,
            "answers no tool call",
        ),
        ([{"role": "user", "content": "x", "extra": object()}], None, None),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": object()}]}], 0, "JSON"),
    ],
)
def test_bad_messages_name_index_and_rule(
    messages: Any, index: int | None, rule: str | None
) -> None:
    if rule is None:  # unknown extra keys are allowed and not hashed
        check_messages(messages)
        return
    with pytest.raises(InvalidInput, match=rule) as caught:
        check_messages(messages)
    assert caught.value.index == index
    if index is not None:
        assert str(caught.value).startswith(f"messages[{index}]: ")


def test_valid_conversation_with_parts_human_and_parallel_tools() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {
            "role": "human",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "c2"}]},
        {"role": "tool", "content": "r1", "tool_call_id": "c2"},
        {"role": "tool", "content": "r2", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done", "id": 7, "metadata": {"k": 1}},
    ]
    checked = check_messages(messages)
    assert checked.pinned == 1
    assert checked.unit_end == [0, 1, 4, 4, 4, 5]
    transcript = render_transcript(messages[1:])
    assert "user: look\n[image: https://x/y.png]" in transcript
    assert "-> calls lookup({}) [c1]" in transcript
    assert "tool result [c2]: r1" in transcript


def test_human_hashes_like_user() -> None:
    a = check_messages([{"role": "human", "content": "hi"}])
    b = check_messages([{"role": "user", "content": "hi"}])
    assert a.canonical == b.canonical


def test_token_counting() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2
    assert count_message_tokens({"role": "user", "content": "abcdefgh"}) == 2 + 4
    assert count_message_tokens({"role": "user", "content": "abcdefgh"}, len, 0) == 8
    image = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:" + "A" * 10_000}}],
    }
    assert count_message_tokens(image, overhead=0) == NON_TEXT_PART_TOKENS
    with_call = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert count_message_tokens(with_call, overhead=0) > 0


@given(st.lists(st.text(max_size=30), min_size=1, max_size=12))
def test_any_text_messages_validate_and_count(texts: list[str]) -> None:
    messages = [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(texts)]
    checked = check_messages(messages)
    assert len(checked.canonical) == len(texts)
    assert checked.tokens == [4 + approx_tokens(t) for t in texts]
