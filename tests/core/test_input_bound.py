"""The bound on one summarizer call's input: the steps a catch-up takes, and cutting to fit."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from slimcache import Concat, Extend
from slimcache.core.input_bound import CUT_MARKER, InputBound, cut_message, cut_text
from slimcache.core.strategies import Custom, Hybrid, Replace, sends_previous
from slimcache.messages import approx_tokens, check_messages, count_message_tokens

OVERHEAD = 4
PROMPT = 50


def bound(limit: int | None, *, reserve: int = 300, sends: bool = True) -> InputBound:
    return InputBound(limit, reserve, PROMPT, sends, approx_tokens, OVERHEAD)


def turn(index: int, size: int) -> dict[str, Any]:
    return {"role": ("user", "assistant")[index % 2], "content": f"{index}:" + "x" * size}


def tool_unit(name: str, results: list[int]) -> list[dict[str, Any]]:
    calls = [
        {"id": f"{name}{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for n in range(len(results))
    ]
    return [
        {"role": "assistant", "content": None, "tool_calls": calls},
        *(
            {"role": "tool", "tool_call_id": f"{name}{n}", "content": "r" * size}
            for n, size in enumerate(results)
        ),
    ]


def sent_tokens(messages: Any, previous: str | None) -> int:
    tokens = PROMPT + sum(count_message_tokens(m, approx_tokens, OVERHEAD) for m in messages)
    return tokens + (approx_tokens(previous) if previous is not None else 0)


def test_without_a_bound_one_step_takes_everything() -> None:
    checked = check_messages([turn(i, 4000) for i in range(50)])
    step = bound(None).step(checked, 0, 49, "earlier")
    assert (step.first, step.end, step.previous, step.cut) == (0, 49, "earlier", 0)
    assert list(step.messages) == list(checked.messages)


def test_a_step_takes_the_whole_units_that_fit_beside_prompt_and_summary() -> None:
    checked = check_messages([turn(i, 96) for i in range(40)])  # 4 + 25 tokens each
    previous = "p" * 400  # 100 tokens
    step = bound(PROMPT + 100 + 10 * 29 + 5, reserve=100).step(checked, 3, 39, previous)
    assert (step.first, step.end, step.cut) == (3, 12, 0)
    assert step.previous == previous
    assert list(step.messages) == list(checked.messages[3:13])
    # What is due and fits is one step.
    assert bound(10_000).step(checked, 3, 39, previous).end == 39


def test_a_strategy_that_sends_no_previous_summary_leaves_it_no_room() -> None:
    checked = check_messages([turn(i, 96) for i in range(40)])
    previous = "p" * 4000
    limit = PROMPT + 10 * 29
    assert bound(limit, sends=False).step(checked, 0, 39, previous).end == 9
    assert [sends_previous(s) for s in (Extend(), Concat(), Hybrid(), Replace())] == [
        True,
        False,
        False,
        False,
    ]
    assert not sends_previous(Custom(lambda previous, part: part))

    class Own:
        name = "own"

        async def combine(self, *args: Any, **kwargs: Any) -> str:
            return "s"

    assert sends_previous(Own())  # not said: counted, to be safe


def test_a_unit_that_does_not_fit_alone_is_sent_alone_and_cut() -> None:
    messages = [turn(0, 40), *tool_unit("a", [40_000, 20, 9_000]), turn(5, 40)]
    checked = check_messages(messages)
    limit = 2_000
    step = bound(limit).step(checked, 1, 5, "summary so far")
    assert (step.first, step.end, step.cut) == (1, 4, 2)
    assert sent_tokens(step.messages, step.previous) <= limit
    call, first, small, second = step.messages
    assert call == messages[1]
    assert small == messages[3]
    for cut, original in ((first, messages[2]), (second, messages[4])):
        assert cut["tool_call_id"] == original["tool_call_id"]
        assert cut["content"].endswith(" characters cut: longer than the summarizer's input bound]")
        assert original["content"].startswith(cut["content"].split(" [... ")[0])
    # Whatever room is left, the two large results share it evenly.
    assert abs(len(first["content"]) - len(second["content"])) <= 8


def test_a_previous_summary_that_leaves_no_room_is_cut() -> None:
    checked = check_messages([turn(i, 96) for i in range(40)])
    previous = "p" * 40_000
    limit = 1_000
    step = bound(limit, reserve=300).step(checked, 0, 39, previous)
    assert step.previous is not None
    assert step.previous != previous
    assert approx_tokens(step.previous) <= limit - PROMPT - 300
    assert step.end == 9  # 300 tokens of room: ten messages of 29
    assert sent_tokens(step.messages, step.previous) <= limit
    # A strategy that does not send it keeps it whole, to concatenate.
    assert bound(limit, reserve=300, sends=False).step(checked, 0, 39, previous).previous == (
        previous
    )


def test_cut_text_keeps_the_longest_beginning_that_fits() -> None:
    text = "abcdefgh" * 1000
    cut = cut_text(text, 100, approx_tokens)
    assert approx_tokens(cut) <= 100 < approx_tokens(cut + "abcd")
    kept = cut[: cut.index(" [... ")]
    assert text.startswith(kept)
    assert cut == kept + CUT_MARKER.format(cut=len(text) - len(kept))
    assert cut_text("short", 100, approx_tokens) == "short"


def test_cut_message_cuts_text_parts_and_tool_arguments() -> None:
    message: dict[str, Any] = {
        "role": "assistant",
        "name": "bot",
        "content": [
            {"type": "text", "text": "a" * 30_000},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
        ],
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "write", "arguments": '{"text": "' + "b" * 50_000 + '"}'},
            }
        ],
    }
    cut = cut_message(message, 500, approx_tokens, OVERHEAD)
    assert count_message_tokens(cut, approx_tokens, OVERHEAD) <= 500
    assert (cut["role"], cut["name"], cut["tool_calls"][0]["id"]) == ("assistant", "bot", "c1")
    assert cut["tool_calls"][0]["function"]["name"] == "write"
    assert "characters cut" in cut["content"]
    assert "characters cut" in cut["tool_calls"][0]["function"]["arguments"]
    assert message["content"][0]["text"] == "a" * 30_000  # the original is untouched


@settings(max_examples=150, deadline=None)
@given(
    shape=st.lists(
        st.one_of(
            st.integers(0, 3_000),
            st.lists(st.integers(0, 3_000), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=30,
    ),
    limit=st.integers(PROMPT + 600, 4_000),
    previous=st.integers(0, 3_000),
)
def test_steps_cover_every_message_once_on_whole_units_within_the_bound(
    shape: list[Any], limit: int, previous: int
) -> None:
    messages: list[dict[str, Any]] = []
    for number, item in enumerate(shape):
        if isinstance(item, list):
            messages += tool_unit(f"u{number}_", item)
        else:
            messages.append(turn(number, item))
    messages.append(turn(999, 1))  # a history ends with a plain turn
    checked = check_messages(messages)
    last = len(messages) - 2
    summary: str | None = "s" * previous if previous else None
    first, covered = 0, list[int]()
    while first <= last:
        step = bound(limit).step(checked, first, last, summary)
        assert step.first == first
        assert step.end <= last
        assert checked.unit_end[step.end] == step.end  # never inside a tool call's unit
        assert sent_tokens(step.messages, step.previous) <= limit
        assert len(step.messages) == step.end - first + 1
        covered += range(first, step.end + 1)
        first, summary = step.end + 1, "s" * 400
    assert covered == list(range(last + 1))
