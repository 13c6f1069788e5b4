"""``@cached_summarizer(store)`` on memory, a real Redis and a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import slimcache.messages.checks
import slimcache.messages.tokens
from slimcache import (
    CachedSummarizer,
    ConfigurationError,
    InvalidInput,
    MemoryStore,
    Store,
    StoreError,
    SummarizerError,
    approx_tokens,
    cached_summarizer,
)
from slimcache.messages import (
    DEFAULT_MESSAGE_OVERHEAD,
    CheckedMessages,
    LazyTokens,
    check_messages,
)
from slimcache.stores import RangeRef, SummaryEntry, ThreadIndex, ThreadKeys
from slimcache.stores.keys import FINGERPRINT_PREFIX, fingerprint_chain, fingerprint_range
from slimcache.testing import StoreFactory
from tests.fakes import FailingStore, chat, counting_hashes

ROOT = Path(__file__).resolve().parents[2]

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def summary_of(messages: list[dict[str, Any]]) -> str:
    """What the fake summarize functions return: how many messages, the first and the last."""
    return f"<{len(messages)}: {messages[0]['content']} .. {messages[-1]['content']}>"


class Original:
    """An existing ``summarize(messages) -> str``: records what it gets, says what it saw."""

    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail_with = fail_with

    def summarize(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append(messages)
        if self.fail_with is not None:
            raise self.fail_with
        return summary_of(messages)


class AsyncOriginal(Original):
    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0)
        return self.summarize(messages)


class SyncOriginal(Original):
    def __call__(self, messages: list[dict[str, Any]]) -> str:
        return self.summarize(messages)


def wrap(
    original: AsyncOriginal | SyncOriginal, store: Store | None, **options: Any
) -> CachedSummarizer:
    return cached_summarizer(store, **options)(original)


def keys_of(thread: str, namespace: str = "") -> tuple[str, str]:
    prefix = ThreadKeys(thread, namespace).prefix
    return prefix + "wrapped:index", prefix + "wrapped:summary:"


async def stored(store: Store, thread: str, ends: Sequence[int]) -> dict[str, str | None]:
    index, summary = keys_of(thread)
    found = {"index": await store.get(index)}
    for end in ends:
        found[f"0-{end}"] = await store.get(f"{summary}0-{end}")
    return found


# ---------------------------------------------------------------- caching and extension


@pytest.mark.parametrize("kind", [AsyncOriginal, SyncOriginal])
async def test_a_repeated_call_makes_no_call(make_store: StoreFactory, kind: type) -> None:
    store = await make_store()
    original = kind()
    summarize = wrap(original, store)
    history = chat(5)
    first = await summarize(history, thread_id="t")
    assert first == summary_of(history)
    assert len(original.calls) == 1
    assert original.calls[0] == history
    assert await summarize(history, thread_id="t") == first
    assert len(original.calls) == 1
    stats = summarize.stats
    assert (stats.requests, stats.misses, stats.cache_hits, stats.summarizer_calls) == (2, 1, 1, 1)


@pytest.mark.parametrize("kind", [AsyncOriginal, SyncOriginal])
async def test_more_messages_send_only_the_summary_and_the_new_ones(
    make_store: StoreFactory, kind: type
) -> None:
    store = await make_store()
    original = kind()
    summarize = wrap(original, store)
    history = chat(10)
    first = await summarize(history[:5], thread_id="t")
    second = await summarize(history, thread_id="t")
    assert len(original.calls) == 2
    assert original.calls[1] == [
        {"role": "system", "content": SUMMARY_PREFIX + first},
        *history[5:],
    ]
    assert second == f"<7: {SUMMARY_PREFIX + first} .. {history[-1]['content']}>"
    # And the longer conversation is now cached too.
    assert await summarize(history, thread_id="t") == second
    assert len(original.calls) == 2
    assert summarize.stats.extensions == 1


async def test_a_conversation_summarized_turn_by_turn_sends_each_message_once(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    history = chat(29)  # 30 messages with the system one
    for length in range(2, len(history) + 1, 2):
        await summarize(history[:length], thread_id="t")
    sent = [m["content"] for call in original.calls for m in call if m["role"] != "system"]
    assert sorted(sent) == sorted(m["content"] for m in history[1:])
    assert len(original.calls) == 15


async def test_two_servers_on_one_store_share_the_summaries(make_store: StoreFactory) -> None:
    store = await make_store()
    # Two processes with the same function: the same summarizer id.
    first, second = AsyncOriginal(), AsyncOriginal()
    server_a, server_b = wrap(first, store), wrap(second, store)
    history = chat(8)
    summary = await server_a(history[:4], thread_id="shared")
    assert await server_b(history[:4], thread_id="shared") == summary
    assert second.calls == []
    await server_b(history, thread_id="shared")
    assert second.calls == [[{"role": "system", "content": SUMMARY_PREFIX + summary}, *history[4:]]]
    assert len(first.calls) == 1


async def test_an_earlier_point_is_served_after_a_longer_call(make_store: StoreFactory) -> None:
    store = await make_store()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    history = chat(12)
    short = await summarize(history[:6], thread_id="t")
    await summarize(history, thread_id="t")
    assert await summarize(history[:6], thread_id="t") == short
    assert len(original.calls) == 2
    # The thread did not move back: the full conversation is still a hit.
    await summarize(history, thread_id="t")
    assert len(original.calls) == 2


async def test_concurrent_calls_keep_the_longest_summary(make_store: StoreFactory) -> None:
    store = await make_store()

    class Slow(AsyncOriginal):
        async def __call__(self, messages: list[dict[str, Any]]) -> str:
            await asyncio.sleep(0.05 if len(messages) > 6 else 0.01)
            return self.summarize(messages)

    original = Slow()
    summarize = wrap(original, store)
    history = chat(12)
    long, short = await asyncio.gather(
        summarize(history, thread_id="t"), summarize(history[:6], thread_id="t")
    )
    assert len(original.calls) == 2
    # The later index write merged with the earlier one: both listed, the longer the head.
    index_key, _ = keys_of("t")
    index = ThreadIndex.parse(await store.get(index_key), thread=ThreadKeys("t").encoded)
    assert index is not None
    assert sorted(r.end for r in index.ranges) == [5, 12]
    assert index.head.end == 12
    assert await wrap(original, store)(history, thread_id="t") == long
    assert await wrap(original, store)(history[:6], thread_id="t") == short
    assert len(original.calls) == 2


async def test_threads_and_namespaces_are_apart(make_store: StoreFactory) -> None:
    store = await make_store()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    other_namespace = wrap(original, store, namespace="other")
    history = chat(4)
    await summarize(history, thread_id="a")
    await summarize(history, thread_id="b")
    await other_namespace(history, thread_id="a")
    assert len(original.calls) == 3
    index, _ = keys_of("a", "other")
    assert await store.get(index) is not None


# ---------------------------------------------------------------- what a repeated call costs


def counting_hashes_without_json(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """:func:`counting_hashes`, and any per-message canonical JSON (the older chain's input)
    made an error."""

    def no_canonical(self: CheckedMessages) -> list[bytes]:
        raise AssertionError("encoded every message as canonical JSON")

    monkeypatch.setattr(CheckedMessages, "canonical", property(no_canonical))
    return counting_hashes(monkeypatch)


async def test_a_repeated_call_hashes_nothing_the_process_hashed_before(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting_hashes_without_json(monkeypatch)
    store = await make_store()
    original = AsyncOriginal()
    history = chat(30)
    summary = await wrap(original, store)(history, thread_id="t")
    assert calls == [len(history) - 1]
    calls.clear()
    # A stateless server: every request a new wrapper and freshly parsed messages.
    for _ in range(3):
        parsed = json.loads(json.dumps(history))
        assert await wrap(original, store)(parsed, thread_id="t") == summary
    assert calls == []
    assert len(original.calls) == 1

    edited = json.loads(json.dumps(history))
    edited[7]["content"] += " (edited)"
    await wrap(original, store)(edited, thread_id="t")
    assert calls  # hashed, not taken from the table
    assert original.calls[1] == edited


async def test_new_entries_carry_range_fingerprints(make_store: StoreFactory) -> None:
    store = await make_store()
    summarize = wrap(AsyncOriginal(), store)
    history = chat(5)
    await summarize(history, thread_id="t")
    raw = (await stored(store, "t", [len(history) - 1]))[f"0-{len(history) - 1}"]
    assert raw is not None
    entry = SummaryEntry.parse(raw, thread=ThreadKeys("t").encoded, start=0, end=len(history) - 1)
    assert entry is not None
    assert entry.fingerprint.startswith(FINGERPRINT_PREFIX)
    checked = check_messages(history)
    assert entry.fingerprint == fingerprint_range(checked.kinds, checked.payloads, 0, 5)


async def test_a_hit_counts_no_token_of_the_messages_it_covers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[int] = []
    count_one = LazyTokens._count
    count_all = slimcache.messages.tokens.approx_counts

    def counting_one(self: LazyTokens, position: int) -> int:
        counted.append(1)
        return count_one(self, position)

    def counting_all(contents: Sequence[str], overhead: int) -> list[int]:
        counted.append(len(contents))
        return count_all(contents, overhead)

    monkeypatch.setattr(LazyTokens, "_count", counting_one)
    # Patched where it is defined (lazy counts use it) and where the check imported it.
    monkeypatch.setattr(slimcache.messages.tokens, "approx_counts", counting_all)
    monkeypatch.setattr(slimcache.messages.checks, "approx_counts", counting_all)
    summarize = wrap(AsyncOriginal(), MemoryStore())
    history = chat(600)  # long enough for tokens to be counted as they are read
    await summarize(history, thread_id="t")
    assert sum(counted) >= len(history)
    counted.clear()
    await summarize(history, thread_id="t")
    assert counted == []
    tokens = sum(DEFAULT_MESSAGE_OVERHEAD + approx_tokens(m["content"]) for m in history)
    stats = summarize.stats
    assert (stats.cache_hits, stats.naive_input_tokens) == (1, 2 * tokens)


async def test_a_worker_new_to_a_thread_hashes_the_head_not_every_checkpoint(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await make_store()
    history = chat(40, system=None)
    built = wrap(AsyncOriginal(), store)
    summaries = [await built(history[:length], thread_id="t") for length in range(4, 41, 4)]
    index_raw = await store.get(keys_of("t")[0])
    assert index_raw is not None
    assert len(json.loads(index_raw)["ranges"]) == 10
    calls = counting_hashes_without_json(monkeypatch)  # and an empty table of what was hashed
    original = AsyncOriginal()
    longer = chat(42, system=None)
    await wrap(original, store)(longer, thread_id="t")
    assert original.calls == [
        [{"role": "system", "content": SUMMARY_PREFIX + summaries[-1]}, *longer[-2:]]
    ]
    # The head (messages 0-39) and the new summary (0-41): not the other nine checkpoints.
    assert sorted(calls) == [len(history) - 1, len(longer) - 1]


def older_chain_entry(
    messages: list[dict[str, Any]], thread: str, summary: str, summarizer: str
) -> tuple[str, str]:
    """An index and an entry covering all of ``messages`` as earlier versions wrote them: the
    fingerprint is the per-message chain's, bare hex."""
    checked = check_messages(messages)
    end = len(checked) - 1
    entry = SummaryEntry(
        thread=ThreadKeys(thread).encoded,
        start=0,
        end=end,
        fingerprint=fingerprint_chain(checked.canonical, 0)[end],
        summary=summary,
        summary_tokens=approx_tokens(summary),
        covered_tokens=sum(checked.tokens),
        created_at=1.0,
        summarizer=summarizer,
        prompt="",
        strategy="extend",
    )
    index = ThreadIndex(entry.thread, (RangeRef(0, end, entry.fingerprint),), entry)
    return index.to_json(), entry.to_json()


async def test_summaries_cached_with_the_older_chain_are_still_checked(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    history = chat(9)
    index_key, summary_key = keys_of("t")
    index, entry = older_chain_entry(history, "t", "summary from before", "model-a")
    await store.set(index_key, index)
    await store.set(f"{summary_key}0-{len(history) - 1}", entry)
    original = AsyncOriginal()
    summarize = wrap(original, store, summarizer_id="model-a")
    assert await summarize(json.loads(json.dumps(history)), thread_id="t") == "summary from before"
    assert original.calls == []
    # One more message: the older summary is extended, and the new entry is of the new form.
    longer = chat(10)
    assert longer[: len(history)] == history
    await summarize(longer, thread_id="t")
    assert original.calls == [
        [{"role": "system", "content": SUMMARY_PREFIX + "summary from before"}, longer[-1]]
    ]
    raw = await store.get(f"{summary_key}0-{len(longer) - 1}")
    assert raw is not None
    assert json.loads(raw)["fingerprint"].startswith(FINGERPRINT_PREFIX)
    # An edit inside what the older entry covers is still seen.
    edited = [dict(m) for m in history]
    edited[3]["content"] = "edited"
    await wrap(original, store, summarizer_id="model-a")(edited, thread_id="t")
    assert original.calls[-1] == edited


# ---------------------------------------------------------------- invalidation


async def test_an_edited_message_falls_back_to_the_last_summary_before_it(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    history = chat(8)
    first = await summarize(history[:4], thread_id="t")  # messages 0-3
    await summarize(history[:6], thread_id="t")  # 0-5
    await summarize(history, thread_id="t")  # 0-7
    edited = [dict(m) for m in history]
    edited[5]["content"] = "edited"
    await summarize(edited, thread_id="t")
    assert len(original.calls) == 4
    # Messages 0-3 are unchanged: their summary is extended with 4-7.
    assert original.calls[3] == [{"role": "system", "content": SUMMARY_PREFIX + first}, *edited[4:]]
    assert summarize.stats.invalidations == 1
    # The edited conversation is cached now; the original one is not served for it.
    await summarize(edited, thread_id="t")
    assert len(original.calls) == 4
    # The summaries of the unedited ranges past the edit are gone from the store.
    assert (await stored(store, "t", [5]))["0-5"] is None


async def test_an_edit_of_the_first_message_summarizes_everything_again(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    history = chat(6)
    await summarize(history, thread_id="t")
    edited = [{"role": "system", "content": "Be terse."}, *history[1:]]
    await summarize(edited, thread_id="t")
    assert original.calls[1] == edited


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(role="assistant"),
        lambda m: m.update(name="bob"),
        lambda m: m.update(content=m["content"] + " "),
    ],
)
async def test_any_edit_that_changes_what_is_summarized_invalidates(edit: Any) -> None:
    original = AsyncOriginal()
    summarize = wrap(original, None)
    history = chat(4, system=None)
    await summarize(history, thread_id="t")
    edited = [dict(m) for m in history]
    edit(edited[2])
    await summarize(edited, thread_id="t")
    assert len(original.calls) == 2


async def test_metadata_and_ids_are_not_edits(make_store: StoreFactory) -> None:
    store = await make_store()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    history = chat(6)
    await summarize(history, thread_id="t")
    changed = [{**m, "metadata": {"seen": True}, "id": f"m{i}"} for i, m in enumerate(history)]
    await summarize(changed, thread_id="t")
    assert len(original.calls) == 1


async def test_another_summarizer_id_is_not_served(make_store: StoreFactory) -> None:
    store = await make_store()
    original = AsyncOriginal()
    history = chat(6)
    await wrap(original, store, summarizer_id="model-a")(history, thread_id="t")
    await wrap(original, store, summarizer_id="model-b")(history, thread_id="t")
    assert len(original.calls) == 2
    assert original.calls[1] == history


async def test_a_thread_lists_at_most_its_checkpoints() -> None:
    store = MemoryStore()
    summarize = wrap(AsyncOriginal(), store, checkpoints=3)
    history = chat(20)
    for length in range(2, 21, 2):
        await summarize(history[:length], thread_id="t")
    ranges = sorted(key for key in store.snapshot() if ":wrapped:summary:" in key)
    _, summary = keys_of("t")
    assert ranges == sorted(f"{summary}0-{end}" for end in (15, 17, 19))


async def test_entries_expire_after_their_ttl() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])
    original = AsyncOriginal()
    summarize = wrap(original, store, ttl=60)
    history = chat(4)
    await summarize(history, thread_id="t")
    now[0] += 30
    await summarize(history, thread_id="t")
    assert len(original.calls) == 1
    now[0] += 31
    await summarize(history, thread_id="t")
    assert len(original.calls) == 2


