"""``refresh="background"``: answer within the ceiling at once, extend the summary afterwards.

The summarizers here hold each call until the test lets it go (no test waits on a clock), and
every test runs on a real store: memory, Redis and a SQLite file. Between tests no refresh is
left running (see ``no_refresh_left``).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import slimcache.background
from slimcache import (
    CompressionResult,
    ConfigurationError,
    ContextWindow,
    KeepMessages,
    Message,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    SummaryContext,
    TokenThreshold,
)
from slimcache.core.background import DEFAULT_MAX_QUEUED, DEFAULT_MAX_RUNNING, refreshes
from slimcache.core.breaker import cool_downs_over
from slimcache.stores import ThreadKeys
from slimcache.testing import StoreFactory
from tests.fakes import RecordingSummarizer, chat

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
TRIGGER, KEEP, CEILING = 20, 10, 40
TEMPLATE = "Summary of the earlier conversation:\n{summary}"


class HeldSummarizer:
    """Records each call and holds it until the test lets it go (or makes it fail)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[dict[str, Any]], SummaryContext]] = []
        self.failure: BaseException | None = None
        self._go = asyncio.Event()
        self.entered = asyncio.Event()

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.calls.append(([dict(m) for m in messages], context))
        self.entered.set()
        await self._go.wait()
        if self.failure is not None:
            raise self.failure
        previous = f"{context.previous_summary} + " if context.previous_summary else ""
        return f"{previous}{context.task}[{context.start}-{context.end}]"

    def hold(self) -> None:
        self._go.clear()
        self.entered.clear()

    def release(self) -> None:
        self._go.set()


def background(summarizer: Any, store: Store, **options: Any) -> SummarizeCompressor:
    options.setdefault("trigger", MessageThreshold(TRIGGER))
    options.setdefault("keep", KeepMessages(KEEP))
    return SummarizeCompressor(
        summarizer,
        store,
        refresh="background",
        ceiling=options.pop("ceiling", MessageThreshold(CEILING)),
        summarizer_id="background-test",
        **options,
    )


def inline(summarizer: Any, store: Store) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(TRIGGER),
        keep=KeepMessages(KEEP),
        summarizer_id="background-test",
    )


def pinned_count(history: Sequence[Message]) -> int:
    count = 0
    while count < len(history) and history[count]["role"] == "system":
        count += 1
    return count


def expected_answer(history: Sequence[Message], result: CompressionResult) -> list[Any]:
    """The served summary (if any) in place of what it covers, and every later message."""
    if result.summary_range is None:
        return [dict(m) for m in history]
    end = result.summary_range[1]
    pinned = pinned_count(history)
    summary = {"role": "system", "content": TEMPLATE.format(summary=result.summary)}
    return [*map(dict, history[:pinned]), summary, *map(dict, history[end + 1 :])]


async def snapshot(store: Store, thread: str, ranges: Sequence[tuple[int, int]]) -> list[Any]:
    keys = ThreadKeys(thread)
    names = [keys.index, keys.lease, *(keys.summary(s, e) for s, e in ranges)]
    return [await store.get(name) for name in names]


@pytest.fixture(autouse=True)
async def no_refresh_left() -> AsyncIterator[None]:
    """Each test starts and ends with no background refresh, and the default bounds.

    Set up before the store fixtures, this ends after they closed their stores: a test that
    leaves a refresh running drains it itself.
    """
    assert refreshes.status().pending == 0
    yield
    refreshes.cancel()
    assert await refreshes.drain(30)
    refreshes.configure(max_running=DEFAULT_MAX_RUNNING, max_queued=DEFAULT_MAX_QUEUED)


# ---------------------------------------------------------------- answering at once


async def test_a_replay_is_answered_within_the_ceiling_with_the_served_summary_and_the_rest(
    make_store: StoreFactory,
) -> None:
    # Each refresh ends four requests after it started: the answers in between lag behind.
    store = await make_store()
    summarizer = HeldSummarizer()
    history = chat(70)
    results: list[CompressionResult] = []
    started_at: int | None = None
    for length in range(2, len(history) + 1):
        summarizer.hold()
        compressor = background(summarizer, store)
        result = await compressor.compress_detailed(history[:length], thread_id="replay")
        results.append(result)
        assert result.messages == expected_answer(history[:length], result)
        assert len(result.messages) <= CEILING
        assert result.summarizer_calls == 0
        if result.outcome == "stale" and started_at is None:
            started_at = length
            assert result.stale_messages > 0
        if started_at is not None and length - started_at >= 4:
            summarizer.release()
            assert await slimcache.background.drain()
            started_at = None
    summarizer.release()
    assert await slimcache.background.drain()
    outcomes = {r.outcome for r in results}
    assert outcomes == {"unchanged", "stale", "hit"}
    # A stale answer lags exactly the messages the trigger wanted folded in.
    for length, result in enumerate(results, start=2):
        if result.outcome == "stale":
            covered = result.summary_range[1] if result.summary_range else 0
            assert result.stale_messages == length - 1 - KEEP - covered

    inline_calls = RecordingSummarizer()
    for length in range(2, len(history) + 1):
        await inline(inline_calls, store).compress(history[:length], thread_id="inline")
    assert len(summarizer.calls) <= len(inline_calls.calls) + 2

    # Once the refreshes drained, a fresh request is a hit.
    fresh = await background(summarizer, store).compress_detailed(history, thread_id="replay")
    assert fresh.outcome == "hit"
    assert fresh.messages == expected_answer(history, fresh)


