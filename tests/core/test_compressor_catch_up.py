"""More messages than one summarizer call may receive: a catch-up in steps, each cached.

A thread seen for the first time with a long history, or a big jump in one request, is folded
in consecutive calls that each stay under ``max_input_tokens``. Each step is cached as a range
of its own, under the request's lease, so a request stopped halfway is taken up from its last
cached step, and another request can be served from the steps already written.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from slimcache import (
    CompressEvent,
    Concat,
    KeepMessages,
    MemoryStore,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
)
from slimcache.core.input_bound import CUT_MARKER
from slimcache.llm import OpenAISummarizer
from slimcache.messages import approx_tokens, check_messages, count_message_tokens
from slimcache.stores import SummaryEntry, SupportsBatch, ThreadIndex, ThreadKeys
from slimcache.testing import StoreFactory
from tests.fakes import Call, FailingStore, RecordingSummarizer, chat
from tests.servers.llm_server import OPENAI_PATH, LLMServer, prompt_tokens

SUMMARIZER_ID = "model"
# Only reached when something hangs, so that a hang fails the test instead of the suite.
GUARD = 60.0
CUT = CUT_MARKER.split("{cut}")[1]


def make(summarizer: Any, store: Any = None, **options: Any) -> SummarizeCompressor:
    options.setdefault("summarizer_id", SUMMARIZER_ID)
    return SummarizeCompressor(summarizer, store, **options)


def received(call: Call) -> int:
    """What one call received, measured as the compressor measures it."""
    context = call.context
    tokens = approx_tokens(context.prompt) + sum(count_message_tokens(m) for m in call.messages)
    if context.previous_summary is not None:
        tokens += approx_tokens(context.previous_summary)
    return tokens


async def cached_ranges(store: Any, thread: str) -> tuple[ThreadIndex, list[SummaryEntry]]:
    keys = ThreadKeys(thread)
    index = ThreadIndex.parse(await store.get(keys.index), thread=keys.encoded)
    assert index is not None
    entries = []
    for ref in index.ranges:
        raw = await store.get(keys.summary(ref.start, ref.end))
        entry = SummaryEntry.parse(raw, thread=keys.encoded, start=ref.start, end=ref.end)
        assert entry is not None
        assert entry.fingerprint == ref.fingerprint
        entries.append(entry)
    return index, entries


class Held:
    """A summarizer whose calls numbered in ``at`` (from 1) wait until released; otherwise it
    answers as the :class:`RecordingSummarizer` it wraps."""

    def __init__(self, inner: RecordingSummarizer, *at: int) -> None:
        self.inner = inner
        self.count = 0
        self.reached = {n: asyncio.Event() for n in at}
        self.release = {n: asyncio.Event() for n in at}

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.count += 1
        number = self.count
        if number in self.reached:
            self.reached[number].set()
            await self.release[number].wait()
        return await self.inner(messages, context)


class FailsAt(RecordingSummarizer):
    """Fails its call number ``at`` (from 1), as a model that stops answering would."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        if len(self.calls) + 1 == self.at:
            self.calls.append(Call([dict(m) for m in messages], context))
            raise ConnectionError("the model went away")
        return await super().__call__(messages, context)


# ---------------------------------------------------------------- a long first request


