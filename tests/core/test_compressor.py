"""The summarize compressor against the memory store and a recording summarizer."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from slimcache import (
    DEFAULT_SUMMARIZE_PROMPT,
    AnyOf,
    CompressEvent,
    ConfigurationError,
    ContextWindow,
    Conversation,
    Custom,
    EvictableTokens,
    Hybrid,
    InvalidInput,
    KeepMessages,
    KeepTokens,
    Manual,
    MemoryStore,
    MessageThreshold,
    Prompts,
    StoreError,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
    TokenThreshold,
    approx_tokens,
    unwrap_messages,
    wrap_messages,
)
from slimcache.messages import DEFAULT_MESSAGE_OVERHEAD, count_message_tokens
from slimcache.stores import ThreadIndex, ThreadKeys
from slimcache.stores.protocol import SetOp, StoreOp
from tests.fakes import CountingStore, FailingStore, RecordingSummarizer, WithoutBatch, chat

THRESHOLD, KEEP = 20, 10


def make(summarizer: Any, store: Any = None, **options: Any) -> SummarizeCompressor:
    options.setdefault("trigger", MessageThreshold(THRESHOLD))
    options.setdefault("keep", KeepMessages(KEEP))
    return SummarizeCompressor(summarizer, store, **options)


class StatefulWindow:
    """The reference: a sliding window that keeps its boundary in memory between requests."""

    def __init__(self, threshold: int, keep: int, pinned: int) -> None:
        self.threshold, self.keep, self.boundary, self.calls = threshold, keep, pinned, 0

    def request(self, length: int) -> int:
        if length - self.boundary > self.threshold:
            self.boundary = length - self.keep
            self.calls += 1
        return self.boundary - 1


# ---------------------------------------------------------------- the stateless replay


@pytest.mark.parametrize("strategy", ["extend", "concat"])
async def test_stateless_replay_sends_each_message_once(strategy: str) -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(200)
    # Two instances on one store, alternating, as two stateless servers behind a load balancer.
    servers = [make(summarizer, store, strategy=strategy) for _ in range(2)]
    reference = StatefulWindow(THRESHOLD, KEEP, pinned=1)
    last_end = 0
    for length in range(2, len(history) + 1, 2):  # before each assistant turn
        request = history[:length]
        result = await servers[length % 4 // 2].compress_detailed(request, thread_id="chat-1")
        expected_end = reference.request(length)
        if result.summary_range is None:
            assert expected_end == 0
            assert result.messages == request
            continue
        assert result.summary_range == (1, expected_end)
        last_end = expected_end
        assert result.messages[0] == history[0]
        assert result.messages[2:] == request[expected_end + 1 :]

    sent = Counter(summarizer.sent_contents())
    assert max(sent.values()) == 1
    assert set(sent) == {m["content"] for m in history[1 : last_end + 1]}
    assert len(summarizer.calls) == reference.calls
    assert reference.calls >= 9


async def test_repeated_request_is_one_read_and_no_summarizer_call() -> None:
    store = CountingStore()
    summarizer = RecordingSummarizer()
    history = chat(45)
    first = await make(summarizer, store).compress(history, thread_id="t")
    calls, gets, sets = len(summarizer.calls), store.gets, store.sets
    assert calls == 1

    compressor = make(summarizer, store)
    again = await compressor.compress(history, thread_id="t")
    assert again == first
    assert len(summarizer.calls) == calls
    assert (store.gets - gets, store.sets - sets, store.deletes) == (1, 0, 0)
    assert compressor.stats.cache_hits == 1
    assert compressor.stats.store_round_trips == 1


async def test_stats_are_a_snapshot_the_compressor_never_changes_afterwards() -> None:
    compressor = make(RecordingSummarizer(), CountingStore())
    history = chat(45)
    await compressor.compress(history, thread_id="t")
    snapshot = compressor.stats
    fields = dict(vars(snapshot))
    assert type(snapshot) is type(compressor.stats)
    assert snapshot == compressor.stats
    await compressor.compress(history, thread_id="t")
    assert vars(snapshot) == fields  # the counters went on, the snapshot did not
    assert compressor.stats.requests == snapshot.requests + 1
    snapshot.cache_hits += 100
    assert compressor.stats.cache_hits == 1


async def test_tail_under_threshold_reuses_summary_without_calls() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(60)
    await make(summarizer, store).compress(history[:23], thread_id="t")
    assert len(summarizer.calls) == 1
    for length in range(24, 24 + 8):
        result = await make(summarizer, store).compress_detailed(history[:length], thread_id="t")
        assert result.outcome == "hit"
        assert result.messages[2:] == history[result.summary_range[1] + 1 : length]  # type: ignore[index]
    assert len(summarizer.calls) == 1


# ---------------------------------------------------------------- invalidation


async def test_edit_early_message_is_detected_and_old_summary_never_served() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer(result=None)
    history = chat(100)
    compressor = make(summarizer, store)
    for length in range(2, 101, 2):
        await compressor.compress(history[:length], thread_id="t")
    old = await compressor.compress_detailed(history, thread_id="t")
    assert old.outcome == "hit"
    old_summary = old.summary
    assert old_summary is not None

    edited = [dict(m) for m in history]
    edited[5]["content"] = "message 5 EDITED"
    summarizer.calls.clear()
    result = await compressor.compress_detailed(edited, thread_id="t")
    assert result.outcome == "summarized"
    assert result.summary != old_summary
    assert all(old_summary not in str(m["content"]) for m in result.messages)
    assert summarizer.calls[0].messages[4]["content"] == "message 5 EDITED"
    assert summarizer.calls[0].context.previous_summary is None
    assert compressor.stats.invalidations == 1
    # The stale ranges are gone from the store, only the new one and the index remain.
    keys = sorted(store.snapshot())
    assert keys == ["thread_t:index", f"thread_t:summary:1-{result.summary_range[1]}"]  # type: ignore[index]


def with_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every message but the system prompt an id: strings, and integers on every third."""
    named = [dict(m) for m in messages]
    for i, message in enumerate(named[1:], start=1):
        message["id"] = i if i % 3 == 0 else f"msg-{i}"
    return named


