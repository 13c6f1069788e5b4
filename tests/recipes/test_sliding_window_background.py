"""SlidingWindow(refresh="background"): pushes return at once within the ceiling, and the
compaction runs in the background, hooks included; real stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

import slimcache.background
from slimcache import (
    ConfigurationError,
    Message,
    MessageThreshold,
    SlidingWindow,
    Store,
    SummaryContext,
)
from slimcache.core.background import refreshes
from slimcache.core.breaker import cool_downs_over
from tests.fakes import chat
from tests.recipes.test_sliding_window import summary_message, verbatim

MakeStore = Callable[..., Awaitable[Store]]

WINDOW, BATCH, CEILING = 4, 2, 12


def turns(count: int, start: int = 0) -> list[dict[str, Any]]:
    return chat(count, start=start, system=None)


class HeldSummarizer:
    """Records each call and holds it until the test lets it go (or makes it fail)."""

    def __init__(self) -> None:
        self.calls: list[SummaryContext] = []
        self.failure: BaseException | None = None
        self.go = asyncio.Event()
        self.entered = asyncio.Event()

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.calls.append(context)
        self.entered.set()
        await self.go.wait()
        if self.failure is not None:
            raise self.failure
        previous = f"{context.previous_summary} + " if context.previous_summary else ""
        return f"{previous}[{context.start}-{context.end}]"


@pytest.fixture(autouse=True)
async def no_refresh_left() -> AsyncIterator[None]:
    assert refreshes.status().pending == 0
    yield
    refreshes.cancel()
    assert await refreshes.drain(30)


def window(summarizer: Any, store: Store, **options: Any) -> SlidingWindow:
    return SlidingWindow(
        "w",
        WINDOW,
        summarizer,
        store,
        batch=BATCH,
        refresh="background",
        ceiling=MessageThreshold(CEILING),
        **options,
    )


async def test_pushes_return_at_once_and_the_compaction_follows(make_store: MakeStore) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    starts: list[tuple[int, int]] = []
    ends: list[tuple[int, int, float]] = []
    sliding = window(
        summarizer,
        store,
        on_compact_start=lambda count, total: starts.append((count, total)),
        on_compact_end=lambda before, after, ratio: ends.append((before, after, ratio)),
    )
    history = turns(9)
    for message in history:  # the compaction is due at 6 messages; nothing waits for it
        await sliding.push(message)
    await summarizer.entered.wait()
    assert len(summarizer.calls) == 1
    assert await sliding.get_messages() == history  # no summary yet: every message
    assert (starts, ends) == ([(2, sum(_tokens(history[:6])))], [])

    summarizer.go.set()
    assert await slimcache.background.drain()
    assert len(ends) == 1
    assert sliding.get_stats().evictions == 1
    # The next call finds the summary of the first two, and the next batch due: both at once.
    messages = await sliding.get_messages()
    assert messages == [summary_message("[0-1]"), *history[2:]]
    assert await slimcache.background.drain()
    assert await sliding.get_messages() == [summary_message("[0-1] + [2-4]"), *history[5:]]
    assert sliding.get_stats().evictions == 2


async def test_past_the_ceiling_a_push_compacts_before_returning(make_store: MakeStore) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    sliding = window(summarizer, store)
    history = turns(CEILING + 1)
    await sliding.push_many(history[:CEILING])  # within the ceiling: returns at once
    await summarizer.entered.wait()
    assert len(summarizer.calls) == 1
    refreshes.cancel()
    assert await slimcache.background.drain()
    summarizer.go.set()
    await sliding.push(history[CEILING])  # 13 messages, no summary: over, so it waits
    assert verbatim(await sliding.get_messages()) == history[-WINDOW:]
    assert len(summarizer.calls) == 2


async def test_the_ceiling_counts_the_summary_among_the_messages_returned(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    summarizer.go.set()
    sliding = window(summarizer, store)
    history = turns(CEILING + 2)
    await sliding.push_many(history[:6])
    assert await slimcache.background.drain()
    summarizer.go.clear()
    # The summary and 11 messages after it: 12, the ceiling, returned at once.
    await sliding.push_many(history[6:13])
    messages = await sliding.get_messages()
    assert messages == [summary_message("[0-1]"), *history[2:13]]
    assert len(messages) == CEILING
    refreshes.cancel()
    assert await slimcache.background.drain()
    summarizer.go.set()
    calls = len(summarizer.calls)
    await sliding.push(history[13])  # 13 with the summary: over, so it compacts first
    assert refreshes.status().pending == 0
    assert len(summarizer.calls) == calls + 1
    assert await sliding.get_messages() == [
        summary_message("[0-1] + [2-9]"),
        *history[-WINDOW:],
    ]


async def test_a_failed_background_compaction_raises_nothing_and_changes_nothing(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    summarizer.failure = RuntimeError("model down")
    summarizer.go.set()
    sliding = window(summarizer, store)
    history = turns(8)
    await sliding.push_many(history)
    assert await slimcache.background.drain()
    assert sliding.compressor.stats.background_failed == 1
    assert await sliding.get_messages() == history  # and a new refresh is offered
    assert await slimcache.background.drain()
    summarizer.failure = None
    cool_downs_over()  # the two failures in a row opened the summarizer's breaker
    await sliding.get_messages()
    assert await slimcache.background.drain()
    assert await sliding.get_messages() == [summary_message("[0-3]"), *history[4:]]
    assert sliding.compressor.stats.background_failed == 2


def test_background_needs_a_ceiling_above_the_batch() -> None:
    with pytest.raises(ConfigurationError, match="needs a ceiling"):
        SlidingWindow("w", WINDOW, HeldSummarizer(), refresh="background")
    with pytest.raises(ConfigurationError, match="must be above the trigger"):
        SlidingWindow(
            "w", WINDOW, HeldSummarizer(), refresh="background", ceiling=MessageThreshold(5)
        )


def _tokens(messages: Sequence[Message]) -> list[int]:
    from slimcache.messages import count_message_tokens

    return [count_message_tokens(m) for m in messages]