async def test_the_refresh_is_counted_in_the_stats_of_the_compressor_that_offered_it(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    compressor = background(summarizer, store)
    result = await compressor.compress_detailed(chat(25), thread_id="t")
    assert result.outcome == "stale"
    assert (result.summary, result.summary_range, result.stale_messages) == (None, None, 15)
    assert compressor.stats.summarizer_calls == 0
    assert await slimcache.background.drain()
    stats = compressor.stats
    assert (stats.requests, stats.stale_served, stats.max_stale_messages) == (1, 1, 15)
    assert (stats.background_started, stats.background_finished) == (1, 1)
    assert (stats.summarizer_calls, stats.misses, stats.cache_hits) == (1, 1, 0)
    assert stats.evicted_messages == 15
    assert (await compressor.compress_detailed(chat(25), thread_id="t")).outcome == "hit"
    assert compressor.stats.cache_hits == 1


async def test_the_refresh_summarizes_the_messages_of_its_request_whatever_the_caller_does(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    history = chat(25)
    await background(summarizer, store).compress(history, thread_id="t")
    history += chat(6, start=25, system=None)  # the next turns, appended to the same list
    summarizer.release()
    assert await slimcache.background.drain()
    assert [(c.start, c.end) for _, c in summarizer.calls] == [(1, 15)]
    hit = await background(summarizer, store).compress_detailed(history[:26], thread_id="t")
    assert (hit.outcome, hit.summary_range) == ("hit", (1, 15))


async def test_the_ceiling_makes_a_request_wait_as_inline(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    # 45 messages after no summary: over MessageThreshold(40), so this request waits.
    result = await background(summarizer, store).compress_detailed(chat(45), thread_id="t")
    assert result.outcome == "summarized"
    assert (result.summarizer_calls, len(summarizer.calls)) == (1, 1)
    assert result.summary_range == (1, 45 - KEEP)
    assert refreshes.status().pending == 0
    # A summary 41 messages behind: over the ceiling too, so the request extends it now.
    longer = chat(45 - KEEP + 41)
    extended = await background(summarizer, store).compress_detailed(longer, thread_id="t")
    assert (extended.outcome, extended.summarizer_calls) == ("extended", 1)
    # The system message, the summary and 38 messages after it: 40, within the ceiling,
    # answered at once.
    assert extended.summary_range is not None
    within = chat(extended.summary_range[1] + CEILING - 2)
    stale = await background(summarizer, store).compress_detailed(within, thread_id="t")
    assert (stale.outcome, stale.summarizer_calls) == ("stale", 0)
    assert len(stale.messages) == CEILING
    assert await slimcache.background.drain()


async def test_a_request_that_waited_for_a_refresh_is_answered_from_it_when_within(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    summarizer.release()
    await background(summarizer, store).compress(chat(25), thread_id="t")  # cached: 1-15
    assert await slimcache.background.drain()
    summarizer.hold()
    # 30 messages after the summary: answered at once; its refresh (to 35) holds the lease.
    await background(summarizer, store).compress(chat(45), thread_id="t")
    await summarizer.entered.wait()
    # 45 after the summary: over the ceiling, so this request waits for the lease holder...
    waiter = background(summarizer, store)
    waiting = asyncio.ensure_future(waiter.compress_detailed(chat(60), thread_id="t"))
    while waiter.stats.lease_waits == 0:  # noqa: ASYNC110 (counted before it first sleeps)
        await asyncio.sleep(0)
    summarizer.release()
    result = await waiting
    # ...whose summary leaves it 25 behind: within, so it is answered from it at once.
    assert (result.outcome, result.summary_range, result.summarizer_calls) == (
        "stale",
        (1, 35),
        0,
    )
    assert result.messages == expected_answer(chat(60), result)
    assert await slimcache.background.drain()
    assert [c.end for _, c in summarizer.calls] == [15, 35, 50]
    hit = await background(summarizer, store).compress_detailed(chat(60), thread_id="t")
    assert (hit.outcome, hit.summary_range) == ("hit", (1, 50))


async def test_a_token_ceiling_bounds_the_whole_answer(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    history = chat(30)
    tokens = await background(
        summarizer,
        store,
        trigger=TokenThreshold(60),
        keep=KeepMessages(4),
        ceiling=ContextWindow(1000, fraction=1.0),
    ).compress_detailed(history, thread_id="roomy")
    assert tokens.outcome == "stale"
    tight = await background(
        summarizer,
        store,
        trigger=TokenThreshold(60),
        keep=KeepMessages(4),
        ceiling=TokenThreshold(100),
    ).compress_detailed(history, thread_id="tight")
    assert (tight.outcome, tight.summarizer_calls) == ("summarized", 1)
    assert await slimcache.background.drain()


async def test_force_compresses_now(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    result = await background(summarizer, store).compress_detailed(
        chat(12), thread_id="t", force=True
    )
    assert (result.outcome, result.summarizer_calls) == ("summarized", 1)


# ---------------------------------------------------------------- failures and shutdown


async def test_a_failed_refresh_leaves_the_cache_intact_and_later_requests_served(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    summarizer.release()
    history = chat(60)
    errors: list[Any] = []
    first = background(summarizer, store)
    await first.compress(history[:26], thread_id="t")  # stale, then cached up to 15
    assert await slimcache.background.drain()
    before = await snapshot(store, "t", [(1, 15), (1, 26)])
    assert before[0] is not None  # the index
    assert before[2] is not None  # the range 1-15

    summarizer.failure = RuntimeError("model down")
    compressor = background(summarizer, store, on_error=lambda exc, _: errors.append(exc))
    with caplog.at_level(logging.ERROR, logger="slimcache"):
        answer = await compressor.compress_detailed(history[:37], thread_id="t")
        assert await slimcache.background.drain()
    assert (answer.outcome, answer.summary_range) == ("stale", (1, 15))
    assert await snapshot(store, "t", [(1, 15), (1, 26)]) == before
    stats = compressor.stats
    assert (stats.background_failed, stats.summarizer_errors, stats.background_finished) == (
        1,
        1,
        0,
    )
    assert len(errors) == 1
    assert "background refresh failed" in caplog.text

    # on_summarizer_error="raise" (the default) raises in no request the cache can serve.
    again = await compressor.compress_detailed(history[:40], thread_id="t")
    assert (again.outcome, again.summary_range) == ("stale", (1, 15))
    assert await slimcache.background.drain()
    assert compressor.stats.background_failed == 2
    # The model is back, and the cool-down of its breaker (opened by the two failures) over:
    # the next request's refresh extends the summary.
    summarizer.failure = None
    cool_downs_over()
    await compressor.compress(history[:41], thread_id="t")
    assert await slimcache.background.drain()
    fresh = await compressor.compress_detailed(history[:41], thread_id="t")
    assert (fresh.outcome, fresh.summary_range) == ("hit", (1, 30))


async def test_a_request_over_the_ceiling_still_follows_on_summarizer_error(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer(fail_with=RuntimeError("model down"))
    lenient = background(summarizer, store, on_summarizer_error="uncompressed")
    result = await lenient.compress_detailed(chat(50), thread_id="t")
    assert result.outcome == "passthrough"


async def test_drain_waits_for_the_refreshes_pending(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    compressor = background(summarizer, store)
    await compressor.compress(chat(25), thread_id="t")
    await summarizer.entered.wait()
    assert refreshes.status().running == 1
    assert not await slimcache.background.drain(timeout=0)
    draining = asyncio.ensure_future(slimcache.background.drain())
    await asyncio.sleep(0)
    assert not draining.done()
    summarizer.release()
    assert await draining
    assert refreshes.status().pending == 0
    hit = await compressor.compress_detailed(chat(25), thread_id="t")
    assert (hit.outcome, hit.summary_range) == ("hit", (1, 15))


async def test_cancelled_at_shutdown_the_cache_is_as_it_was_and_the_next_request_redoes_it(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    compressor = background(summarizer, store)
    await compressor.compress(chat(25), thread_id="t")
    await summarizer.entered.wait()
    assert await store.get(ThreadKeys("t").lease) is not None  # the refresh holds the lease
    assert slimcache.background.cancel() == 1
    assert await slimcache.background.drain()
    assert await snapshot(store, "t", [(1, 15)]) == [None, None, None]
    stats = compressor.stats
    assert (stats.background_cancelled, stats.background_finished) == (1, 0)

    summarizer.release()
    result = await compressor.compress_detailed(chat(25), thread_id="t")
    assert result.outcome == "stale"
    assert await slimcache.background.drain()
    assert (await compressor.compress_detailed(chat(25), thread_id="t")).outcome == "hit"
    assert compressor.stats.background_started == 2


# ---------------------------------------------------------------- the process's bounds


async def test_one_refresh_per_thread_and_the_queue_drops_past_its_bound(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = await make_store()
    slimcache.background.configure(max_running=1, max_queued=1)
    summarizer = HeldSummarizer()
    compressor = background(summarizer, store)
    await compressor.compress(chat(25), thread_id="a")  # runs
    await compressor.compress(chat(27), thread_id="a")  # that thread's refresh runs already
    await compressor.compress(chat(25), thread_id="b")  # waits for a turn
    await compressor.compress(chat(29), thread_id="b")  # the newer messages take its place
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        await compressor.compress(chat(25), thread_id="c")  # no room: dropped
    assert "dropped" in caplog.text
    status = refreshes.status()
    assert (status.running, status.queued) == (1, 1)
    stats = compressor.stats
    assert (stats.stale_served, stats.background_started, stats.background_dropped) == (5, 2, 1)

    summarizer.release()
    assert await slimcache.background.drain()
    assert [(c.thread_id, c.start, c.end) for _, c in summarizer.calls] == [
        ("a", 1, 15),
        ("b", 1, 19),
    ]
    assert compressor.stats.background_finished == 2
    # The dropped thread's next request offers its refresh again.
    await compressor.compress(chat(25), thread_id="c")
    assert await slimcache.background.drain()
    assert (await compressor.compress_detailed(chat(25), thread_id="c")).outcome == "hit"


def test_the_bounds_are_checked() -> None:
    for bad in ({"max_running": 0}, {"max_running": True}, {"max_queued": -1}, {"max_queued": 1.5}):
        with pytest.raises(ConfigurationError, match=next(iter(bad))):
            slimcache.background.configure(**bad)


# ---------------------------------------------------------------- the longer verbatim tail


def tool_trajectory(turns: int) -> list[dict[str, Any]]:
    """Two pinned system messages, then turns of a question, a tool call with two results, and
    an answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": "Use the tools."},
    ]
    for turn in range(turns):
        calls = [
            {"id": f"c{turn}-{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for n in range(2)
        ]
        messages += [
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{turn}-0", "content": f"result {turn}a"},
            {"role": "tool", "tool_call_id": f"c{turn}-1", "content": f"result {turn}b"},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    return messages


def check_tool_pairs(messages: Sequence[dict[str, Any]]) -> None:
    """Every tool result follows the assistant message that called it, in the same answer."""
    called: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            called.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in called, message


async def test_tool_calls_and_pinned_messages_hold_in_the_longer_tail(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = HeldSummarizer()
    history = tool_trajectory(14)
    stale = 0
    for length in range(3, len(history) + 1):
        summarizer.hold()
        prefix = history[:length]
        result = await background(
            summarizer, store, trigger=MessageThreshold(12)
        ).compress_detailed(prefix, thread_id="tools")
        assert result.messages[:2] == prefix[:2]  # both system messages stay pinned in front
        assert result.messages == expected_answer(prefix, result)
        assert len(result.messages) <= CEILING
        check_tool_pairs(result.messages)
        stale += result.outcome == "stale"
        if length % 7 == 0:
            summarizer.release()
            assert await slimcache.background.drain()
    summarizer.release()
    assert await slimcache.background.drain()
    assert stale > 0
    for _, context in summarizer.calls:
        assert context.start >= 2  # never a pinned message summarized
        assert history[context.end + 1]["role"] != "tool"  # never a call split from a result


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"refresh": "background"}, "needs a ceiling"),
        ({"ceiling": MessageThreshold(40)}, "only with refresh='background'"),
        ({"refresh": "background", "ceiling": 40}, r"ceiling=MessageThreshold\(40\)"),
        ({"refresh": "background", "ceiling": MessageThreshold(20)}, "must be above the trigger"),
        (
            {
                "refresh": "background",
                "trigger": TokenThreshold(500),
                "ceiling": TokenThreshold(400),
            },
            "must be above the trigger",
        ),
        ({"refresh": "background", "ceiling": KeepMessages(40)}, "no reason"),
        ({"refresh": "later"}, "refresh"),
    ],
)
def test_bad_refresh_settings_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        SummarizeCompressor(RecordingSummarizer(), **options)


def test_a_ceiling_of_another_kind_than_the_trigger_is_taken() -> None:
    SummarizeCompressor(
        RecordingSummarizer(),
        refresh="background",
        trigger=MessageThreshold(20),
        ceiling=TokenThreshold(30_000),
    )


# ---------------------------------------------------------------- the guide


def test_the_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "background_refresh.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert [line.split(":")[1].split()[0] for line in lines] == ["stale", "stale", "hit"]
    assert lines[0].endswith("summary range None, 30 sent, 20 behind")
    assert lines[2].endswith("summary range (0, 19), 12 sent, 0 behind")


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "background-refresh.md").read_text()
    assert '```python\n--8<-- "examples/background_refresh.py"\n```' in guide