async def test_fingerprint_by_id_trusts_ids_and_still_sees_new_ids_and_unnamed_messages() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = with_ids(chat(100))
    compressor = make(summarizer, store, fingerprint="id")
    for length in range(2, 101, 2):
        await compressor.compress(history[:length], thread_id="t")
    calls = len(summarizer.calls)
    assert (await compressor.compress_detailed(history, thread_id="t")).outcome == "hit"

    # Content under the same id is the caller's promise: not re-read, so no new call.
    same_ids = [dict(m) for m in history]
    same_ids[5]["content"] = "message 5 EDITED"
    assert (await compressor.compress_detailed(same_ids, thread_id="t")).outcome == "hit"
    assert len(summarizer.calls) == calls
    # A new id (an edit as such callers make it) is seen.
    new_id = [dict(m) for m in history]
    new_id[5]["id"] = "msg-5-v2"
    result = await compressor.compress_detailed(new_id, thread_id="t")
    assert result.outcome == "summarized"
    assert compressor.stats.invalidations == 1
    # So is an integer id turned into the same digits as a string, and an edit to a message
    # that has no id.
    for edit in ({"id": "6"}, {"id": None, "content": "message 6 EDITED"}):
        edited = [dict(m) for m in new_id]
        edited[6].update(edit)
        result = await compressor.compress_detailed(edited, thread_id="t")
        assert result.outcome == "summarized", edit
        await compressor.compress_detailed(new_id, thread_id="t")  # back to the stored history

    # The same history by content: the entries made by id are not taken for its own.
    by_content = make(RecordingSummarizer(), store)
    assert (await by_content.compress_detailed(history, thread_id="t")).outcome == "summarized"


async def test_edit_near_the_end_falls_back_to_a_checkpoint() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(60)
    compressor = make(summarizer, store, strategy="extend")
    for length in range(2, 61, 2):
        await compressor.compress(history[:length], thread_id="t")
    ranges = sorted(k for k in store.snapshot() if ":summary:" in k)
    assert (
        ranges
        == ["thread_t:summary:1-11", "thread_t:summary:1-33", "thread_t:summary:1-55"][
            : len(ranges)
        ]
        or len(ranges) >= 2
    )

    head_end = (await compressor.compress_detailed(history, thread_id="t")).summary_range[1]  # type: ignore[index]
    edited = [dict(m) for m in history]
    edited[head_end - 2]["content"] = "changed near the end"
    summarizer.calls.clear()
    result = await compressor.compress_detailed(edited, thread_id="t")
    assert result.outcome == "extended"
    call = summarizer.calls[0]
    assert call.context.task == "extend"
    # Only messages after the previous checkpoint were sent, the edited one among them.
    assert call.context.start > 1
    assert "changed near the end" in [m["content"] for m in call.messages]
    assert call.messages == edited[call.context.start : call.context.end + 1]


async def test_replaying_a_thread_from_the_start_is_served_from_the_cache() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(120)
    first = [
        await make(summarizer, store).compress_detailed(history[:n], thread_id="t")
        for n in range(2, 121, 2)
    ]
    calls = len(summarizer.calls)
    assert calls >= 9
    second = [
        await make(summarizer, store).compress_detailed(history[:n], thread_id="t")
        for n in range(2, 121, 2)
    ]
    assert len(summarizer.calls) == calls
    assert [r.messages for r in second] == [r.messages for r in first]
    assert {r.outcome for r in second} <= {"hit", "unchanged"}
    # The newest summary is still the head afterwards: the long history is one read again.
    compressor = make(summarizer, store)
    assert (await compressor.compress_detailed(history, thread_id="t")).outcome == "hit"
    assert compressor.stats.store_round_trips == 1


async def test_reordered_and_deleted_messages_invalidate() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(30)
    compressor = make(summarizer, store)
    first = await compressor.compress_detailed(history, thread_id="t")
    assert first.outcome == "summarized"

    swapped = [dict(m) for m in history]
    swapped[2], swapped[3] = swapped[3], swapped[2]
    result = await compressor.compress_detailed(swapped, thread_id="t")
    assert result.outcome == "summarized"
    assert summarizer.calls[-1].messages[1:3] == [swapped[2], swapped[3]]

    shortened = history[:1] + history[2:]
    result = await compressor.compress_detailed(shortened, thread_id="t")
    assert result.summary != first.summary
    assert compressor.stats.invalidations == 2


async def test_metadata_and_id_changes_do_not_invalidate() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(25)
    await make(summarizer, store).compress(history, thread_id="t")
    relabelled = [{**m, "id": f"m{i}", "metadata": {"seen": True}} for i, m in enumerate(history)]
    result = await make(summarizer, store).compress_detailed(relabelled, thread_id="t")
    assert result.outcome == "hit"
    assert len(summarizer.calls) == 1


# ---------------------------------------------------------------- no data loss


async def test_summarizer_failure_leaves_store_byte_for_byte_unchanged() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(80)
    compressor = make(summarizer, store)
    for length in range(2, 60, 2):
        await compressor.compress(history[:length], thread_id="t")
    before = store.snapshot()
    assert before

    summarizer.fail_with = RuntimeError("model overloaded")
    with pytest.raises(SummarizerError) as caught:
        await compressor.compress(history, thread_id="t")
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "model overloaded" in str(caught.value)
    assert store.snapshot() == before
    assert compressor.stats.summarizer_errors == 1