async def test_a_long_first_history_is_folded_in_steps_each_cached(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    events: list[CompressEvent] = []
    compressor = make(summarizer, store, on_compress=events.append, strategy="extend")
    history = chat(3000)
    result = await compressor.compress_detailed(history, thread_id="t")

    calls = summarizer.calls
    assert len(calls) > 3
    assert all(received(call) <= 6000 for call in calls)
    # One after the other, from message 1 (after the system message) to the target.
    assert calls[0].context.start == 1
    for before, after in itertools.pairwise(calls):
        assert after.context.start == before.context.end + 1
        assert after.context.task == "extend"
    assert calls[0].context.task == "summarize"
    assert result.summary_range == (1, calls[-1].context.end) == (1, len(history) - 11)
    assert result.outcome == "summarized"
    assert result.summarizer_calls == len(calls)

    # Each step is a range of its own, the last one the head.
    index, entries = await cached_ranges(store, "t")
    assert [(e.start, e.end) for e in entries] == [(1, c.context.end) for c in calls]
    assert index.head.end == calls[-1].context.end
    assert entries[-1].summary == result.summary

    stats = compressor.stats
    assert stats.summarizer_calls == len(calls)
    assert stats.catch_up_steps == len(calls) - 1
    assert (stats.misses, stats.extensions, stats.cut_messages) == (1, 0, 0)
    assert stats.evicted_messages == len(history) - 11
    assert stats.summarizer_input_tokens == sum(received(call) for call in calls)
    # One round trip per step where the store runs batches: each commits against the index the
    # step before wrote (beside reading the index, and taking the lease with the reads).
    if isinstance(store, SupportsBatch):
        assert stats.store_round_trips == len(calls) + 2
    [event] = events
    assert (event.new_messages, event.summarizer_calls) == (len(history) - 11, len(calls))

    # Served as it is from then on, and extended with only the new messages.
    again = make(RecordingSummarizer(), store)
    assert (await again.compress_detailed(history, thread_id="t")).outcome == "hit"
    more = history + chat(15, start=3000, system=None)
    extended = await again.compress_detailed(more, thread_id="t")
    assert (extended.outcome, extended.summarizer_calls) == ("extended", 1)


async def test_without_a_bound_the_history_goes_in_one_call() -> None:
    summarizer = RecordingSummarizer()
    await make(summarizer, max_input_tokens=None).compress_detailed(chat(3000), thread_id="t")
    [call] = summarizer.calls
    assert received(call) > 30_000


async def test_ten_thousand_messages_through_a_server_that_refuses_long_prompts(
    llm_server: LLMServer,
) -> None:
    # An 8,192-token model: the whole history in one call is refused, for ever.
    llm_server.context_tokens = 8192
    history = chat(10_000)
    async with OpenAISummarizer(
        "small", base_url=llm_server.openai_base_url, api_key="k", max_retries=0
    ) as summarizer:
        unbounded = make(summarizer, max_input_tokens=None)
        with pytest.raises(
            SummarizerError, match=r"exceeds the available context size \(8192 tokens\)"
        ):
            await unbounded.compress_detailed(history, thread_id="t")
        assert await unbounded.store.get(ThreadKeys("t").index) is None

        compressor = make(summarizer, strategy="extend")
        result = await compressor.compress_detailed(history, thread_id="t")
    assert result.outcome == "summarized"
    bodies = llm_server.bodies()[1:]
    assert len(bodies) == compressor.stats.summarizer_calls > 10
    assert max(prompt_tokens(OPENAI_PATH, body) for body in bodies) <= 6000 < 8192
    assert all(body["max_tokens"] == 1000 for body in bodies)
    _, entries = await cached_ranges(compressor.store, "t")
    assert len(entries) == len(bodies)
    assert entries[-1].end == len(history) - 11


# ---------------------------------------------------------------- stopped halfway


@pytest.mark.parametrize("stop", ["summarizer fails", "request cancelled"])
async def test_a_request_stopped_halfway_resumes_from_its_last_cached_step(
    make_store: StoreFactory, stop: str
) -> None:
    store = await make_store()
    history = chat(10_000)
    whole = RecordingSummarizer()
    await make(whole, strategy="extend").compress_detailed(
        history, thread_id="t"
    )  # for reference, elsewhere
    steps = [(c.context.start, c.context.end) for c in whole.calls]
    assert len(steps) > 10
    k = 6  # the step the request is stopped in

    if stop == "summarizer fails":
        with pytest.raises(SummarizerError, match="went away"):
            await make(FailsAt(k), store, strategy="extend").compress_detailed(
                history, thread_id="t"
            )
    else:
        held = Held(RecordingSummarizer(), k)
        task = asyncio.create_task(
            make(held, store, strategy="extend").compress_detailed(history, thread_id="t")
        )
        await asyncio.wait_for(held.reached[k].wait(), GUARD)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    index, entries = await cached_ranges(store, "t")
    assert index.head.end == steps[k - 2][1]
    assert [(e.start, e.end) for e in entries] == [(1, end) for _, end in steps[: k - 1]]

    resumed = RecordingSummarizer()
    compressor = make(resumed, store, lock_wait=GUARD, strategy="extend")
    result = await asyncio.wait_for(compressor.compress_detailed(history, thread_id="t"), GUARD)
    assert result.outcome == "extended"
    assert [(c.context.start, c.context.end) for c in resumed.calls] == steps[k - 1 :]
    assert resumed.calls[0].context.previous_summary == entries[-1].summary
    assert (compressor.stats.summarizer_calls, compressor.stats.extensions) == (
        len(steps) - k + 1,
        1,
    )
    assert result.summary_range == (1, steps[-1][1])


# ---------------------------------------------------------------- another request meanwhile


async def test_a_concurrent_request_is_served_from_a_step_already_cached(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    history = chat(3000)
    reference = RecordingSummarizer()
    await make(reference).compress_detailed(history, thread_id="t")
    steps = [(c.context.start, c.context.end) for c in reference.calls]

    # The first request holds its second and third calls; the second request is a shorter
    # version of the thread, which the second step covers but for a few messages.
    held = Held(RecordingSummarizer(), 2, 3)
    first = asyncio.create_task(make(held, store).compress_detailed(history, thread_id="t"))
    await asyncio.wait_for(held.reached[2].wait(), GUARD)
    other_summarizer = RecordingSummarizer()
    other = make(other_summarizer, store, lock_wait=GUARD)
    shorter = history[: steps[1][1] + 16]
    second = asyncio.create_task(other.compress_detailed(shorter, thread_id="t"))
    while other.stats.lease_waits == 0:  # it waits for the first request's lease
        assert not second.done()
        await asyncio.sleep(0.01)

    held.release[2].set()  # the second step is cached, then the third call waits
    await asyncio.wait_for(held.reached[3].wait(), GUARD)
    served = await asyncio.wait_for(second, GUARD)
    assert not first.done()
    assert (served.outcome, served.summary_range) == ("hit", (1, steps[1][1]))
    assert served.summary == f"summarize[1-{steps[0][1]}] + extend[{steps[1][0]}-{steps[1][1]}]"
    assert other_summarizer.calls == []

    held.release[3].set()
    result = await asyncio.wait_for(first, GUARD)
    assert result.summary_range == (1, steps[-1][1])
    assert len(held.inner.calls) == len(steps)


# ---------------------------------------------------------------- what cannot fit


async def test_a_message_larger_than_the_bound_is_sent_cut(make_store: StoreFactory) -> None:
    store = await make_store()
    history = chat(60)
    huge = "The whole log follows. " + "line of the log\n" * 20_000
    history[20] = {"role": "assistant", "content": huge}
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, store, max_input_tokens=4000)
    result = await compressor.compress_detailed(history, thread_id="t")

    assert all(received(call) <= 4000 for call in summarizer.calls)
    [alone] = [c for c in summarizer.calls if c.context.start == 20]
    assert alone.context.end == 20
    [sent] = alone.messages
    assert sent["content"].startswith("The whole log follows. line of the log")
    assert sent["content"].endswith(CUT)
    assert len(sent["content"]) < len(huge) // 10
    assert compressor.stats.cut_messages == 1
    assert result.summary_range == (1, 50)
    assert huge not in str(summarizer.calls)
    _, entries = await cached_ranges(store, "t")
    assert (1, 20) in [(e.start, e.end) for e in entries]
    # The cut message is covered like any other: the range is served as it is.
    assert (
        await make(RecordingSummarizer(), store).compress_detailed(history, thread_id="t")
    ).outcome == "hit"


def tool_call(call_id: str, size: int) -> dict[str, Any]:
    arguments = '{"path": "' + "p" * size + '"}'
    return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": arguments}}


def tool_turns(count: int) -> list[dict[str, Any]]:
    """Tool-call units of varied sizes, each after a user turn, some with several calls."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You use tools."}]
    for n in range(count):
        messages.append({"role": "user", "content": f"step {n} " + "u" * (n % 5 * 40)})
        calls = [tool_call(f"c{n}_{i}", (n * 37 + i * 11) % 300) for i in range(n % 4 + 1)]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for i, call in enumerate(calls):
            result = f"result {n}.{i} " + "r" * ((n * 53 + i * 7) % 900)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


async def test_tool_calls_are_never_split_at_a_step_boundary(make_store: StoreFactory) -> None:
    store = await make_store()
    history = tool_turns(300)
    # A summary within its budget (one that grows with every step would be condensed).
    summarizer = RecordingSummarizer(result="the task so far")
    compressor = make(
        summarizer,
        store,
        max_input_tokens=900,
        max_summary_tokens=200,
        trigger=MessageThreshold(30),
        keep=KeepMessages(8),
    )
    # Grown in jumps, so that steps start after cached summaries too.
    for length in (400, 401, 700, len(history)):
        await compressor.compress_detailed(history[:length], thread_id="t")
    calls = summarizer.calls
    assert compressor.stats.catch_up_steps > 20
    for call in calls:
        assert received(call) <= 900
        called = {c["id"] for m in call.messages for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in call.messages if m["role"] == "tool"}
        assert called == answered, (call.context.start, call.context.end)
    unit_end = check_messages(history).unit_end
    _, entries = await cached_ranges(store, "t")
    assert all(unit_end[e.end] == e.end for e in entries)


async def test_a_tool_call_too_large_for_the_bound_is_sent_whole_and_cut() -> None:
    calls = [tool_call("a", 30_000), tool_call("b", 10)]
    history = [
        *chat(30),
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "a", "content": "x" * 50_000},
        {"role": "tool", "tool_call_id": "b", "content": "ok"},
        *chat(20, start=30, system=None),
    ]
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, max_input_tokens=3000)
    await compressor.compress_detailed(history, thread_id="t")
    [unit] = [c for c in summarizer.calls if c.context.start == 31]
    assert unit.context.end == 33
    assert received(unit) <= 3000
    call, big, small = unit.messages
    assert [c["id"] for c in call["tool_calls"]] == ["a", "b"]
    assert call["tool_calls"][0]["function"]["arguments"].endswith(CUT)
    assert big["content"].endswith(CUT)
    assert big["tool_call_id"] == "a"
    assert small == history[33]
    assert compressor.stats.cut_messages == 2


async def test_a_summary_longer_than_its_budget_still_leaves_room() -> None:
    # A cached summary longer than today's budget (made with a larger one): the summary a
    # step extends is sent cut, never whole.
    store = MemoryStore()
    history = chat(2000)
    made_long = RecordingSummarizer(result="s" * 40_000)
    await make(made_long, store, max_summary_tokens=20_000, max_input_tokens=None).compress(
        history[:300], thread_id="t"
    )
    summarizer = RecordingSummarizer(result="a summary within its budget")
    compressor = make(summarizer, store, max_input_tokens=5000)
    result = await compressor.compress_detailed(history, thread_id="t")
    assert result.outcome == "extended"
    assert len(summarizer.calls) > 3
    assert all(received(call) <= 5000 for call in summarizer.calls)
    first = summarizer.calls[0].context.previous_summary
    assert first is not None
    assert first.endswith(CUT)


async def test_concat_leaves_no_room_for_the_summary_it_does_not_send() -> None:
    # Each step's summary is appended, 500 tokens a time; it is never sent, so every step
    # still fills the bound with messages.
    summarizer = RecordingSummarizer(result="s" * 2000)
    compressor = make(summarizer, strategy=Concat(), max_input_tokens=3000)
    result = await compressor.compress_detailed(chat(2000), thread_id="t")
    calls = summarizer.calls
    assert len(calls) > 5
    assert all(c.context.previous_summary is None for c in calls)
    assert all(received(c) <= 3000 for c in calls)
    assert min(received(c) for c in calls[:-1]) > 2900
    assert result.summary == "\n\n".join(["s" * 2000] * len(calls))


async def test_without_a_thread_the_steps_are_made_and_nothing_is_cached() -> None:
    summarizer = RecordingSummarizer()
    compressor = make(summarizer)
    result = await compressor.compress_detailed(chat(3000))
    assert result.outcome == "uncached"
    assert len(summarizer.calls) > 3
    assert all(received(call) <= 6000 for call in summarizer.calls)
    assert compressor.stats.catch_up_steps == len(summarizer.calls) - 1
    assert await compressor.store.get(ThreadKeys("t").index) is None


async def test_a_store_that_fails_under_bypass_stops_caching_the_steps() -> None:
    store = FailingStore(fail_writes_after=0)
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, store, on_store_error="bypass")
    result = await compressor.compress_detailed(chat(3000), thread_id="t")
    assert (result.outcome, result.cached) == ("summarized", False)
    assert result.summary_range == (1, 2990)
    # The first step's write failed; the later ones were not tried.
    assert store.sets == 2  # that step's range, and the request's own at the end
    assert store.data == {}