# ---------------------------------------------------------------- a custom extension


@pytest.mark.parametrize("is_async", [True, False])
async def test_extend_replaces_the_convention(make_store: StoreFactory, is_async: bool) -> None:
    store = await make_store()
    original = AsyncOriginal()
    seen: list[tuple[str, list[dict[str, Any]]]] = []

    def combine(previous: str, new: list[dict[str, Any]]) -> str:
        seen.append((previous, new))
        return f"{previous} + {len(new)} more"

    async def combine_async(previous: str, new: list[dict[str, Any]]) -> str:
        return combine(previous, new)

    summarize = wrap(original, store, extend=combine_async if is_async else combine)
    history = chat(9)
    first = await summarize(history[:5], thread_id="t")
    assert await summarize(history, thread_id="t") == f"{first} + 5 more"
    assert seen == [(first, history[5:])]
    assert len(original.calls) == 1


# ---------------------------------------------------------------- failures


async def test_a_failing_function_raises_and_writes_nothing(make_store: StoreFactory) -> None:
    store = await make_store()
    failure = ConnectionError("LLM down")
    original = AsyncOriginal(fail_with=failure)
    summarize = wrap(original, store)
    history = chat(6)
    with pytest.raises(SummarizerError) as caught:
        await summarize(history, thread_id="t")
    assert caught.value.__cause__ is failure
    assert await stored(store, "t", [len(history) - 1]) == {"index": None, "0-6": None}
    assert summarize.stats.summarizer_errors == 1