@pytest.mark.parametrize(
    ("result", "message"),
    [("", "empty"), ("   \n", "empty"), (42, "expected a string"), (None, "expected a string")],
)
async def test_unusable_summaries_are_errors(result: object, message: str) -> None:
    store = MemoryStore()

    async def summarizer(messages: Any, context: SummaryContext) -> Any:
        return result

    with pytest.raises(SummarizerError, match=message):
        await make(summarizer, store).compress(chat(30), thread_id="t")
    assert store.snapshot() == {}


async def test_summarizer_timeout() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer(delay=5)
    compressor = make(summarizer, store, summarizer_timeout=0.05)
    with pytest.raises(SummarizerError, match="timed out") as caught:
        await compressor.compress(chat(30), thread_id="t")
    assert isinstance(caught.value.__cause__, asyncio.TimeoutError)
    assert store.snapshot() == {}


async def test_uncompressed_policy_returns_messages_as_given() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer(fail_with=RuntimeError("down"))
    errors: list[BaseException] = []
    compressor = make(
        summarizer,
        store,
        on_summarizer_error="uncompressed",
        on_error=lambda e, m: errors.append(e),
    )
    history = chat(30)
    result = await compressor.compress_detailed(history, thread_id="t")
    assert result.outcome == "passthrough"
    assert result.messages == history
    assert store.snapshot() == {}
    assert len(errors) == 1
    assert isinstance(errors[0], SummarizerError)


async def test_failed_index_write_rolls_back_the_range() -> None:
    store = FailingStore(fail_writes_after=1)  # the range write succeeds, the index write fails
    compressor = make(RecordingSummarizer(), store)
    with pytest.raises(StoreError) as caught:
        await compressor.compress(chat(30), thread_id="t")
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert store.data == {}


class CommitFaults(MemoryStore):
    """A memory store whose commit batch (the one writing a summary) meets trouble once."""

    def __init__(self, trouble: str) -> None:
        super().__init__()
        self.trouble = trouble
        self.batches: list[list[StoreOp]] = []

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        self.batches.append(list(ops))
        commit = any(isinstance(op, SetOp) and ":summary:" in op.key for op in ops)
        if commit and self.trouble == "index written meanwhile":
            self.trouble = ""
            # Another worker (a repair, or one that stopped waiting) writes the index first.
            other = make(RecordingSummarizer(), MemoryStore(), single_writer=True)
            await other.compress(chat(40), thread_id="t")
            await self.set("thread_t:index", other.store.snapshot()["thread_t:index"])  # type: ignore[attr-defined]
        if commit and self.trouble == "reply lost":
            self.trouble = ""
            await super().batch(ops)
            raise ConnectionError("connection reset after the batch was sent")
        return await super().batch(ops)


async def test_a_commit_batch_whose_index_changed_meanwhile_merges_with_it() -> None:
    store = CommitFaults("index written meanwhile")
    compressor = make(RecordingSummarizer(), store)
    result = await compressor.compress_detailed(chat(30), thread_id="t")
    assert result.outcome == "summarized"
    assert result.cached
    index = ThreadIndex.parse(store.snapshot()["thread_t:index"], thread="t")
    assert index is not None
    # The other worker's longer head stays; this worker's range is listed beside it.
    assert (index.head.start, index.head.end) == (1, 30)
    assert [(r.start, r.end) for r in index.ranges] == [(1, 20), (1, 30)]
    assert "thread_t:summary:1-20" in store.snapshot()
    assert "thread_t:lease" not in store.snapshot()


async def test_a_commit_batch_whose_reply_is_lost_is_kept_and_the_lease_not_kept() -> None:
    store = CommitFaults("reply lost")
    summarizer = RecordingSummarizer()
    with pytest.raises(StoreError, match="connection reset"):
        await make(summarizer, store).compress(chat(30), thread_id="t")
    snapshot = store.snapshot()
    # The lost batch landed: the index lists its range, so the range stays; no lease is left.
    index = ThreadIndex.parse(snapshot["thread_t:index"], thread="t")
    assert index is not None
    assert (index.head.start, index.head.end) == (1, 20)
    assert "thread_t:summary:1-20" in snapshot
    assert "thread_t:lease" not in snapshot
    # The next request is served the summary made, not summarizing it again.
    follow_up = await make(summarizer, store).compress_detailed(chat(30), thread_id="t")
    assert follow_up.outcome == "hit"
    assert follow_up.summary_range == (1, 20)
    assert len(summarizer.calls) == 1


class DeletesFail(CountingStore):
    """A plain store (no batch) that cannot delete."""

    async def delete(self, key: str) -> None:
        self.deletes += 1
        raise ConnectionError("delete refused")


async def test_without_batch_a_failed_delete_of_a_stale_range_only_leaves_garbage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = DeletesFail()
    compressor = make(RecordingSummarizer(), store, checkpoints=1, single_writer=True)
    history = chat(60)
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        for length in (30, 42, 54):
            result = await compressor.compress_detailed(history[:length], thread_id="t")
            assert result.outcome in ("summarized", "extended")
            assert result.cached
    assert store.deletes >= 1
    assert "could not delete stale range" in caplog.text
    index = ThreadIndex.parse(store.data["thread_t:index"], thread="t")
    assert index is not None
    assert len(index.ranges) == 1


