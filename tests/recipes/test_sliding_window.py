"""SlidingWindow: batched compaction into a shared running summary, hooks and stats, real stores."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from slimcache import (
    DEFAULT_SUMMARY_TEMPLATE,
    ConfigurationError,
    InvalidInput,
    MemoryStore,
    Message,
    SlidingWindow,
    Store,
    StoreError,
    StoreTimeout,
    SummarizerError,
    SummaryContext,
    approx_tokens,
)
from slimcache.core.breaker import cool_downs_over
from slimcache.messages import count_message_tokens
from slimcache.stores import ThreadKeys
from tests.fakes import CallCountingStore, RecordingSummarizer, chat
from tests.recipes.test_window_memory import RecordingStore, assistant_calls, tool, user
from tests.servers.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
MakeStore = Callable[..., Awaitable[Store]]


class KeysRead(CallCountingStore):
    """A real store, recording every key read through ``get``."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.read: list[str] = []
        counted_get = self.get

        async def get(key: str) -> str | None:
            self.read.append(key)
            value: str | None = await counted_get(key)
            return value

        self.get = get


def turns(count: int, start: int = 0) -> list[dict[str, Any]]:
    return chat(count, start=start, system=None)


def summary_message(summary: str, role: str = "system") -> dict[str, Any]:
    return {"role": role, "content": DEFAULT_SUMMARY_TEMPLATE.format(summary=summary)}


def summary_text(message: dict[str, Any]) -> str:
    prefix = DEFAULT_SUMMARY_TEMPLATE.split("{summary}")[0]
    content = str(message["content"])
    assert content.startswith(prefix)
    return content[len(prefix) :]