async def test_a_failing_extension_leaves_the_store_as_it_was(make_store: StoreFactory) -> None:
    store = await make_store()
    original = SyncOriginal()
    summarize = wrap(original, store)
    history = chat(10)
    await summarize(history[:4], thread_id="t")
    before = await stored(store, "t", [3, 10])
    original.fail_with = ValueError("bad output")
    with pytest.raises(SummarizerError):
        await summarize(history, thread_id="t")
    assert await stored(store, "t", [3, 10]) == before
    assert before["0-3"] is not None
    assert before["0-10"] is None


@pytest.mark.parametrize("result", ["", "  \n", None, 42])
async def test_an_empty_or_non_string_summary_is_an_error(result: Any) -> None:
    store = MemoryStore()

    async def summarize(messages: list[dict[str, Any]]) -> Any:
        return result

    with pytest.raises(SummarizerError):
        await cached_summarizer(store)(summarize)(chat(3), thread_id="t")
    assert store.snapshot() == {}


async def test_a_slow_function_times_out() -> None:
    async def slow(messages: list[dict[str, Any]]) -> str:
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(SummarizerError, match="timed out"):
        await cached_summarizer(summarizer_timeout=0.05)(slow)(chat(3), thread_id="t")


async def test_a_store_that_cannot_be_read_raises_or_is_bypassed() -> None:
    original = AsyncOriginal()
    with pytest.raises(StoreError):
        await wrap(original, FailingStore(fail_reads=True))(chat(4), thread_id="t")
    assert original.calls == []
    summary = await wrap(original, FailingStore(fail_reads=True), on_store_error="bypass")(
        chat(4), thread_id="t"
    )
    assert summary == summary_of(chat(4))