async def test_store_failure_policy_bypass_compresses_without_cache() -> None:
    store = FailingStore(fail_reads=True)
    summarizer = RecordingSummarizer()
    with pytest.raises(StoreError, match="store is down"):
        await make(summarizer, store).compress(chat(30), thread_id="t")
    result = await make(summarizer, store, on_store_error="bypass").compress_detailed(
        chat(30), thread_id="t"
    )
    assert result.outcome == "uncached"
    assert result.summary_range == (1, 20)
    assert store.data == {}


async def test_write_failure_under_bypass_still_serves_the_summary() -> None:
    store = FailingStore(fail_writes_after=0)
    summarizer = RecordingSummarizer()
    result = await make(summarizer, store, on_store_error="bypass").compress_detailed(
        chat(30), thread_id="t"
    )
    assert result.outcome == "summarized"
    assert result.cached is False
    assert len(summarizer.calls) == 1
    assert store.data == {}


# ---------------------------------------------------------------- pinning and tool calls


async def test_leading_system_messages_are_pinned() -> None:
    summarizer = RecordingSummarizer()
    history = [{"role": "system", "content": "rules"}, {"role": "developer", "content": "more"}]
    history += chat(30, system=None)
    result = await make(summarizer).compress_detailed(history, thread_id="t")
    assert result.messages[:2] == history[:2]
    assert result.summary_range == (2, 21)
    assert all(m["role"] not in ("system", "developer") for m in summarizer.calls[0].messages)


