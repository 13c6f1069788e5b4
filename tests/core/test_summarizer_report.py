"""What a summarizer reports besides its summary reaches the compressor's stats.

And :func:`summarize_within_budget`, the shorter retry the bundled summarizers share, on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from slimcache import (
    KeepMessages,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
)
from slimcache.core.summarizer import SummarizerReport
from slimcache.core.truncation import Reply, shorter_prompt, summarize_within_budget
from tests.fakes import chat


def context(max_tokens: int = 40) -> SummaryContext:
    return SummaryContext("summarize", None, max_tokens, "Summarize.", "t", 0, 3)


def compressor(summarizer: object) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,  # type: ignore[arg-type]
        trigger=MessageThreshold(6),
        keep=KeepMessages(2),
    )


async def test_each_call_gets_a_fresh_report_counted_whether_it_returns_or_raises() -> None:
    seen: list[SummarizerReport] = []

    def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
        # A sync summarizer, run on the summarizer pool: the report still comes back.
        seen.append(context.report)
        context.report.truncated_replies += 2
        context.report.shorter_retries += 1
        if len(seen) == 2:
            raise RuntimeError("cut twice")
        context.report.truncated_accepted += 1
        return "kept although cut"

    squeezer = compressor(summarize)
    await squeezer.compress(chat(10), thread_id="a")
    with pytest.raises(SummarizerError):
        await squeezer.compress(chat(10), thread_id="b")
    assert len(seen) == 2
    assert seen[0] is not seen[1]
    stats = squeezer.stats
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (4, 2, 1)
    assert (stats.summarizer_calls, stats.summarizer_errors) == (2, 1)
    squeezer.reset_stats()
    assert squeezer.stats.truncated_replies == 0


def test_the_report_does_not_change_what_a_context_equals() -> None:
    one, two = context(), context()
    one.report.truncated_replies += 1
    assert one == two
    assert hash(one) == hash(two)
    assert "report" not in repr(one)


async def test_summarize_within_budget_asks_once_more_then_decides() -> None:
    prompts: list[str] = []
    replies = [Reply("cut", True, "finish_reason='length'"), Reply("whole", False, "stop")]

    async def complete(prompt: str) -> Reply:
        prompts.append(prompt)
        return replies[len(prompts) - 1]

    ctx = context(max_tokens=40)
    text = await summarize_within_budget(complete, ctx, on_truncated="raise", name="m")
    assert text == "whole"
    assert prompts == ["Summarize.", shorter_prompt("Summarize.", 40)]
    assert "at most 20 tokens" in prompts[1].lower()
    assert (ctx.report.truncated_replies, ctx.report.shorter_retries) == (1, 1)


@pytest.mark.parametrize("on_truncated", ["raise", "accept"])
async def test_an_empty_cut_reply_is_never_accepted(on_truncated: str) -> None:
    async def complete(prompt: str) -> Reply:
        return Reply("", True, "finish_reason='length'")

    ctx = context()
    with pytest.raises(SummarizerError, match="no text"):
        await summarize_within_budget(
            complete,
            ctx,
            on_truncated=on_truncated,  # type: ignore[arg-type]
            name="m",
        )
    assert (ctx.report.truncated_replies, ctx.report.truncated_accepted) == (2, 0)


async def test_a_call_cancelled_before_its_reply_is_counted_apart() -> None:
    started = asyncio.Event()
    calls = 0

    async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:  # the second call never gets its reply: the request is cancelled
            started.set()
            await asyncio.Event().wait()
        return "a summary"

    made = compressor(summarize)
    history = chat(8)
    await made.compress_detailed(history, thread_id="t")
    done = made.stats
    assert (done.summarizer_calls, done.cancelled_calls) == (1, 0)

    task = asyncio.create_task(made.compress_detailed(chat(14), thread_id="t"))
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stats = made.stats
    assert (stats.summarizer_calls, stats.summarizer_input_tokens) == (
        1,
        done.summarizer_input_tokens,
    )
    assert stats.cancelled_calls == 1
    assert stats.cancelled_input_tokens > 0
    assert stats.summarizer_errors == 0


async def test_a_cut_reply_stays_when_the_retry_is_empty_or_cut_again() -> None:
    for retry in (Reply("", False, "stop"), Reply("other", True, "finish_reason='length'")):
        replies = [Reply("first, cut", True, "finish_reason='length'"), retry]

        async def complete(prompt: str, replies: list[Reply] = replies) -> Reply:
            return replies.pop(0)

        ctx = context()
        text = await summarize_within_budget(complete, ctx, on_truncated="accept", name="m")
        assert text == "first, cut"
        assert (ctx.report.shorter_retries, ctx.report.truncated_accepted) == (1, 1)
