"""``slimcache.llm`` against a real model: summarize, extend, hit, cut replies, the input bound."""

from __future__ import annotations

import pytest

from slimcache import (
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    SummarizeCompressor,
    SummarizerError,
)
from slimcache.llm import OpenAISummarizer
from tests.core.test_compressor_catch_up import cached_ranges
from tests.real_model.conftest import RealModel
from tests.real_model.history import long_history, trip

pytestmark = pytest.mark.real_model


def summarizer(model: RealModel, **options: object) -> OpenAISummarizer:
    return OpenAISummarizer(
        model.model,
        base_url=model.base_url,
        api_key=model.api_key,
        temperature=0,
        **options,  # type: ignore[arg-type]
    )


async def test_summarize_then_hit_then_extend(real_model: RealModel) -> None:
    async with summarizer(real_model, on_truncated="accept") as model:
        compressor = SummarizeCompressor(
            model,
            MemoryStore(),
            trigger=MessageThreshold(8),
            keep=KeepMessages(3),
            max_summary_tokens=96,
        )
        first = await compressor.compress_detailed(trip(10), thread_id="trip")
        assert first.outcome == "summarized"
        assert first.summary
        again = await compressor.compress_detailed(trip(10), thread_id="trip")
        assert (again.outcome, again.summarizer_calls, again.summary) == ("hit", 0, first.summary)
        longer = await compressor.compress_detailed(trip(16), thread_id="trip")
        assert longer.outcome == "extended"
        assert longer.summary_range is not None
        assert first.summary_range is not None
        assert longer.summary_range[1] > first.summary_range[1]
    stats = compressor.stats
    assert (stats.cache_hits, stats.misses, stats.extensions) == (1, 1, 1)


@pytest.mark.parametrize("on_truncated", ["raise", "accept"])
async def test_a_reply_cut_at_the_budget(real_model: RealModel, on_truncated: str) -> None:
    # Four tokens is less than any summary of this conversation: both replies are cut.
    async with summarizer(real_model, on_truncated=on_truncated) as model:
        compressor = SummarizeCompressor(
            model, trigger=MessageThreshold(8), keep=KeepMessages(3), max_summary_tokens=4
        )
        if on_truncated == "raise":
            with pytest.raises(SummarizerError, match="cut at the budget of 4 tokens"):
                await compressor.compress_detailed(trip(10), thread_id="t")
        else:
            result = await compressor.compress_detailed(trip(10), thread_id="t")
            assert (result.outcome, result.cached) == ("summarized", True)
    stats = compressor.stats
    assert (stats.truncated_replies, stats.shorter_retries) == (2, 1)
    assert stats.truncated_accepted == (on_truncated == "accept")


@pytest.mark.timeout(1800)  # some 12,000 prompt tokens: minutes on one slow CPU thread
async def test_a_history_longer_than_the_context_is_folded_in_bounded_calls(
    real_model: RealModel,
) -> None:
    history = [{"role": "system", "content": "You summarize."}, *long_history(280)]
    # A 6,000-token call takes minutes on one slow CPU thread: a generous timeout.
    async with summarizer(real_model, on_truncated="accept", max_retries=0, timeout=900) as model:
        unbounded = SummarizeCompressor(model, max_summary_tokens=64, max_input_tokens=None)
        with pytest.raises(SummarizerError):  # the server refuses a prompt over its context
            await unbounded.compress_detailed(history, thread_id="long")
        assert unbounded.stats.summarizer_calls == 1

        store = MemoryStore()
        # Chunks of 3,000 tokens: what fits a 4,096-token model, and quicker on a slow CPU
        # than the default 6,000 (a long prompt is slower per token).
        bounded = SummarizeCompressor(model, store, max_summary_tokens=64, max_input_tokens=3000)
        result = await bounded.compress_detailed(history, thread_id="long")
    assert result.outcome == "summarized"
    stats = bounded.stats
    assert stats.catch_up_steps >= 2
    assert stats.summarizer_calls == stats.catch_up_steps + 1 + stats.condensed_over_budget
    assert stats.summarizer_input_tokens <= 3000 * stats.summarizer_calls
    _, entries = await cached_ranges(store, "long")
    assert len(entries) == stats.catch_up_steps + 1  # every step cached as it was made