def tool_chat() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    for turn in range(8):
        calls = [
            {"id": f"c{turn}a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": f"c{turn}b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ]
        messages += [
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{turn}a", "content": f"result a{turn}"},
            {"role": "tool", "tool_call_id": f"c{turn}b", "content": f"result b{turn}"},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    return messages


@pytest.mark.parametrize("keep", range(1, 12))
async def test_tool_calls_and_results_are_never_split(keep: int) -> None:
    summarizer = RecordingSummarizer()
    history = tool_chat()
    compressor = make(summarizer, trigger=MessageThreshold(keep + 1), keep=KeepMessages(keep))
    result = await compressor.compress_detailed(history, thread_id="t")
    assert result.summary_range is not None
    end = result.summary_range[1]
    verbatim = history[end + 1 :]
    assert verbatim[0]["role"] != "tool"
    assert history[end]["role"] != "assistant" or not history[end].get("tool_calls")
    sent = summarizer.calls[0].messages
    ids = {c["id"] for m in sent for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert ids == answered


async def test_pending_tool_call_at_the_end_stays_verbatim() -> None:
    history = tool_chat()[:-2]  # ends with an assistant tool call and one of its two results
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=MessageThreshold(2), keep=KeepMessages(1))
    result = await compressor.compress_detailed(history, thread_id="t")
    assert result.messages[-2]["tool_calls"] == history[-2]["tool_calls"]
    assert result.messages[-1] == history[-1]


# ---------------------------------------------------------------- triggers and keep policies


async def test_token_trigger_and_keep_tokens() -> None:
    summarizer = RecordingSummarizer()
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 40} for i in range(20)
    ]
    compressor = make(summarizer, trigger=TokenThreshold(150), keep=KeepTokens(60))
    result = await compressor.compress_detailed(history, thread_id="t")
    # Each message is 10 + 4 tokens: 14 * 20 = 280 > 150; keeping <= 60 tokens leaves 4 messages.
    assert result.summary_range == (0, 15)
    assert len(result.messages) == 1 + 4


async def test_either_trigger_and_context_window() -> None:
    history = chat(12)
    either = make(RecordingSummarizer(), trigger=AnyOf(MessageThreshold(50), TokenThreshold(30)))
    assert (await either.compress_detailed(history, thread_id="a")).outcome == "summarized"

    window = make(
        RecordingSummarizer(),
        trigger=ContextWindow(max_tokens=100, fraction=0.5),
        keep=KeepMessages(2),
    )
    result = await window.compress_detailed(history, thread_id="b")
    assert result.outcome == "summarized"
    assert len(result.messages) == 1 + 1 + 2
    quiet = make(RecordingSummarizer(), trigger=ContextWindow(max_tokens=100_000))
    assert (await quiet.compress_detailed(history, thread_id="c")).outcome == "unchanged"


async def test_manual_trigger_compresses_only_when_forced() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, store, trigger=Manual(), keep=KeepMessages(4))
    history = chat(40)
    assert (await compressor.compress_detailed(history, thread_id="t")).outcome == "unchanged"
    forced = await compressor.compress_detailed(history, thread_id="t", force=True)
    assert forced.outcome == "summarized"
    assert forced.summary_range == (1, 36)
    later = await compressor.compress_detailed(chat(44), thread_id="t")
    assert later.outcome == "hit"
    assert len(summarizer.calls) == 1


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"trigger": MessageThreshold(10), "keep": KeepMessages(10)}, "below MessageThreshold"),
        ({"trigger": TokenThreshold(100), "keep": KeepTokens(200)}, "below TokenThreshold"),
        ({"strategy": "merge"}, "strategy must be one of"),
        ({"strategy": "custom"}, "needs a merge function"),
        ({"max_summary_tokens": 0}, "max_summary_tokens"),
        ({"summary_role": "tool"}, "summary_role"),
        ({"summary_template": "no placeholder"}, "must contain"),
        ({"summary_template": "{summary} {nope}"}, "not a valid template"),
        ({"ttl": -1}, "ttl"),
        ({"namespace": "a\nb"}, "namespace"),
        ({"on_store_error": "ignore"}, "on_store_error"),
        ({"checkpoints": 0}, "checkpoints"),
        ({"fingerprint": "hash"}, "fingerprint must be 'content' or 'id'"),
    ],
)
def test_bad_configuration_is_rejected(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        SummarizeCompressor(RecordingSummarizer(), **options)


def test_bad_policy_values_are_rejected() -> None:
    for build in (
        lambda: MessageThreshold(0),
        lambda: KeepTokens(-5),
        lambda: ContextWindow(1000, fraction=1.5),
        lambda: AnyOf(),
    ):
        with pytest.raises(ConfigurationError):
            build()
    with pytest.raises(ConfigurationError, match="store must have"):
        SummarizeCompressor(RecordingSummarizer(), store=object())  # type: ignore[arg-type]


# ---------------------------------------------------------------- merge strategies


async def replay(compressor: SummarizeCompressor, history: list[dict[str, Any]]) -> str | None:
    result = None
    for length in range(2, len(history) + 1, 2):
        result = await compressor.compress_detailed(history[:length], thread_id="t")
    assert result is not None
    return result.summary


async def test_concat_appends_summaries_of_new_messages() -> None:
    summarizer = RecordingSummarizer()
    summary = await replay(make(summarizer, strategy="concat"), chat(45))
    assert summary == "summarize[1-11]\n\nsummarize[12-23]\n\nsummarize[24-35]"
    assert all(c.context.previous_summary is None for c in summarizer.calls)


async def test_extend_passes_previous_summary_and_only_new_messages() -> None:
    summarizer = RecordingSummarizer()
    history = chat(45)
    summary = await replay(make(summarizer, strategy="extend"), history)
    assert summary == "summarize[1-11] + extend[12-23] + extend[24-35]"
    assert summarizer.calls[1].context.previous_summary == "summarize[1-11]"
    assert summarizer.calls[1].messages == history[12:24]
    assert "Summary so far:\nsummarize[1-11]" in summarizer.calls[1].context.to_prompt(
        summarizer.calls[1].messages
    )


async def test_hybrid_condenses_past_its_budget() -> None:
    summarizer = RecordingSummarizer()
    summary = await replay(make(summarizer, strategy=Hybrid(8)), chat(45))
    condense = [c for c in summarizer.calls if c.context.task == "condense"]
    assert condense
    assert condense[0].messages == []
    assert condense[0].context.previous_summary == "summarize[1-11]\n\nsummarize[12-23]"
    assert summary is not None
    assert summary.startswith("summarize[1-11]\n\nsummarize[12-23] + condense")


async def test_replace_keeps_only_the_newest_part() -> None:
    summary = await replay(make(RecordingSummarizer(), strategy="replace"), chat(45))
    assert summary == "summarize[24-35]"


async def test_custom_merge_sync_and_async() -> None:
    seen: list[tuple[str | None, str]] = []

    def merge(previous: str | None, part: str) -> str:
        seen.append((previous, part))
        return f"<{previous}|{part}>"

    summary = await replay(make(RecordingSummarizer(), strategy=Custom(merge)), chat(34))
    assert seen[0] == (None, "summarize[1-11]")
    assert summary == "<<None|summarize[1-11]>|summarize[12-23]>"

    async def failing(previous: str | None, part: str) -> str:
        raise ValueError("bad merge")

    store = MemoryStore()
    with pytest.raises(SummarizerError, match="merge function failed"):
        await make(RecordingSummarizer(), store, strategy=Custom(failing)).compress(
            chat(30), thread_id="t"
        )
    assert store.snapshot() == {}


# ---------------------------------------------------------------- summarizer interface


async def test_sync_summarizer_runs_in_a_thread_and_prompts_are_overridable() -> None:
    import threading

    threads: list[str] = []

    def summarizer(messages: Any, context: SummaryContext) -> str:
        threads.append(threading.current_thread().name)
        return f"{context.prompt} ({len(messages)})"

    prompts = Prompts(summarize="Summarize in {max_tokens} tokens, pirate style.")
    compressor = make(summarizer, prompts=prompts, max_summary_tokens=77)
    result = await compressor.compress_detailed(chat(30), thread_id="t")
    assert result.summary == "Summarize in 77 tokens, pirate style. (20)"
    assert threads
    assert threads[0] != threading.main_thread().name


async def test_summary_message_role_and_template() -> None:
    compressor = make(
        RecordingSummarizer(),
        summary_role="user",
        summary_template="[{count} msgs {start}-{end}] {summary}",
    )
    result = await compressor.compress(chat(30), thread_id="t")
    assert result[1] == {"role": "user", "content": "[20 msgs 1-20] summarize[1-20]"}


# ---------------------------------------------------------------- thread ids and caching


async def test_without_thread_id_nothing_is_cached() -> None:
    store = CountingStore()
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, store)
    history = chat(30)
    first = await compressor.compress_detailed(history)
    second = await compressor.compress_detailed(history)
    assert (first.outcome, second.outcome) == ("uncached", "uncached")
    assert len(summarizer.calls) == 2
    assert (store.gets, store.sets, store.deletes) == (0, 0, 0)


async def test_threads_never_share_summaries() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(30)
    await make(summarizer, store).compress(history, thread_id="a")
    result = await make(summarizer, store).compress_detailed(history, thread_id="b")
    assert result.outcome == "summarized"
    assert len(summarizer.calls) == 2


async def test_keys_use_the_range_format_and_namespace() -> None:
    store = MemoryStore()
    await make(RecordingSummarizer(), store, namespace="app:").compress(chat(30), thread_id=123)
    assert sorted(store.snapshot()) == ["app:thread_123:index", "app:thread_123:summary:1-20"]
    assert ThreadKeys("123").summary(5, 15) == "thread_123:summary:5-15"


