"""The summary budget is enforced on every front door that asks for a summary.

Crux's ``summaryBudget``, convo-compress's ``maxSummaryTokens``: a summary that comes back
over it (by more than ``BUDGET_SLACK``) is condensed by one more call, and when still over it
is cut to the budget at a sentence or word boundary (``on_over_budget="cut"``, the default),
or refused with ``SummarizerError``, with nothing stored (``on_over_budget="raise"``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from slimcache import (
    ConfigurationError,
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
from slimcache.core.summarizer import cut_to_budget
from slimcache.messages import approx_tokens
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
        on_over_budget="raise",
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
        on_over_budget="raise",
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


# ---------------------------------------------------------------- cut to the budget

SENTENCES = "The trip is to Lisbon. Ada booked the flight for May 12. " * 200


class Overshooting:
    """Ignores the budget every time, condense included: sentences, far past it."""

    def __init__(self) -> None:
        self.tasks: list[str] = []

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.tasks.append(context.task)
        return SENTENCES


async def test_a_summary_still_over_its_budget_is_cut_at_a_sentence_and_cached(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    summarizer = Overshooting()
    compressor = SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(20), keep=KeepMessages(10),
        max_summary_tokens=100,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        result = await compressor.compress_detailed(chat(30), thread_id="t")
    assert summarizer.tasks == ["summarize", "condense"]
    assert result.cached
    assert result.summary is not None
    assert approx_tokens(result.summary) <= 100
    assert approx_tokens(result.summary) > 80  # as much as fits, not the first sentence only
    assert result.summary.endswith("May 12.")  # a whole sentence
    assert SENTENCES.startswith(result.summary)
    stats = compressor.stats
    assert (stats.condensed_over_budget, stats.cut_over_budget, stats.summarizer_errors) == (
        1,
        1,
        0,
    )
    assert "kept its first" in caplog.text
    assert "on_over_budget='cut'" in caplog.text
    again = await compressor.compress_detailed(chat(30), thread_id="t")
    assert (again.outcome, again.summary) == ("hit", result.summary)


async def test_every_front_door_cuts_by_default() -> None:
    window = SlidingWindow("w", 4, Overshooting(), summary_budget=50, batch=2)
    await window.push_many(chat(10, system=None))  # keeps working: no SummarizerError
    await window.push_many(chat(4, start=10, system=None))
    assert window.compressor.stats.cut_over_budget == 2
    in_process = ConversationCompressor(
        Overshooting(), trigger=MessageThreshold(6), keep=KeepMessages(3), max_summary_tokens=50
    )
    in_process.add_messages(chat(8, system=None))
    await in_process.get_compressed()
    summary = in_process.get_summary()
    assert summary is not None
    assert approx_tokens(summary) <= 50


def test_cut_to_budget_prefers_sentences_then_words() -> None:
    assert cut_to_budget("Short enough.", 10, approx_tokens) == "Short enough."
    text = "One two three. " + "four five six seven eight nine ten " * 10
    # The first sentence keeps less than half the budget: cut after a whole word instead.
    cut = cut_to_budget(text, 30, approx_tokens)
    assert approx_tokens(cut) <= 30 < approx_tokens(cut + " eleven")
    assert text.startswith(cut)
    assert cut.split()[-1] in text.split()
    assert cut_to_budget("x" * 100, 5, approx_tokens) == "x" * 20  # no word boundary at all


@pytest.mark.parametrize("front_door", [SummarizeCompressor, ConversationCompressor, "window"])
def test_a_bad_on_over_budget_is_refused(front_door: Any) -> None:
    def build() -> object:
        if front_door == "window":
            return SlidingWindow("w", 4, Overshooting(), on_over_budget="drop")  # type: ignore[arg-type]
        built: object = front_door(Overshooting(), on_over_budget="drop")
        return built

    with pytest.raises(ConfigurationError, match="on_over_budget must be 'cut' or 'raise'"):
        build()
