"""The ceiling of ``refresh="background"`` bounds the whole answer served at once: the pinned
messages, the summary and every later message, on every store the background tests run on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

import slimcache.background
from slimcache import (
    CompressionResult,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    SummaryContext,
    TokenThreshold,
)
from slimcache.core.background import refreshes
from slimcache.messages import count_message_tokens
from slimcache.testing import StoreFactory
from tests.core.test_compressor_background import (
    KEEP,
    background,
    expected_answer,
    no_refresh_left,  # noqa: F401 (autouse: no refresh left between tests)
)
from tests.fakes import RecordingSummarizer, chat

pytestmark = pytest.mark.servers

CEILING = 24


class Gate:
    """A summarizer whose background refreshes wait until the test opens the gate; a request
    summarizing for itself (over the ceiling) goes through."""

    def __init__(self) -> None:
        self.requests: set[asyncio.Future[CompressionResult]] = set()
        self.opened = asyncio.Event()
        self.calls: list[SummaryContext] = []

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.calls.append(context)
        if asyncio.current_task() not in self.requests:
            await self.opened.wait()
        previous = f"{context.previous_summary} + " if context.previous_summary else ""
        return f"{previous}{context.task}[{context.start}-{context.end}]"


async def ask(gate: Gate, compressor: SummarizeCompressor, prefix: list[Any]) -> CompressionResult:
    """One request; a request waiting for the refresh that holds the thread's lease opens the
    gate for it."""
    request = asyncio.ensure_future(compressor.compress_detailed(prefix, thread_id="replay"))
    gate.requests.add(request)
    while not request.done():
        if compressor.stats.lease_waits:
            gate.opened.set()
        await asyncio.sleep(0)
    return await request


async def test_no_answer_served_while_a_refresh_is_pending_holds_more_than_the_ceiling(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    gate = Gate()
    history = chat(90)
    stale: list[int] = []
    waited = 0
    for length in range(2, len(history) + 1):
        prefix = history[:length]
        compressor = background(gate, store, ceiling=MessageThreshold(CEILING))
        result = await ask(gate, compressor, prefix)
        assert result.messages == expected_answer(prefix, result)
        if result.outcome == "stale":
            assert refreshes.status().pending == 1  # its refresh waits at the gate
            assert len(result.messages) <= CEILING, (length, result.summary_range)
            stale.append(len(result.messages))
        if gate.opened.is_set():  # the request waited: let the refreshes land, then hold again
            waited += 1
            assert await slimcache.background.drain()
            gate.opened.clear()
    gate.opened.set()
    assert await slimcache.background.drain()
    # Answered at once up to the ceiling exactly, before the first summary and after one.
    assert max(stale) == CEILING
    assert stale.count(CEILING) > 2
    assert waited > 2


async def test_an_answer_of_exactly_the_ceiling_is_served_at_once_and_one_more_waits(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    ceiling = MessageThreshold(CEILING)
    for thread in ("exact", "over"):
        # 26 messages over the ceiling: this request summarizes 1-15 and keeps 10.
        first = await background(summarizer, store, ceiling=ceiling).compress_detailed(
            chat(25), thread_id=thread
        )
        assert (first.outcome, first.summary_range) == ("summarized", (1, 25 - KEEP))
    compressor = background(summarizer, store, ceiling=ceiling)
    # The system message, the summary and 22 messages after it (the trigger fires past 20).
    exact = await compressor.compress_detailed(chat(37), thread_id="exact")
    assert (exact.outcome, exact.summary_range, exact.summarizer_calls) == ("stale", (1, 15), 0)
    assert len(exact.messages) == CEILING
    assert await slimcache.background.drain()
    over = await compressor.compress_detailed(chat(38), thread_id="over")
    assert (over.outcome, over.summarizer_calls) == ("extended", 1)
    assert refreshes.status().pending == 0


async def test_a_token_ceiling_counts_the_pinned_messages_and_the_summary(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    for thread in ("probe", "exact", "over"):
        await background(summarizer, store).compress(chat(45), thread_id=thread)  # 1-35
    history = chat(60)
    # Served at once on a thread like the others, to learn the answer's tokens as the
    # compressor counts them.
    probe = await background(summarizer, store).compress_detailed(history, thread_id="probe")
    assert (probe.outcome, probe.summary_range) == ("stale", (1, 35))
    tokens = sum(count_message_tokens(m) for m in probe.messages)
    assert await slimcache.background.drain()
    within = background(summarizer, store, ceiling=TokenThreshold(tokens))
    exact = await within.compress_detailed(history, thread_id="exact")
    assert exact.outcome == "stale"
    assert await slimcache.background.drain()
    below = background(summarizer, store, ceiling=TokenThreshold(tokens - 1))
    over = await below.compress_detailed(history, thread_id="over")
    assert (over.outcome, over.summarizer_calls) == ("extended", 1)