async def test_unusable_entries_are_misses_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    history = chat(30)
    await store.set("thread_t:index", "{not json")
    await store.set("thread_t:summary:1-20", '{"format": "slimcache.summary", "v": 99}')
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        result = await make(summarizer, store).compress_detailed(history, thread_id="t")
    assert result.outcome == "summarized"
    assert "unusable index" in caplog.text
    assert "unusable cache entry" in caplog.text

    # An entry copied under another range's key is not served for that range.
    good = await store.get("thread_t:summary:1-20")
    assert good is not None
    await store.delete("thread_t:index")
    await store.set("thread_t:summary:1-20", good.replace('"end":20', '"end":19'))
    summarizer.calls.clear()
    result = await make(summarizer, store).compress_detailed(history, thread_id="t")
    assert result.outcome == "summarized"
    assert len(summarizer.calls) == 1


async def test_lost_index_recovers_exact_range_without_a_call() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    await make(summarizer, store).compress(chat(30), thread_id="t")
    await store.delete("thread_t:index")
    result = await make(summarizer, store).compress_detailed(chat(30), thread_id="t")
    assert result.outcome == "hit"
    assert len(summarizer.calls) == 1
    assert await store.get("thread_t:index") is not None


async def test_concurrent_requests_summarize_once_with_set_if_absent() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer(delay=0.2)
    history = chat(30)
    results = await asyncio.gather(
        *(make(summarizer, store).compress_detailed(history, thread_id="t") for _ in range(5))
    )
    assert len(summarizer.calls) == 1
    assert {r.summary for r in results} == {"summarize[1-20]"}
    assert not [k for k in store.snapshot() if k.endswith(":lease")]


async def test_concurrent_requests_on_a_plain_store_stay_correct() -> None:
    store = CountingStore()
    summarizer = RecordingSummarizer(delay=0.05)
    history = chat(30)
    results = await asyncio.gather(
        *(make(summarizer, store).compress_detailed(history, thread_id="t") for _ in range(3))
    )
    assert {r.summary for r in results} == {"summarize[1-20]"}
    assert 1 <= len(summarizer.calls) <= 3
    assert sorted(store.data) == ["thread_t:index", "thread_t:summary:1-20"]


async def test_ttl_is_applied_to_entries() -> None:
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    summarizer = RecordingSummarizer()
    await make(summarizer, store, ttl=60).compress(chat(30), thread_id="t")
    now[0] = 61.0
    assert store.snapshot() == {}
    result = await make(summarizer, store, ttl=60).compress_detailed(chat(30), thread_id="t")
    assert result.outcome == "summarized"


# ---------------------------------------------------------------- conversations, stats, hooks


async def test_conversation_in_conversation_out() -> None:
    history = chat(30)
    conversation = wrap_messages(history, "thread-9")
    assert unwrap_messages(conversation) == history
    compressor = make(RecordingSummarizer())
    result = await compressor.compress(Conversation("thread-9", history, metadata={"user": "ann"}))
    assert isinstance(result, Conversation)
    assert result.thread_id == "thread-9"
    assert result.metadata == {
        "user": "ann",
        "slimcache": {
            "outcome": "summarized",
            "summary_range": [1, 20],
            "summarizer_calls": 1,
            "cached": True,
        },
    }
    assert result.messages == await compressor.compress(history, thread_id="thread-9")
    with pytest.raises(InvalidInput, match="not both"):
        await compressor.compress(conversation, thread_id="x")  # type: ignore[call-overload]


async def test_stats_and_hooks() -> None:
    events: list[tuple[str, Any]] = []

    async def on_compress(event: CompressEvent) -> None:
        events.append(("compress", event))

    def broken_hook(event: CompressEvent) -> None:
        raise RuntimeError("hook bug")

    compressor = make(
        RecordingSummarizer(),
        on_evict=lambda messages, reason: events.append(("evict", (len(messages), reason))),
        on_compress=on_compress,
        on_cache_hit=broken_hook,
    )
    history = chat(45)
    await replay(compressor, history)
    stats = compressor.stats
    assert stats.summarizer_calls == 3
    assert (stats.misses, stats.extensions) == (1, 2)
    assert stats.cache_hits == 22 - 3 - 9  # requests with a summary minus the three that made one
    assert stats.evicted_messages == 35
    assert stats.tokens_saved > 0
    assert stats.naive_input_tokens > stats.summarizer_input_tokens
    assert next(e for e in events if e[0] == "evict") == ("evict", (11, "messages>20"))
    made = [e[1] for e in events if e[0] == "compress"]
    assert [(m.outcome, m.start, m.end, m.new_messages) for m in made] == [
        ("summarized", 1, 11, 11),
        ("extended", 1, 23, 12),
        ("extended", 1, 35, 12),
    ]
    compressor.reset_stats()
    assert compressor.stats.requests == 0


async def test_invalid_messages_are_rejected_before_any_store_call() -> None:
    store = CountingStore()
    compressor = make(RecordingSummarizer(), store)
    bad = chat(4)
    bad[3] = {"role": "robot", "content": "beep"}
    with pytest.raises(InvalidInput, match=r"messages\[3\]: unknown role 'robot'") as caught:
        await compressor.compress(bad, thread_id="t")
    assert caught.value.index == 3
    with pytest.raises(InvalidInput, match="thread_id must not be empty"):
        await compressor.compress(chat(4), thread_id="")
    with pytest.raises(InvalidInput, match="thread_id must not be only whitespace"):
        await compressor.compress(chat(4), thread_id="  ")
    assert (store.gets, store.sets) == (0, 0)


# ---------------------------------------------------------------- entries of other settings


