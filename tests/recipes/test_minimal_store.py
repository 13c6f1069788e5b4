"""A store written to the "bring your own store" proposal's interface, in every front door.

The proposal's store is three methods: ``get(key)``, ``set(key, value)`` and ``delete(key)``,
with no TTL. slimcache passes ``ttl`` only when one is set, refuses a TTL such a store cannot
keep when the front door is built, and turns anything a user's store raises into
``StoreError``. (The proposal's store is this class, not a server: there is none to run.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import pytest

from slimcache import (
    Compaction,
    ConfigurationError,
    ConversationWindowMemory,
    KeepMessages,
    MessageThreshold,
    NewSession,
    SlidingWindow,
    Store,
    StoreError,
    SummarizeCompressor,
    TokenWindowMemory,
    cached_summarizer,
    clear_thread,
)
from tests.fakes import RecordingSummarizer, chat


class ProposalStore:
    """``SlimContextStore`` of the proposal: get, set and delete, and nothing else."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.data.get(key)

    async def set(self, key: str, value: str) -> None:
        self.data[key] = value

    async def delete(self, key: str) -> None:
        self.data.pop(key, None)


def minimal() -> Store:
    """A new proposal store. (Type checkers see ``Store.set`` with ``ttl``; slimcache itself
    reads the store's own signature.)"""
    return cast(Store, ProposalStore())


class WriteFailsStore(ProposalStore):
    """A user's store whose writes fail with the exception its own client raised."""

    async def set(self, key: str, value: str) -> None:
        raise RuntimeError("connection reset")


class BrokenStore(WriteFailsStore):
    """A user's store whose every call fails with the exception its own client raised."""

    async def get(self, key: str) -> str | None:
        raise KeyError(key)


def _compressor(store: Any, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        RecordingSummarizer(),
        store,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        **options,
    )


async def test_the_compressor_caches_and_extends_on_a_store_without_ttl() -> None:
    store = minimal()
    compressor = _compressor(store)
    history = chat(30)
    first = await compressor.compress_detailed(history, thread_id="123")
    again = await compressor.compress_detailed(history, thread_id="123")
    longer = await compressor.compress_detailed(chat(60), thread_id="123")
    assert (first.outcome, again.outcome, longer.outcome) == ("summarized", "hit", "extended")
    assert "thread_123:summary:1-20" in cast(ProposalStore, store).data
    assert await clear_thread(store, "123") > 0
    assert cast(ProposalStore, store).data == {}


async def test_window_memories_and_the_sliding_window_work_on_a_store_without_ttl() -> None:
    store = minimal()
    memory = ConversationWindowMemory(store, 3)
    tokens = TokenWindowMemory(store, 1000)
    for message in chat(5, system=None):
        await memory.append("s", message)
        await tokens.append("t", message)
    assert [m["content"] for m in await memory.load("s")] == [
        m["content"] for m in chat(5, system=None)[-3:]
    ]
    assert len(await tokens.load("t")) == 5

    window = SlidingWindow("w", 10, RecordingSummarizer(), store)
    await window.push_many(chat(25, system=None))
    assert 0 < len(await window.get_messages()) < 25
    assert window.get_stats().evictions > 0


async def test_cached_summarizer_and_compaction_work_on_a_store_without_ttl() -> None:
    store = minimal()
    calls: list[int] = []

    @cached_summarizer(store)
    def summarize(messages: list[dict[str, Any]]) -> str:
        calls.append(len(messages))
        return " / ".join(str(m["content"]) for m in messages)

    history = chat(6, system=None)
    assert await summarize(history, thread_id="c") == await summarize(history, thread_id="c")
    assert calls == [6]

    compaction = Compaction("llm", store=store, context_window=8000)
    session = await compaction.handle_new_session(
        json.dumps({"summary": "what was done"}), thread_id="old", tool_call_id="call-1"
    )
    assert isinstance(session, NewSession)
    assert await compaction.current_session("old") == session.thread_id


# Each front door that keeps entries, built on ``store`` with ``ttl``.
WITH_TTL: dict[str, Callable[[Any, float], Any]] = {
    "SummarizeCompressor": lambda store, ttl: _compressor(store, ttl=ttl),
    "ConversationWindowMemory": lambda store, ttl: ConversationWindowMemory(store, 3, ttl=ttl),
    "TokenWindowMemory": lambda store, ttl: TokenWindowMemory(store, 100, ttl=ttl),
    "cached_summarizer": lambda store, ttl: cached_summarizer(store, ttl=ttl)(lambda m: "s"),
    "Compaction": lambda store, ttl: Compaction("llm", store=store, context_window=8000, ttl=ttl),
}


@pytest.mark.parametrize("door", list(WITH_TTL))
def test_a_ttl_the_store_cannot_keep_is_refused_when_built(door: str) -> None:
    store = minimal()
    with pytest.raises(ConfigurationError, match=r"ttl=60.*ProposalStore\.set\(\) does not"):
        WITH_TTL[door](store, 60.0)
    assert cast(ProposalStore, store).data == {}


async def test_whatever_a_users_store_raises_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="KeyError") as caught:
        await _compressor(cast(Store, BrokenStore())).compress(chat(30), thread_id="t")
    assert isinstance(caught.value.__cause__, KeyError)
    with pytest.raises(StoreError, match="KeyError"):
        await ConversationWindowMemory(cast(Store, BrokenStore()), 3).append(
            "s", chat(1, system=None)[0]
        )
    with pytest.raises(StoreError, match="connection reset"):
        await Compaction(
            "llm", store=cast(Store, WriteFailsStore()), context_window=8000
        ).handle_new_session({"summary": "s"}, thread_id="old")
    bypassed = await _compressor(
        cast(Store, BrokenStore()), on_store_error="bypass"
    ).compress_detailed(chat(30), thread_id="t")
    assert bypassed.summary is not None  # summarized without the store


async def test_a_store_that_is_not_async_gives_a_store_error_not_a_type_error() -> None:
    class SyncStore(ProposalStore):
        def get(self, key: str) -> str | None:  # type: ignore[override]
            return None

    with pytest.raises(StoreError, match="get"):
        await _compressor(cast(Store, SyncStore())).compress(chat(30), thread_id="t")