async def test_a_failed_index_write_removes_the_range_written_before_it() -> None:
    store = FailingStore(fail_writes_after=1)  # the range is written, the index is not
    original = AsyncOriginal()
    with pytest.raises(StoreError):
        await wrap(original, store)(chat(4), thread_id="t")
    assert store.data == {}
    bypassing = FailingStore(fail_writes_after=1)
    summary = await wrap(original, bypassing, on_store_error="bypass")(chat(4), thread_id="t")
    assert summary.startswith("<5:")
    assert bypassing.data == {}


# ---------------------------------------------------------------- input and settings


async def test_without_a_thread_id_nothing_is_cached() -> None:
    store = MemoryStore()
    original = AsyncOriginal()
    summarize = wrap(original, store)
    history = chat(4)
    assert await summarize(history) == await summarize(history)
    assert len(original.calls) == 2
    assert store.snapshot() == {}
    assert summarize.stats.uncached == 2


@pytest.mark.parametrize(
    ("messages", "thread_id"),
    [
        ([], "t"),
        ([{"role": "user"}], "t"),
        ([{"role": "tool", "content": "x", "tool_call_id": "none"}], "t"),
        ("hello", "t"),
        (chat(2), ""),
        (chat(2), 1.5),
    ],
)
async def test_bad_input_is_invalid_and_nothing_is_called(messages: Any, thread_id: Any) -> None:
    store = MemoryStore()
    original = AsyncOriginal()
    with pytest.raises(InvalidInput):
        await wrap(original, store)(messages, thread_id=thread_id)
    assert original.calls == []
    assert store.snapshot() == {}