async def test_entries_of_other_prompts_or_strategy_are_not_served_by_default() -> None:
    store = MemoryStore()
    history = chat(30)
    await make(RecordingSummarizer(), store).compress(history, thread_id="t")
    other_prompts = Prompts(summarize="Summarize tersely in {max_tokens} tokens.")
    for options in ({"prompts": other_prompts}, {"strategy": "concat"}, {"summarizer_id": "v2"}):
        summarizer = RecordingSummarizer()
        result = await make(summarizer, store, **options).compress_detailed(history, thread_id="t")
        assert result.outcome == "summarized", options
        assert len(summarizer.calls) == 1
    # Accepting any entry serves what is cached, whoever made it.
    summarizer = RecordingSummarizer()
    result = await make(summarizer, store, reuse_entries="any").compress_detailed(
        history, thread_id="t"
    )
    assert result.outcome == "hit"
    assert summarizer.calls == []


async def test_strategy_objects_and_shortcuts_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="strategy must"):
        make(RecordingSummarizer(), strategy=object())
    with pytest.raises(ConfigurationError, match=r"Hybrid\.max_tokens"):
        Hybrid(0)
    with pytest.raises(ConfigurationError, match="merge function"):
        Custom("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="reuse_entries"):
        make(RecordingSummarizer(), reuse_entries="some")
    with pytest.raises(ConfigurationError, match="store_timeout"):
        make(RecordingSummarizer(), store_timeout=0)
    with pytest.raises(ConfigurationError, match="lease_ttl"):
        make(RecordingSummarizer(), lease_ttl=float("inf"))


async def test_deeply_nested_stored_values_are_misses() -> None:
    store = MemoryStore()
    await store.set("thread_t:index", "[" * 100_000)
    await store.set("thread_t:summary:1-20", "{" * 100_000)
    summarizer = RecordingSummarizer()
    result = await make(summarizer, store).compress_detailed(chat(30), thread_id="t")
    assert result.outcome == "summarized"
    assert result.summary == "summarize[1-20]"


async def test_hung_sync_summarizers_do_not_starve_the_default_executor() -> None:
    release = threading.Event()

    def hung(messages: Any, context: SummaryContext) -> str:
        release.wait(30)
        return "late"

    try:
        compressor = make(hung, summarizer_timeout=0.05, on_summarizer_error="uncompressed")
        for i in range(12):  # more than asyncio's default executor has threads here
            result = await compressor.compress_detailed(chat(30), thread_id=f"t{i}")
            assert result.outcome == "passthrough"
        # Store drivers run on asyncio's default executor: it must still answer at once.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 2) == 42
    finally:
        release.set()


class StuckStore(CountingStore):
    """A store whose reads hang, and whose cancelled reads take seconds to unwind, as a driver
    rolling back on a frozen server does."""

    async def get(self, key: str) -> str | None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(3)
            raise
        return None


async def test_store_timeout_bounds_a_call_whatever_the_driver_does() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"timed out after 0\.2s"):
        await make(RecordingSummarizer(), StuckStore(), store_timeout=0.2).compress(
            chat(30), thread_id="t"
        )
    assert time.monotonic() - started < 2
    # The caller's own timeout cuts a call too.
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(
            make(RecordingSummarizer(), StuckStore(), store_timeout=30).compress(
                chat(30), thread_id="t"
            ),
            0.2,
        )
    assert time.monotonic() - started < 2
    bypass = make(RecordingSummarizer(), StuckStore(), store_timeout=0.2, on_store_error="bypass")
    result = await bypass.compress_detailed(chat(30), thread_id="t")
    assert result.outcome == "uncached"


# ---------------------------------------------------------------- batches and hysteresis