def verbatim(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the summary (all of them before the first eviction)."""
    prefix = DEFAULT_SUMMARY_TEMPLATE.split("{summary}")[0]
    if messages and str(messages[0]["content"]).startswith(prefix):
        return messages[1:]
    return messages


def tokens(messages: Sequence[Message]) -> int:
    return sum(count_message_tokens(m) for m in messages)


def ranges(summarizer: RecordingSummarizer) -> list[tuple[int, int]]:
    return [(c.context.start, c.context.end) for c in summarizer.calls]


# ---------------------------------------------------------------- batches


async def test_compaction_runs_once_per_batch(make_store: MakeStore) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    window = SlidingWindow("chat-1", 4, summarizer, store, batch=3)
    history = turns(40)
    for message in history:
        await window.push(message)

    # The window grows to 4 + 3 messages, then the oldest 3 are folded in.
    calls = summarizer.calls
    assert len(calls) == (len(history) - 4) // 3
    assert len(calls) * 3 <= len(history)
    assert all(len(c.messages) == 3 for c in calls)
    # Every message went to the summarizer once, in order, each call extending the last.
    assert summarizer.sent_contents() == [m["content"] for m in history[: 3 * len(calls)]]
    assert calls[0].context.task == "summarize"
    assert calls[0].context.previous_summary is None
    for before, after in itertools.pairwise(calls):
        assert after.context.task == "extend"
        assert after.context.start == before.context.end + 1
        previous = after.context.previous_summary
        assert previous is not None
        assert previous.endswith(f"[{before.context.start}-{before.context.end}]")

    messages = await window.get_messages()
    assert summary_text(messages[0]).endswith(
        f"[{calls[-1].context.start}-{calls[-1].context.end}]"
    )
    assert messages[1:] == history[3 * len(calls) :]
    assert 4 <= len(messages) - 1 < 4 + 3
    assert len(calls) == (len(history) - 4) // 3  # reading made no call


async def test_batch_one_is_crux_strict_window(make_store: MakeStore) -> None:
    # Crux: windowSize 20, and after 25 pushes getMessages() is the summary and the last 20.
    store = await make_store()
    summarizer = RecordingSummarizer()
    window = SlidingWindow("chat-1", 20, summarizer, store, batch=1)
    history = turns(25)
    for message in history:
        await window.push(message)
        assert len(await window.get_messages()) <= 21
    messages = await window.get_messages()
    assert messages[1:] == history[5:]
    assert summary_text(messages[0]).endswith("[4-4]")
    assert ranges(summarizer) == [(i, i) for i in range(5)]  # one message per push
    stats = window.get_stats()
    assert (stats.total_messages, stats.windowed_messages, stats.evictions) == (25, 20, 5)


async def test_before_the_first_eviction_every_message_is_returned() -> None:
    summarizer = RecordingSummarizer()
    window = SlidingWindow("chat", 4, summarizer, batch=2)
    history = turns(5)
    for message in history:
        await window.push(message)
    assert await window.get_messages() == history
    assert summarizer.calls == []
    await window.push(turns(1, start=5)[0])
    messages = await window.get_messages()
    assert messages[0] == summary_message("summarize[0-1]")
    assert messages[1:] == [*history, *turns(1, start=5)][2:]


async def test_push_many_compacts_once() -> None:
    summarizer = RecordingSummarizer()
    window = SlidingWindow("chat", 4, summarizer)
    history = turns(30)
    await window.push_many(history)
    assert ranges(summarizer) == [(0, 25)]
    assert await window.get_messages() == [summary_message("summarize[0-25]"), *history[26:]]
    await window.push_many([])
    assert len(summarizer.calls) == 1


async def test_a_long_push_is_folded_in_calls_that_fit_the_bound(make_store: MakeStore) -> None:
    # Three thousand messages pushed at once: one compaction, made of several summarizer calls
    # that each receive at most max_input_tokens, each stored as it is made.
    starts: list[tuple[int, int]] = []
    summarizer = RecordingSummarizer()
    store = await make_store()
    window = SlidingWindow(
        "long",
        4,
        summarizer,
        store,
        max_input_tokens=3000,
        on_compact_start=lambda evicted, tokens: starts.append((evicted, tokens)),
    )
    history = turns(3000)
    await window.push_many(history)
    calls = summarizer.calls
    assert len(calls) > 5
    for call in calls:
        context = call.context
        sent = approx_tokens(context.prompt) + sum(count_message_tokens(m) for m in call.messages)
        sent += approx_tokens(context.previous_summary or "")
        assert sent <= 3000
    assert ranges(summarizer)[0][0] == 0
    assert ranges(summarizer)[-1][1] == 2995
    assert len(starts) == 1
    assert starts[0][0] == len(calls[0].messages)
    messages = await window.get_messages()
    last = calls[-1].context
    assert summary_text(messages[0]) == f"{last.previous_summary} + extend[{last.start}-2995]"
    assert messages[1:] == history[-4:]
    assert window.get_stats().evictions == 1
    assert (
        SlidingWindow("w", 4, summarizer, max_input_tokens=None).compressor._derived.bound.limit
        is None
    )


async def test_leading_system_messages_stay_first() -> None:
    summarizer = RecordingSummarizer()
    window = SlidingWindow("chat", 2, summarizer, batch=2, summary_role="user")
    history = chat(6)  # a system message, then six turns
    await window.push_many(history)
    messages = await window.get_messages()
    assert messages[0] == history[0]
    assert messages[1] == summary_message("summarize[1-4]", role="user")
    assert messages[2:] == history[5:]
    assert all(m["role"] != "system" for c in summarizer.calls for m in c.messages)


async def test_a_tool_call_is_never_split_from_its_results(make_store: MakeStore) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    window = SlidingWindow("tools", 3, summarizer, store, batch=2)
    history: list[dict[str, Any]] = []
    for turn in range(6):
        history += [
            user(f"question {turn}"),
            assistant_calls(f"{turn}a", f"{turn}b"),
            tool(f"{turn}a"),
            tool(f"{turn}b"),
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    for message in history:
        await window.push(message)
        assert verbatim(await window.get_messages())[0]["role"] != "tool"
    assert summarizer.calls
    for recorded in summarizer.calls:
        called = {c["id"] for m in recorded.messages for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in recorded.messages if m["role"] == "tool"}
        assert called == answered
    assert (
        summarizer.sent_contents()
        == [str(m["content"]) for m in history][: len(summarizer.sent_contents())]
    )


# ---------------------------------------------------------------- one summary, shared


async def test_instances_share_one_summary_across_restarts(make_store: MakeStore) -> None:
    store = await make_store()
    history = turns(23)

    reference = RecordingSummarizer()
    alone = SlidingWindow("reference", 4, reference, MemoryStore(), batch=2)
    for message in history:
        await alone.push(message)

    summarizer = RecordingSummarizer()
    first = SlidingWindow("chat-9", 4, summarizer, store, batch=2)
    second = SlidingWindow("chat-9", 4, summarizer, store, batch=2)
    for index, message in enumerate(history):
        await (first if index % 3 else second).push(message)

    # Two instances summarize exactly what one would, and see the same window.
    assert ranges(summarizer) == ranges(reference)
    expected = await alone.get_messages()
    assert await first.get_messages() == expected
    assert await second.get_messages() == expected

    # A restart: a new instance on the same store finds the summary without a call.
    after_restart = RecordingSummarizer()
    restarted = SlidingWindow("chat-9", 4, after_restart, store, batch=2)
    assert await restarted.get_messages() == expected
    assert after_restart.calls == []
    await restarted.push_many(turns(2, start=23))
    assert len(after_restart.calls) == 1
    extended = after_restart.calls[0].context
    assert extended.task == "extend"
    assert extended.previous_summary == summary_text(expected[0])
    assert extended.start == ranges(reference)[-1][1] + 1


async def test_concurrent_pushes_lose_nothing_and_summarize_nothing_twice(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    windows = [SlidingWindow("busy", 4, summarizer, store, batch=3) for _ in range(2)]
    await asyncio.gather(*(windows[n % 2].push(user(f"m{n}")) for n in range(30)))

    stored = [str(m["content"]) for m in await windows[0].memory.load_all("busy")]
    assert sorted(stored) == sorted(f"m{n}" for n in range(30))
    sent = summarizer.sent_contents()
    assert len(sent) == len(set(sent))
    messages = await windows[1].get_messages()
    assert messages == await windows[0].get_messages()
    assert [m["content"] for m in messages[1:]] == stored[-(len(messages) - 1) :]
    assert 4 <= len(messages) - 1 < 4 + 3


# ---------------------------------------------------------------- hooks and stats


async def test_hooks_get_the_evicted_count_and_token_totals() -> None:
    starts: list[tuple[int, int]] = []
    ends: list[tuple[int, int, float]] = []

    def on_start(evicted: int, total_tokens: int) -> None:
        starts.append((evicted, total_tokens))

    async def on_end(before: int, after: int, ratio: float) -> None:
        await asyncio.sleep(0)
        ends.append((before, after, ratio))

    summarizer = RecordingSummarizer()
    window = SlidingWindow(
        "hooks", 4, summarizer, batch=2, on_compact_start=on_start, on_compact_end=on_end
    )
    history = chat(20)  # a pinned system message, then twenty turns
    expected_starts: list[tuple[int, int]] = []
    expected_ends: list[tuple[int, int, float]] = []
    for message in history:
        shown = await window.get_messages()
        calls = len(summarizer.calls)
        await window.push(message)
        if len(summarizer.calls) > calls:
            before = tokens(shown) + count_message_tokens(message)
            after = tokens(await window.get_messages())
            expected_starts.append((len(summarizer.calls[-1].messages), before))
            expected_ends.append((before, after, after / before))

    assert len(summarizer.calls) == (20 - 4) // 2
    assert starts == expected_starts
    assert ends == expected_ends
    assert all(evicted == 2 for evicted, _ in starts)
    assert all(after < before for before, after, _ in ends[1:])


async def test_a_failing_hook_is_logged_and_the_push_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("hook bug")

    summarizer = RecordingSummarizer()
    window = SlidingWindow(
        "hooks", 2, summarizer, batch=2, on_compact_start=broken, on_compact_end=broken
    )
    with caplog.at_level(logging.ERROR, logger="slimcache"):
        await window.push_many(turns(4))
    assert len(summarizer.calls) == 1
    assert "on_compact_start hook raised" in caplog.text
    assert "on_compact_end hook raised" in caplog.text
    assert window.get_stats().evictions == 1


async def test_stats_describe_the_window(make_store: MakeStore) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    window = SlidingWindow("stats", 5, summarizer, store, batch=2)
    assert window.get_stats().to_dict() == {
        "total_messages": 0,
        "windowed_messages": 0,
        "summary_tokens": 0,
        "evictions": 0,
    }
    for message in turns(25):
        await window.push(message)
    messages = await window.get_messages()
    stats = window.get_stats()
    assert stats.total_messages == 25
    assert stats.windowed_messages == len(messages) - 1
    assert stats.summary_tokens == approx_tokens(summary_text(messages[0]))
    assert stats.evictions == len(summarizer.calls) == (25 - 5) // 2
    assert stats.to_dict() == dataclasses.asdict(stats)
    assert all(key.islower() for key in stats.to_dict())
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.evictions = 0  # type: ignore[misc]

    # Another instance sees the same window but ran no compaction itself.
    reader = SlidingWindow("stats", 5, summarizer, store, batch=2)
    await reader.get_messages()
    assert reader.get_stats() == dataclasses.replace(stats, evictions=0)


# ---------------------------------------------------------------- failures


async def test_a_failing_summarizer_leaves_messages_and_summary_as_they_were(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    starts: list[int] = []
    ends: list[float] = []

    def on_start(evicted: int, total_tokens: int) -> None:
        starts.append(evicted)

    def on_end(before: int, after: int, ratio: float) -> None:
        ends.append(ratio)

    window = SlidingWindow(
        "fragile", 4, summarizer, store, batch=2, on_compact_start=on_start, on_compact_end=on_end
    )
    history = turns(9)
    await window.push_many(history[:7])  # 7 > 4 + 2 - 1: messages 0-2 are folded in
    await window.push(history[7])  # a window of 5: nothing to do
    index_key = ThreadKeys("fragile").index
    index_before = await store.get(index_key)
    shown_before = await window.get_messages()
    assert index_before is not None
    assert summary_text(shown_before[0]) == "summarize[0-2]"
    assert (len(starts), len(ends)) == (1, 1)

    summarizer.fail_with = RuntimeError("model down")
    with pytest.raises(SummarizerError, match="model down") as caught:
        await window.push(history[8])  # a window of 6: compaction is due, and fails
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert await store.get(index_key) == index_before
    assert await window.memory.load_all("fragile") == history
    with pytest.raises(SummarizerError):
        await window.get_messages()
    assert await store.get(index_key) == index_before
    assert (len(starts), len(ends)) == (3, 1)  # started twice, never finished

    summarizer.fail_with = None
    cool_downs_over()  # the two failures in a row opened the summarizer's breaker
    messages = await window.get_messages()
    assert summary_text(messages[0]) == "summarize[0-2] + extend[3-4]"
    assert messages[1:] == history[5:]
    assert (len(starts), len(ends)) == (4, 2)


async def test_invalid_input_and_configuration() -> None:
    summarizer = RecordingSummarizer()
    window = SlidingWindow("strict", 4, summarizer)
    await window.push(user("fine"))
    for bad in ({"role": "robot", "content": "x"}, tool("nobody"), "text"):
        with pytest.raises(InvalidInput):
            await window.push(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"messages\[1\]"):
        await window.push_many([user("ok"), {"role": "user", "content": 5}])
    assert await window.memory.load_all("strict") == [user("fine")]
    # The window's own argument is named, not the compressor's thread_id.
    with pytest.raises(InvalidInput, match=r"^id must not be empty"):
        SlidingWindow("", 4, summarizer)
    with pytest.raises(InvalidInput, match=r"^id must not be only whitespace"):
        SlidingWindow("  ", 4, summarizer)
    bad_configs: list[Callable[[], object]] = [
        lambda: SlidingWindow("w", 0, summarizer),
        lambda: SlidingWindow("w", 4, summarizer, batch=0),
        lambda: SlidingWindow("w", 4, summarizer, summary_budget=0),
        lambda: SlidingWindow("w", 4, "not callable"),  # type: ignore[arg-type]
        lambda: SlidingWindow("w", 4, summarizer, object()),  # type: ignore[arg-type]
        lambda: SlidingWindow("w", 4, summarizer, on_compact_start=3),  # type: ignore[arg-type]
        lambda: SlidingWindow("w", 4, summarizer, summary_role="robot"),
        lambda: SlidingWindow("w", 4, summarizer, summary_template="no placeholder"),
    ]
    for bad_config in bad_configs:
        with pytest.raises(ConfigurationError):
            bad_config()


async def test_a_sync_summarizer_works() -> None:
    seen: list[int] = []

    def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
        seen.append(len(messages))
        return f"{len(messages)} messages"

    window = SlidingWindow("sync", 2, summarize, batch=2)
    await window.push_many(turns(4))
    assert seen == [2]
    assert (await window.get_messages())[0] == summary_message("2 messages")


async def test_clear_deletes_messages_and_summary() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    window = SlidingWindow("gone", 2, summarizer, store, batch=2)
    other = SlidingWindow("kept", 2, summarizer, store, batch=2)
    await window.push_many(turns(9))
    await other.push(user("stay"))
    await window.clear()
    prefix = ThreadKeys("gone").prefix
    assert [key for key in store.snapshot() if key.startswith(prefix)] == []
    assert await window.get_messages() == []
    assert window.get_stats().total_messages == 0
    assert await other.get_messages() == [user("stay")]
    await window.push_many(turns(4, start=100))
    assert summarizer.calls[-1].context.task == "summarize"


async def test_clear_deletes_the_history_once(sqlite_store_factory: MakeStore) -> None:
    store = KeysRead(await sqlite_store_factory())
    window = SlidingWindow("once", 2, RecordingSummarizer(), store, batch=2)
    await window.push_many(turns(9))
    store.read.clear()
    await window.clear()
    assert store.read.count(ThreadKeys("once").history_head) == 1
    assert await window.get_messages() == []
    assert await SlidingWindow("once", 2, RecordingSummarizer(), store).get_messages() == []


@pytest.mark.servers
async def test_a_store_failure_in_clear_is_the_store_calls_own_error(
    redis_server: RedisServer, redis_store_factory: MakeStore
) -> None:
    # The window is written and cleared through a store with the default bound, which a busy
    # machine does not run out; only the call on the frozen server has a short one.
    prefix = f"frozen-{uuid.uuid4().hex}:"
    store = await redis_store_factory(prefix=prefix)
    window = SlidingWindow("frozen", 2, RecordingSummarizer(), store, batch=2)
    await window.push_many(turns(5))
    hasty = await redis_store_factory(prefix=prefix, timeout=0.2)
    frozen = SlidingWindow("frozen", 2, RecordingSummarizer(), hasty, batch=2, store_timeout=0.2)
    redis_server.freeze()
    try:
        with pytest.raises(StoreTimeout) as caught:
            await frozen.clear()
    finally:
        redis_server.thaw()
    # The Redis store's own error, passed on as it is: not wrapped in another StoreError.
    assert type(caught.value) is StoreTimeout
    assert str(caught.value).startswith("Redis GET of key 'thread_frozen:")
    assert not isinstance(caught.value.__cause__, StoreError)
    assert len(await window.get_messages()) > 0  # the failed clear cleared nothing
    await window.clear()
    assert await window.get_messages() == []


# ---------------------------------------------------------------- store traffic


async def test_a_window_reads_each_stored_message_once() -> None:
    store = RecordingStore()
    summarizer = RecordingSummarizer()
    writer = SlidingWindow("long", 10, summarizer, store)
    await writer.push_many(turns(300))

    reader = SlidingWindow("long", 10, summarizer, store)
    store.reads.clear()
    await reader.get_messages()
    first = list(store.reads)
    assert sum(":messages:" in key for key in first) == 300 // 32

    for step in range(3):
        store.reads.clear()
        await reader.push(user(f"more {step}"))
        await reader.get_messages()
        assert not any(":messages:" in key for key in store.reads)


# ---------------------------------------------------------------- the docs guide


def test_the_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sliding_window.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.count("compacting 2 messages") == 3
    assert "The user asked: What is step 1; What is step 2; What is step 3" in out
    assert "user: What is step 4? Explain it fully." in out
    assert "'total_messages': 10, 'windowed_messages': 4" in out
    assert "'evictions': 3" in out


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "sliding-window.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/sliding_window.py"\n```' in guide