async def test_integer_thread_ids_work() -> None:
    original = AsyncOriginal()
    summarize = wrap(original, None)
    await summarize(chat(2), thread_id=0)
    await summarize(chat(2), thread_id=0)
    assert len(original.calls) == 1


def test_the_wrapped_function_keeps_its_name_and_is_reachable() -> None:
    async def summarize_chat(messages: list[dict[str, Any]]) -> str:
        """Summarize a chat."""
        return "x"

    wrapped = cached_summarizer()(summarize_chat)
    assert wrapped.__wrapped__ is summarize_chat
    assert wrapped.__name__ == "summarize_chat"
    assert wrapped.__doc__ == "Summarize a chat."
    assert isinstance(wrapped.store, MemoryStore)


def test_used_without_parentheses_it_says_so() -> None:
    def summarize(messages: list[dict[str, Any]]) -> str:
        return "x"

    with pytest.raises(ConfigurationError, match="parentheses"):
        cached_summarizer(summarize)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {"store": "redis:/nowhere"},
        {"store": 42},
        {"namespace": 3},
        {"ttl": -1},
        {"extend": "concat"},
        {"summarizer_id": ""},
        {"checkpoints": 0},
        {"summarizer_timeout": -2},
        {"summarizer_timeout": float("inf")},
        {"summarizer_timeout": "5"},
        {"store_timeout": 0},
        {"store_timeout": float("nan")},
        {"on_store_error": "ignore"},
    ],
)
def test_bad_settings_are_configuration_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        cached_summarizer(**options)(SyncOriginal())