def tool_turns(turns: int) -> list[dict[str, Any]]:
    """User, assistant-with-tool-call, tool result, assistant answer; repeated."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "rules"}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [
            {"role": "user", "content": f"question {i} " + "word " * (i % 5)},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    return messages


@pytest.mark.parametrize("keep", [3, 5, 12])
async def test_keep_messages_never_keeps_fewer(keep: int) -> None:
    history = tool_turns(40)
    compressor = make(RecordingSummarizer(), trigger=MessageThreshold(24), keep=KeepMessages(keep))
    for k in range(2, len(history) + 1):
        result = await compressor.compress_detailed(history[:k], thread_id="t")
        if result.summary_range is not None:
            verbatim = k - result.summary_range[1] - 1
            assert verbatim >= keep
            assert history[result.summary_range[1] + 1]["role"] != "tool"


async def replay_calls(compressor: SummarizeCompressor, history: list[dict[str, Any]]) -> int:
    for k in range(2, len(history) + 1):
        await compressor.compress(history[:k], thread_id="t")
    return compressor.stats.summarizer_calls


async def test_mixed_units_keep_their_hysteresis() -> None:
    history = chat(400)  # short messages: 2,000 tokens hold far more than 40 of them
    mixed = make(
        RecordingSummarizer(),
        trigger=AnyOf(MessageThreshold(40), TokenThreshold(6000)),
        keep=KeepTokens(2000),
    )
    calls = await replay_calls(mixed, history)
    # Each compression leaves at most 20 messages, so the next is at least 20 messages away.
    assert calls <= 400 // 20
    assert calls >= 400 // 41


async def test_evictable_tokens_summarizes_full_batches_and_keeps_a_strict_window() -> None:
    history = chat(300)
    summarizer = RecordingSummarizer()
    compressor = make(summarizer, trigger=EvictableTokens(200), keep=KeepMessages(12))
    lengths = []
    for k in range(2, len(history) + 1):
        result = await compressor.compress_detailed(history[:k], thread_id="t")
        if result.outcome in ("summarized", "extended"):
            lengths.append(k)
            assert result.summary_range is not None
            assert k - result.summary_range[1] - 1 == 12
    assert summarizer.calls
    for call in summarizer.calls:
        sent = sum(count_message_tokens(m) for m in call.messages)
        assert sent >= 200
    # Token trigger on the whole window (kept messages included) needs more calls for it.
    whole_window = make(RecordingSummarizer(), trigger=TokenThreshold(200), keep=KeepMessages(12))
    assert await replay_calls(whole_window, history) > len(summarizer.calls)


# ---------------------------------------------------------------- footprint and round trips


@pytest.mark.parametrize("strategy", ["extend", "concat"])
async def test_a_threads_footprint_is_bounded_by_checkpoints(strategy: str) -> None:
    store = MemoryStore()
    compressor = make(RecordingSummarizer(), store, checkpoints=4, strategy=strategy)
    history = chat(600)
    for k in range(2, len(history) + 1, 3):
        await compressor.compress(history[:k], thread_id="t")
    assert compressor.stats.summarizer_calls > 20
    keys = sorted(store.snapshot())
    assert len(keys) <= 4 + 1  # the listed ranges and the index
    assert "thread_t:index" in keys


async def test_round_trips_per_operation() -> None:
    history = chat(30)
    store = CountingStore()
    single = make(RecordingSummarizer(), store, single_writer=True)
    await single.compress(history, thread_id="t")
    assert single.stats.store_round_trips == 3  # read index, write range, write index
    assert (store.gets, store.sets, store.deletes) == (1, 2, 0)
    single.reset_stats()
    await single.compress(history, thread_id="t")
    assert single.stats.store_round_trips == 1  # a hit is one read

    # A store that runs batches: read the index; take the lease and read the index and the
    # range again; write the range and the index and release the lease.
    memory = MemoryStore()
    shared = make(RecordingSummarizer(), memory)
    await shared.compress(history, thread_id="t")
    stats = shared.stats
    assert (stats.store_reads, stats.store_batches, stats.store_round_trips) == (1, 2, 3)
    assert sorted(memory.snapshot()) == ["thread_t:index", "thread_t:summary:1-20"]
    single_batched = make(RecordingSummarizer(), MemoryStore(), single_writer=True)
    await single_batched.compress(history, thread_id="t")
    assert single_batched.stats.store_round_trips == 2  # read, then one batch of writes

    # The same abilities one call at a time: six round trips.
    unbatched = WithoutBatch(MemoryStore())
    one_by_one = make(RecordingSummarizer(), unbatched)
    await one_by_one.compress(history, thread_id="t")
    stats = one_by_one.stats
    assert (stats.store_reads, stats.store_writes, stats.store_deletes) == (2, 3, 1)
    assert stats.store_batches == 0
    assert sorted(unbatched.inner.snapshot()) == sorted(memory.snapshot())  # lease released


async def test_a_hit_counts_the_tokens_of_the_window_only() -> None:
    # With a real tokenizer, counting every message of a long history was most of a hit.
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    store = MemoryStore()
    history = chat(2000)
    for length in range(THRESHOLD + 2, len(history) + 1, 7):
        await make(RecordingSummarizer(), store, token_counter=words).compress(
            history[:length], thread_id="t"
        )
    compressor = make(RecordingSummarizer(), store, token_counter=words)
    assert (await compressor.compress_detailed(history, thread_id="t")).outcome in (
        "hit",
        "extended",
    )
    counted.clear()
    for _ in range(3):  # each request a new compressor, as on a stateless server
        hitting = make(RecordingSummarizer(), store, token_counter=words)
        hit = await hitting.compress_detailed(history, thread_id="t")
        assert hit.outcome == "hit"
    # The verbatim window (under THRESHOLD messages) and the summary, not 2,000 messages.
    assert len(counted) <= 3 * (THRESHOLD + 2)
    # What re-summarizing would have sent is still the covered messages' tokens, as recorded.
    assert hit.summary_range is not None
    start, end = hit.summary_range
    prompt = DEFAULT_SUMMARIZE_PROMPT.replace("{max_tokens}", "1000")
    covered = sum(DEFAULT_MESSAGE_OVERHEAD + words(m["content"]) for m in history[start : end + 1])
    assert hitting.stats.naive_input_tokens == words(prompt) + covered


async def test_counting_when_read_changes_no_result_and_no_figure() -> None:
    # approx_tokens itself counts every message at once; an equal counter of the caller's own
    # counts only what is read. Replayed request by request, the two agree on everything.
    def own(text: str) -> int:
        return approx_tokens(text)

    history = chat(120)
    runs = []
    for counter in (approx_tokens, own):
        compressor = make(RecordingSummarizer(), MemoryStore(), token_counter=counter)
        results = [
            await compressor.compress_detailed(history[:length], thread_id="t")
            for length in range(2, len(history) + 1)
        ]
        runs.append(([(r.outcome, r.messages, r.summary_range) for r in results], compressor.stats))
    assert runs[0] == runs[1]
    assert runs[0][1].cache_hits > 50


async def test_a_compressor_counts_each_text_once_over_a_conversation() -> None:
    # The window is mostly the same from one request to the next: a tokenizer as the counter
    # reads each text once, however many requests see it.
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    compressor = make(RecordingSummarizer(), MemoryStore(), token_counter=words)
    history = chat(150)
    outcomes = Counter(
        [
            (await compressor.compress_detailed(history[:length], thread_id="t")).outcome
            for length in range(2, len(history) + 1)
        ]
    )
    assert outcomes["hit"] > 100
    assert outcomes["summarized"] + outcomes["extended"] > 5
    assert max(Counter(counted).values()) == 1
