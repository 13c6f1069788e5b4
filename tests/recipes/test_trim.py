"""The trim compressor: whole units dropped oldest first until the conversation fits."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimcache import ConfigurationError, Conversation, InvalidInput, TrimCompressor
from slimcache.messages import count_message_tokens
from tests.fakes import chat

ROOT = Path(__file__).resolve().parents[2]


def words(text: str) -> int:
    """A token counter the tests can do by hand: one token per word."""
    return len(text.split())


def token_list(history: list[dict[str, Any]]) -> list[int]:
    return [count_message_tokens(m, words, 0) for m in history]


def trim(max_tokens: int, **options: Any) -> TrimCompressor:
    options.setdefault("token_counter", words)
    options.setdefault("message_overhead", 0)
    return TrimCompressor(max_tokens, **options)


def msg(role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


def tool_call(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


SYSTEM = msg("system", "be brief")  # 2 tokens


async def test_a_conversation_within_the_budget_is_returned_as_given() -> None:
    history = [SYSTEM, msg("user", "one two"), msg("assistant", "three four five")]
    assert await trim(7).compress(history) == history


async def test_oldest_messages_go_first_and_the_system_message_stays() -> None:
    history = [
        SYSTEM,
        msg("user", "a b c"),  # 3
        msg("assistant", "d e"),  # 2
        msg("user", "f g h i"),  # 4
        msg("assistant", "j"),  # 1
    ]
    # 2 + 4 + 1 = 7 fits; adding "d e" would make 9.
    assert await trim(8).compress(history) == [SYSTEM, history[3], history[4]]
    assert await trim(9).compress(history) == [SYSTEM, *history[2:]]


async def test_a_tool_call_and_its_results_are_dropped_together() -> None:
    history = [
        SYSTEM,
        msg("user", "weather and time"),  # 3
        msg("assistant", "x", tool_calls=[tool_call("c1"), tool_call("c2", "clock")]),
        msg("tool", "sunny", tool_call_id="c1"),
        msg("tool", "noon", tool_call_id="c2"),
        msg("assistant", "it is sunny at noon"),  # 5
    ]
    tokens = token_list(history)
    unit = sum(tokens[2:5])
    # A budget that would fit the tool results but not their call: the whole unit goes.
    budget = 2 + tokens[3] + tokens[4] + 5
    assert budget < 2 + unit + 5
    result = await trim(budget).compress(history)
    assert result == [SYSTEM, history[5]]
    # With room for the unit, it stays whole and only the user message goes.
    result = await trim(2 + unit + 5).compress(history)
    assert result == [SYSTEM, *history[2:]]
    assert result[1]["role"] == "assistant"


async def test_the_last_unit_is_kept_even_over_the_budget() -> None:
    history = [SYSTEM, msg("user", "short"), msg("assistant", "a very long final answer indeed")]
    compressor = trim(3)
    assert await compressor.compress(history) == [SYSTEM, history[2]]
    result = await compressor.compress_detailed(history)
    assert result.fits is False
    assert result.tokens == 2 + 6
    assert result.dropped == 1


async def test_the_last_tool_unit_is_kept_whole() -> None:
    history = [
        msg("user", "look it up"),
        msg("assistant", "searching", tool_calls=[tool_call("c1")]),
        msg("tool", "a long long long tool result", tool_call_id="c1"),
    ]
    result = await trim(1, keep_system=False).compress(history)
    assert result == history[1:]


async def test_keep_system_false_drops_the_system_messages_like_any_other() -> None:
    history = [SYSTEM, msg("developer", "rules here"), msg("user", "a"), msg("assistant", "b")]
    assert await trim(6).compress(history) == history
    assert await trim(5).compress(history) == [SYSTEM, history[1], history[3]]
    assert await trim(5, keep_system=False).compress(history) == history[1:]
    assert await trim(3, keep_system=False).compress(history) == history[2:]


async def test_only_leading_system_messages_are_pinned() -> None:
    history = [
        SYSTEM,
        msg("user", "a b"),
        msg("system", "note"),
        msg("user", "c"),
        msg("assistant", "d"),
    ]
    assert await trim(4).compress(history) == [SYSTEM, history[3], history[4]]


async def test_a_conversation_in_gives_a_conversation_out() -> None:
    history = [SYSTEM, msg("user", "a b c"), msg("assistant", "d")]
    conversation = Conversation("t-1", history, {"user": "ada"})
    result = await trim(3).compress(conversation)
    assert isinstance(result, Conversation)
    assert result.thread_id == "t-1"
    assert result.messages == [SYSTEM, history[2]]
    assert result.metadata == {
        "user": "ada",
        "slimcache": {"outcome": "trimmed", "dropped": 1, "tokens": 3, "fits": True},
    }
    assert conversation.metadata == {"user": "ada"}


async def test_the_input_is_not_modified() -> None:
    history = chat(12)
    before = [dict(m) for m in history]
    result = await TrimCompressor(30).compress(history)
    assert history == before
    result[-1]["content"] = "changed"
    assert history[-1]["content"] == before[-1]["content"]


async def test_default_counter_counts_like_count_message_tokens() -> None:
    history = chat(30)
    budget = 120
    result = await TrimCompressor(budget).compress(history)
    total = sum(count_message_tokens(m) for m in result)
    assert total <= budget
    dropped_next = history[len(history) - len(result)]
    assert total + count_message_tokens(dropped_next) > budget


@pytest.mark.parametrize(
    "messages",
    [
        [msg("tool", "orphan", tool_call_id="x")],
        [msg("user", "a"), {"role": "robot", "content": "b"}],
        "not a list",
    ],
)
async def test_malformed_messages_are_invalid_input(messages: Any) -> None:
    with pytest.raises(InvalidInput):
        await trim(10).compress(messages)


async def test_a_thread_id_is_checked_and_not_given_twice() -> None:
    history = [msg("user", "a")]
    assert await trim(10).compress(history, thread_id="t") == history
    with pytest.raises(InvalidInput):
        await trim(10).compress(history, thread_id="")
    with pytest.raises(InvalidInput, match="not both"):
        await trim(10).compress(Conversation("t", history), thread_id="t")  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("args", "options"),
    [
        ((0,), {}),
        ((-5,), {}),
        ((True,), {}),
        ((10,), {"message_overhead": -1}),
        ((10,), {"token_counter": "len"}),
        ((10,), {"keep_system": "yes"}),
    ],
)
def test_bad_settings_are_configuration_errors(args: Any, options: Any) -> None:
    with pytest.raises(ConfigurationError):
        TrimCompressor(*args, **options)


# ---------------------------------------------------------------- property


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 2))):
        history.append(msg("system", "s " * draw(st.integers(1, 5)) + str(i)))
    for i in range(draw(st.integers(1, 12))):
        text = "w " * draw(st.integers(0, 8)) + str(i)
        if draw(st.booleans()):
            calls = draw(st.integers(1, 3))
            ids = [f"c{i}-{n}" for n in range(calls)]
            history.append(msg("assistant", text, tool_calls=[tool_call(c) for c in ids]))
            for call_id in ids[: draw(st.integers(0, calls))]:
                history.append(msg("tool", "r " * draw(st.integers(1, 6)), tool_call_id=call_id))
        else:
            history.append(msg("user" if i % 2 == 0 else "assistant", text))
    return history


def unit_start(history: list[dict[str, Any]], last: int) -> int:
    """The first message of the unit ending at ``last``: its results' block of assistant
    messages (from the first with calls of the run of them before the results), or itself."""
    start = last
    while history[start]["role"] == "tool":
        start -= 1
    if start == last:
        return last
    probe = start - 1
    while probe >= 0 and history[probe]["role"] == "assistant":
        if history[probe].get("tool_calls"):
            start = probe
        probe -= 1
    return start


@settings(max_examples=200, deadline=None)
@given(history=conversations(), budget=st.integers(1, 80), keep_system=st.booleans())
def test_trim_keeps_the_longest_suffix_of_whole_units_that_fits(
    history: list[dict[str, Any]], budget: int, keep_system: bool
) -> None:
    compressor = trim(budget, keep_system=keep_system)
    result = asyncio.run(compressor.compress_detailed(history))
    tokens = token_list(history)
    pinned = 0
    if keep_system:
        while pinned < len(history) and history[pinned]["role"] == "system":
            pinned += 1
    kept_tail = result.messages[pinned:]
    start = len(history) - len(kept_tail)
    assert result.messages[:pinned] == history[:pinned]
    assert kept_tail == history[start:]
    assert result.dropped == start - pinned
    assert result.tokens == sum(tokens[:pinned]) + sum(tokens[start:])
    if kept_tail:
        # Never an orphan tool result first.
        assert kept_tail[0]["role"] != "tool"
    if start == pinned:
        return  # nothing dropped
    # The previous unit did not fit, or the kept part is only the last unit.
    previous = unit_start(history, start - 1)
    last_unit = unit_start(history, len(history) - 1)
    if result.fits:
        assert result.tokens + sum(tokens[previous:start]) > budget
    else:
        assert start == last_unit


# ---------------------------------------------------------------- the docs section's example


def test_the_example_runs_and_trims() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trim.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.splitlines() == [
        "11 messages -> 4",
        "system | You are",
        "assistant | turn 7:",
        "user | turn 8:",
        "assistant | turn 9:",
    ]


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "trim.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/trim.py"\n```' in guide