def test_a_sync_function_runs_off_the_event_loop() -> None:
    threads: list[str] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        threads.append(threading.current_thread().name)
        return "ok"

    async def main() -> str:
        return await cached_summarizer()(summarize)(chat(2), thread_id="t")

    assert asyncio.run(main()) == "ok"
    assert len(threads) == 1
    assert threads[0] != threading.main_thread().name


async def test_reset_stats_keeps_the_cache() -> None:
    original = AsyncOriginal()
    summarize = wrap(original, None)
    await summarize(chat(4), thread_id="t")
    summarize.reset_stats()
    assert summarize.stats.requests == 0
    await summarize(chat(4), thread_id="t")
    assert summarize.stats.cache_hits == 1
    assert len(original.calls) == 1


# ---------------------------------------------------------------- the docs section's example


def test_the_example_runs_and_calls_twice() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "wrap.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    first = "turn 0 / turn 1 / turn 2 / turn 3"
    calls = [[f"turn {i}" for i in range(4)], [SUMMARY_PREFIX + first, "turn 4", "turn 5"]]
    assert out.splitlines() == [
        first,
        first,
        "Summary of the earlier conversation:",
        f"{first} / turn 4 / turn 5",
        f"calls: {calls}",
    ]


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "cached-summarizer.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/wrap.py"\n```' in guide
