"""Code ported from convo-compress, written as its README uses the features.

``createCompressor({ eviction: { trigger: 'combined', ... }, mergeStrategy, hooks })``,
``getMessages()``: each line below is the slimcache spelling of one of those.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from slimcache import (
    AnyOf,
    Concat,
    ConfigurationError,
    ConversationCompressor,
    Extend,
    KeepMessages,
    KeepWithin,
    MemoryStore,
    MessageThreshold,
    SummarizeCompressor,
    TokenThreshold,
    Weighted,
)
from slimcache.core.strategies import WEIGHTED_EMPHASIS
from slimcache.messages import count_message_tokens
from tests.fakes import RecordingSummarizer

COMBINED = AnyOf(MessageThreshold(20), TokenThreshold(4000))


def large_turns(count: int, words: int = 330) -> list[dict[str, Any]]:
    """Turns of about ``words * 1.25`` tokens each: twelve of them pass 4,000 tokens."""
    return [
        {"role": ("user", "assistant")[i % 2], "content": f"turn {i} " + "word " * words}
        for i in range(count)
    ]


def tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_message_tokens(m) for m in messages)


async def test_the_combined_trigger_settles_under_both_targets() -> None:
    # { trigger: 'combined', messageThreshold: 20, messageTarget: 12,
    #   tokenThreshold: 4000, tokenTarget: 2000 }
    compressor = ConversationCompressor(
        RecordingSummarizer(), trigger=COMBINED, keep=KeepWithin(messages=12, tokens=2000)
    )
    compressor.add_messages(large_turns(12))
    assert tokens(compressor.get_window()) > 4000
    await compressor.get_compressed()
    window = compressor.get_window()
    assert len(window) <= 12
    assert tokens(window) <= 2000
    assert compressor.get_summary() is not None

    # The same settings on the shared-store compressor.
    summarizer = RecordingSummarizer()
    shared = SummarizeCompressor(
        summarizer, MemoryStore(), trigger=COMBINED, keep=KeepWithin(messages=12, tokens=2000)
    )
    result = await shared.compress_detailed(large_turns(12), thread_id="t")
    assert result.summary_range is not None
    verbatim = large_turns(12)[result.summary_range[1] + 1 :]
    assert len(verbatim) <= 12
    assert tokens(verbatim) <= 2000
    # Many small messages: the message target binds.
    small = [{"role": ("user", "assistant")[i % 2], "content": f"m{i}"} for i in range(21)]
    result = await shared.compress_detailed(small, thread_id="small")
    assert result.summary_range == (0, 8)


def test_keep_within_must_stay_below_each_threshold() -> None:
    with pytest.raises(ConfigurationError, match=r"KeepWithin\(messages=20\) must be below"):
        ConversationCompressor(
            RecordingSummarizer(), trigger=COMBINED, keep=KeepWithin(messages=20, tokens=100)
        )
    with pytest.raises(ConfigurationError, match=r"KeepWithin\(tokens=4000\) must be below"):
        ConversationCompressor(
            RecordingSummarizer(), trigger=COMBINED, keep=KeepWithin(messages=5, tokens=4000)
        )
    with pytest.raises(ConfigurationError, match=r"KeepWithin\.tokens"):
        KeepWithin(messages=5, tokens=0)


async def test_get_messages_keeps_working_but_says_what_it_returns() -> None:
    compressor = ConversationCompressor(
        RecordingSummarizer(), trigger=MessageThreshold(4), keep=KeepMessages(2)
    )
    compressor.add_messages(large_turns(6, words=3))
    # convo-compress's getMessages() is the summary and the window:
    sent = await compressor.get_compressed()
    assert sent[0]["content"].startswith("Summary of the earlier conversation")
    with pytest.deprecated_call(match="get_window"):
        verbatim = compressor.get_messages()
    assert verbatim == compressor.get_window() == sent[1:]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("summarize", Extend), ("append", Concat), ("weighted", Weighted)],
)
def test_convo_compress_strategy_names_are_accepted(name: str, kind: type) -> None:
    compressor = ConversationCompressor(RecordingSummarizer(), strategy=name)  # type: ignore[arg-type]
    assert type(compressor._strategy) is kind
    shared = SummarizeCompressor(RecordingSummarizer(), strategy=name)  # type: ignore[arg-type]
    assert type(shared._derived.strategy) is kind


async def test_weighted_asks_for_emphasis_on_the_new_messages_and_survives_a_snapshot() -> None:
    summarizer = RecordingSummarizer()
    compressor = ConversationCompressor(
        summarizer, trigger=MessageThreshold(4), keep=KeepMessages(2), strategy="weighted"
    )
    for message in large_turns(10, words=3):
        compressor.add_message(message)
        await compressor.get_compressed()
    first, *later = summarizer.calls
    assert first.context.task == "summarize"
    assert WEIGHTED_EMPHASIS not in first.context.prompt
    assert later
    assert all(call.context.task == "extend" for call in later)
    assert all(call.context.prompt.endswith(WEIGHTED_EMPHASIS) for call in later)
    state = json.loads(json.dumps(compressor.serialize()))
    assert state["settings"]["strategy"] == {"type": "weighted"}
    restored = ConversationCompressor.deserialize(state, summarizer)
    assert type(restored._strategy) is Weighted
    assert restored.serialize()["settings"]["keep"] == {"type": "messages", "messages": 2}
    within = ConversationCompressor(
        summarizer, trigger=COMBINED, keep=KeepWithin(messages=12, tokens=2000)
    )
    again = ConversationCompressor.deserialize(
        json.loads(json.dumps(within.serialize())), summarizer
    )
    assert again._keep == KeepWithin(messages=12, tokens=2000)


async def test_on_compress_takes_either_shape() -> None:
    seen: list[tuple[Any, ...]] = []

    def convo_shape(evicted: list[dict[str, Any]], summary: str, elapsed_ms: float) -> None:
        seen.append((len(evicted), summary, elapsed_ms))

    compressor = ConversationCompressor(
        RecordingSummarizer(),
        trigger=MessageThreshold(4),
        keep=KeepMessages(2),
        on_compress=convo_shape,
    )
    compressor.add_messages(large_turns(6, words=3))
    await compressor.get_compressed()
    assert len(seen) == 1
    count, summary, elapsed_ms = seen[0]
    assert count == 4
    assert summary == compressor.get_summary()
    assert elapsed_ms >= 0

    shared_seen: list[tuple[Any, ...]] = []
    shared = SummarizeCompressor(
        RecordingSummarizer(),
        trigger=MessageThreshold(4),
        keep=KeepMessages(2),
        on_compress=lambda evicted, summary, ms: shared_seen.append((evicted, summary, ms)),
    )
    history = large_turns(6, words=3)
    result = await shared.compress_detailed(history, thread_id="t")
    assert len(shared_seen) == 1
    evicted, summary, _ = shared_seen[0]
    assert evicted == history[:4]
    assert summary == result.summary

    events: list[Any] = []
    one_argument = SummarizeCompressor(
        RecordingSummarizer(),
        trigger=MessageThreshold(4),
        keep=KeepMessages(2),
        on_compress=events.append,
    )
    await one_argument.compress(history, thread_id="t")
    assert events[0].new_messages == 4
