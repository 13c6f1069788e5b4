"""The summary budget is enforced on every front door that asks for a summary.

Crux's ``summaryBudget``, convo-compress's ``maxSummaryTokens``: a summary that comes back
over it (by more than ``BUDGET_SLACK``) is condensed by one more call, and refused with
``SummarizerError`` when still over it, with nothing stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from slimcache import (
    ConversationCompressor,
    KeepMessages,
    MemoryStore,
    Message,
    MessageThreshold,
    SlidingWindow,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
)
from slimcache.stores import ThreadKeys
from tests.fakes import chat


class Rambling:
    """Ignores the budget: 2,500 tokens whatever it is asked, unless told how to condense."""

    def __init__(self, *, condenses: bool) -> None:
        self.condenses = condenses
        self.tasks: list[str] = []

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.tasks.append(context.task)
        if context.task == "condense" and self.condenses:
            return "a condensed summary"
        return "word " * 2000  # 2,500 tokens by the default counter


async def test_the_sliding_window_condenses_a_summary_over_its_budget() -> None:
    # Crux: summaryBudget 100, a model that writes 2,500 tokens.
    summarizer = Rambling(condenses=True)
    window = SlidingWindow("w", 4, summarizer, summary_budget=100, batch=2)
    await window.push_many(chat(10, system=None))
    messages = await window.get_messages()
    assert "a condensed summary" in messages[0]["content"]
    assert summarizer.tasks == ["summarize", "condense"]
    assert window.compressor.stats.condensed_over_budget == 1


async def test_a_summary_still_over_its_budget_is_refused_and_nothing_is_stored() -> None:
    store = MemoryStore()
    summarizer = Rambling(condenses=False)
    compressor = SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        max_summary_tokens=100,
    )
    with pytest.raises(SummarizerError, match="against a budget of 100"):
        await compressor.compress(chat(30), thread_id="t")
    assert summarizer.tasks == ["summarize", "condense"]
    assert await store.get(ThreadKeys("t").index) is None
    assert store.snapshot() == {}


async def test_the_in_process_compressor_holds_its_budget_too() -> None:
    # convo-compress: maxSummaryTokens.
    condensing = Rambling(condenses=True)
    compressor = ConversationCompressor(
        condensing, trigger=MessageThreshold(6), keep=KeepMessages(3), max_summary_tokens=100
    )
    compressor.add_messages(chat(8, system=None))
    await compressor.get_compressed()
    assert compressor.get_summary() == "a condensed summary"

    refusing = ConversationCompressor(
        Rambling(condenses=False),
        trigger=MessageThreshold(6),
        keep=KeepMessages(3),
        max_summary_tokens=100,
    )
    refusing.add_messages(chat(8, system=None))
    before = refusing.get_window()
    with pytest.raises(SummarizerError):
        await refusing.get_compressed()
    assert refusing.get_summary() is None
    assert refusing.get_window() == before


async def test_a_summary_within_the_slack_is_kept_as_it_is() -> None:
    # 110 tokens against a budget of 100: a tokenizer's difference, not a rambling model.
    calls: list[str] = []

    async def summarize(messages: Sequence[Message], context: SummaryContext) -> Any:
        calls.append(context.task)
        return "word " * 88

    compressor = SummarizeCompressor(
        summarize, trigger=MessageThreshold(20), keep=KeepMessages(10), max_summary_tokens=100
    )
    await compressor.compress(chat(30), thread_id="t")
    assert calls == ["summarize"]
