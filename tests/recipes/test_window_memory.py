"""Window memories: every message stored, the last K (or a token budget) loaded, on real stores."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from slimcache import (
    ConfigurationError,
    ConversationWindowMemory,
    InvalidInput,
    MemoryStore,
    Store,
    StoreError,
    TokenWindowMemory,
)
from slimcache.messages import count_message_tokens
from slimcache.stores import ThreadKeys
from tests.fakes import CountingStore, chat

ROOT = Path(__file__).resolve().parents[2]
MakeStore = Callable[..., Awaitable[Store]]


def contents(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def assistant_calls(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def tool(call_id: str, text: str = "result") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def head_key(session: str) -> str:
    return ThreadKeys(session).prefix + "messages"


class RecordingStore:
    """A memory store that records every key read and every value written."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []

    async def get(self, key: str) -> str | None:
        self.reads.append(key)
        return await self.inner.get(key)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        self.reads.extend(keys)
        return await self.inner.get_many(keys)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self.writes.append((key, value))
        await self.inner.set(key, value, ttl=ttl)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        written = await self.inner.compare_and_set(key, expected, value, ttl=ttl)
        if written:
            self.writes.append((key, value))
        return written

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        return await self.inner.compare_and_delete(key, expected)


# ---------------------------------------------------------------- order and windows


@pytest.mark.parametrize("window", [1, 3, 4, 7, 25])
async def test_load_returns_the_last_k_in_order(make_store: MakeStore, window: int) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, window, chunk_size=3)
    history = chat(20, system="Be brief.")
    await memory.append("s", history[0])
    await memory.append_many("s", history[1:6])
    for message in history[6:]:
        await memory.append("s", message)

    assert await memory.load("s") == history[-window:]
    assert await memory.load_all("s") == history
    assert await memory.count("s") == len(history)


async def test_the_synaptic_example_loads_the_last_four() -> None:
    memory = ConversationWindowMemory(MemoryStore(), 4)
    for turn in range(1, 4):
        await memory.append("user-1", user(f"Message {turn}"))
        await memory.append("user-1", {"role": "assistant", "content": f"Reply {turn}"})
    history = await memory.load("user-1")
    assert len(history) == 4
    assert history[0]["content"] == "Message 2"
    assert history[3]["content"] == "Reply 3"


async def test_sessions_and_namespaces_are_separate(make_store: MakeStore) -> None:
    store = await make_store()
    plain = ConversationWindowMemory(store, 10)
    named = ConversationWindowMemory(store, 10, namespace="app")
    await plain.append("a", user("plain a"))
    await plain.append("b", user("plain b"))
    await named.append("a", user("named a"))
    assert contents(await plain.load("a")) == ["plain a"]
    assert contents(await plain.load("b")) == ["plain b"]
    assert contents(await named.load("a")) == ["named a"]
    assert await plain.load("nobody") == []
    assert await plain.count("nobody") == 0


async def test_two_instances_sharing_a_store_see_one_history(make_store: MakeStore) -> None:
    store = await make_store()
    first = ConversationWindowMemory(store, 5, chunk_size=4)
    second = ConversationWindowMemory(store, 3, chunk_size=4)
    history = chat(11, system=None)
    for index, message in enumerate(history):
        await (first if index % 2 else second).append("shared", message)
    assert await first.load_all("shared") == history
    assert await second.load_all("shared") == history
    assert await first.load("shared") == history[-5:]
    assert await second.load("shared") == history[-3:]


async def test_loaded_messages_are_copies() -> None:
    memory = ConversationWindowMemory(MemoryStore(), 5)
    parts: list[dict[str, str]] = [{"type": "text", "text": "hi"}]
    await memory.append("s", {"role": "user", "content": parts})
    parts.append({"type": "text", "text": "changed after"})
    loaded = await memory.load("s")
    loaded[0]["content"].append({"type": "text", "text": "changed by reader"})
    assert await memory.load_all("s") == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


# ---------------------------------------------------------------- tool calls


async def test_tool_results_may_be_appended_after_their_call(make_store: MakeStore) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, 10)
    await memory.append("s", user("weather in Paris and Rome?"))
    await memory.append("s", assistant_calls("c1", "c2"))
    await memory.append("s", tool("c1", "sunny"))
    await memory.append_many("s", [tool("c2", "rain"), {"role": "assistant", "content": "ok"}])
    assert [m["role"] for m in await memory.load_all("s")] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


async def test_results_may_answer_a_block_of_two_assistant_messages() -> None:
    memory = ConversationWindowMemory(MemoryStore(), 10)
    await memory.append_many("s", [user("q"), assistant_calls("a"), assistant_calls("b")])
    await memory.append_many("s", [tool("a"), tool("b")])
    history = await memory.load_all("s")
    assert [m.get("tool_call_id") for m in history[3:]] == ["a", "b"]


@pytest.mark.parametrize(
    ("before", "result", "rule"),
    [
        ([user("hi")], tool("c1"), "answers no tool call"),
        ([assistant_calls("c1")], tool("c9"), "unanswered calls: 'c1'"),
        ([assistant_calls("c1"), tool("c1")], tool("c1"), "unanswered calls: none"),
        ([assistant_calls("c1"), user("next")], tool("c1"), "answers no tool call"),
    ],
)
async def test_a_tool_result_must_answer_an_open_call(
    make_store: MakeStore, before: list[dict[str, Any]], result: dict[str, Any], rule: str
) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, 10)
    await memory.append_many("s", before)
    with pytest.raises(InvalidInput, match=rule) as caught:
        await memory.append("s", result)
    assert caught.value.index == 0
    assert await memory.load_all("s") == before


async def test_the_window_never_starts_with_an_orphan_tool_result() -> None:
    memory = ConversationWindowMemory(MemoryStore(), 3, chunk_size=2)
    history = [user("q"), assistant_calls("a", "b"), tool("a"), tool("b"), user("thanks")]
    await memory.append_many("s", history)
    # The last three would be tool, tool, user: the call they answer comes with them.
    assert await memory.load("s") == history[1:]
    assert await memory.load_all("s") == history


@pytest.mark.parametrize("window", [1, 2, 3])
async def test_a_window_of_parallel_tool_results_loads_their_call(
    make_store: MakeStore, window: int
) -> None:
    # synaptic: 5 messages stored, the last three results of parallel tool calls; load() with
    # K from 1 to 3 used to come back empty.
    store = await make_store()
    memory = ConversationWindowMemory(store, window, chunk_size=2)
    history = [user("q"), assistant_calls("a", "b", "c"), tool("a"), tool("b"), tool("c")]
    for message in history:
        await memory.append("s", message)
    assert await memory.load("s") == history[1:]


async def test_a_unit_longer_than_the_reads_back_is_loaded_whole() -> None:
    memory = ConversationWindowMemory(MemoryStore(), 2, chunk_size=3)
    calls = [f"c{n}" for n in range(30)]
    history = [user("q"), assistant_calls(*calls), *(tool(c) for c in calls)]
    await memory.append_many("s", history)
    assert await memory.load("s") == history[1:]


# ---------------------------------------------------------------- token budget


def tokens(messages: Sequence[dict[str, Any]]) -> int:
    return sum(count_message_tokens(m, len) for m in messages)


async def test_token_window_loads_the_longest_suffix_that_fits(make_store: MakeStore) -> None:
    store = await make_store()
    history = chat(120, system=None)
    memory = TokenWindowMemory(store, 400, token_counter=len, chunk_size=4)
    await memory.append_many("s", history)
    loaded = await memory.load("s")
    assert loaded == history[len(history) - len(loaded) :]
    assert tokens(loaded) <= 400
    assert tokens(history[-len(loaded) - 1 :]) > 400
    # A budget above the whole history returns all of it.
    everything = TokenWindowMemory(store, tokens(history), token_counter=len, chunk_size=4)
    assert await everything.load("s") == history


async def test_token_window_keeps_a_tool_call_with_its_results(make_store: MakeStore) -> None:
    store = await make_store()
    group = [assistant_calls("c1", "c2"), tool("c1", "sunny"), tool("c2", "rain")]
    history = [user("weather?"), *group, {"role": "assistant", "content": "Sunny, then rain."}]
    last = history[-1:]
    TokenWindowMemory(store, 1, token_counter=len)  # the budget alone writes nothing
    writer = ConversationWindowMemory(store, 10, chunk_size=2)
    await writer.append_many("s", history)

    def window(budget: int) -> TokenWindowMemory:
        return TokenWindowMemory(store, budget, token_counter=len, chunk_size=2)

    with_group = tokens(group) + tokens(last)
    assert await window(with_group).load("s") == [*group, *last]
    # One token short: the results alone would fit, but never without their call.
    assert tokens(group[1:]) + tokens(last) < with_group - 1
    assert await window(with_group - 1).load("s") == last
    assert await window(tokens(history)).load("s") == history
    assert await window(tokens(last) - 1).load("s") == []


# ---------------------------------------------------------------- clear


async def test_clear_removes_the_session_and_nothing_else(make_store: MakeStore) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, 4, chunk_size=3)
    await memory.append_many("gone", chat(10, system=None))
    await memory.append_many("kept", chat(5, system=None))
    await memory.clear("gone")
    assert await memory.load_all("gone") == []
    assert await memory.count("gone") == 0
    assert await store.get(head_key("gone")) is None
    assert await memory.load_all("kept") == chat(5, system=None)
    await memory.append("gone", user("fresh start"))
    assert contents(await memory.load_all("gone")) == ["fresh start"]
    await memory.clear("never-written")


async def test_clear_deletes_every_chunk() -> None:
    store = MemoryStore()
    memory = ConversationWindowMemory(store, 4, chunk_size=3)
    await memory.append_many("gone", chat(10, system=None))
    await memory.append("kept", user("stay"))
    prefix = ThreadKeys("gone").prefix
    assert any(key.startswith(prefix) for key in store.snapshot())
    await memory.clear("gone")
    assert [key for key in store.snapshot() if key.startswith(prefix)] == []
    assert contents(await memory.load_all("kept")) == ["stay"]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        ("hello", "each message must be a dict"),
        ({"role": "robot", "content": "hi"}, "unknown role 'robot'"),
        ({"role": "user", "content": 3}, "'content' must be a string or a list of parts"),
        ({"role": "user"}, "needs 'content'"),
        ({"role": "user", "content": "hi", "metadata": {"at": object()}}, "JSON-serializable"),
        ({"role": "user", "content": "hi", "metadata": {"x": float("nan")}}, "JSON-serializable"),
        ({"role": "tool", "content": "orphan"}, "needs a string 'tool_call_id'"),
    ],
)
async def test_invalid_messages_raise_before_anything_is_written(
    make_store: MakeStore, message: Any, rule: str
) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, 4)
    with pytest.raises(InvalidInput, match=rule):
        await memory.append("s", message)
    with pytest.raises(InvalidInput, match=rule) as caught:
        await memory.append_many("s", [user("fine"), user("also fine"), message])
    assert caught.value.index == 2
    assert await store.get(head_key("s")) is None
    assert await memory.load_all("s") == []


async def test_invalid_arguments_and_session_ids() -> None:
    store = MemoryStore()
    memory = ConversationWindowMemory(store, 4)
    with pytest.raises(InvalidInput, match="thread_id must not be empty"):
        await memory.append("", user("hi"))
    with pytest.raises(InvalidInput, match="must be a list"):
        await memory.append_many("s", user("not a list"))  # type: ignore[arg-type]
    await memory.append_many("s", [])
    assert store.snapshot() == {}
    for bad in (
        lambda: ConversationWindowMemory(store, 0),
        lambda: ConversationWindowMemory(store, 4, chunk_size=0),
        lambda: ConversationWindowMemory(store, 4, ttl=-1),
        lambda: ConversationWindowMemory(store, 4, namespace="a\nb"),
        lambda: ConversationWindowMemory(store, 4, store_timeout=0),
        lambda: ConversationWindowMemory(object(), 4),  # type: ignore[arg-type]
        lambda: TokenWindowMemory(store, 0),
        lambda: TokenWindowMemory(store, 10, token_counter="len"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigurationError):
            bad()


# ---------------------------------------------------------------- values slimcache did not write


@pytest.mark.parametrize(
    "foreign",
    [
        "not json",
        "[1, 2, 3]",
        '{"format": "slimcache.history", "v": 99}',
        '{"format": "slimcache.history", "v": 1, "epoch": "e", "chunk": 4, "count": 9}',
        "[" * 100_000,
    ],
)
async def test_a_foreign_head_is_a_clear_error(make_store: MakeStore, foreign: str) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, 4)
    await store.set(head_key("s"), foreign)
    for attempt in (
        memory.load("s"),
        memory.load_all("s"),
        memory.count("s"),
        memory.append("s", user("hi")),
        TokenWindowMemory(store, 100).load("s"),
    ):
        with pytest.raises(StoreError, match="did not write"):
            await attempt
    assert await store.get(head_key("s")) == foreign  # the append wrote nothing
    await memory.clear("s")
    await memory.append("s", user("hi"))
    assert contents(await memory.load_all("s")) == ["hi"]


async def test_a_foreign_chunk_is_a_clear_error(make_store: MakeStore) -> None:
    store = await make_store()
    memory = ConversationWindowMemory(store, 2, chunk_size=3)
    await memory.append_many("s", chat(7, system=None))
    head = json.loads(await store.get(head_key("s")) or "{}")
    chunk_key = f"{ThreadKeys('s').prefix}messages:{head['epoch']}:0"
    assert await store.get(chunk_key) is not None
    await store.set(chunk_key, '{"format": "something else"}')
    with pytest.raises(StoreError, match=f"{chunk_key} holds a value slimcache did not write"):
        await memory.load_all("s")
    assert contents(await memory.load("s")) == contents(chat(7, system=None)[-2:])
    await memory.clear("s")
    assert await memory.load_all("s") == []


async def test_expired_chunks_leave_the_newest_messages(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    memory = ConversationWindowMemory(store, 3, ttl=100, chunk_size=4)
    history = chat(12, system=None)
    await memory.append_many("s", history[:8])  # chunks 0 and 1 written at t=0
    now[0] = 50.0
    await memory.append_many("s", history[8:])  # chunk 2 and the head at t=50
    now[0] = 120.0
    assert await memory.load("s") == history[-3:]
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        assert await memory.load_all("s") == history[8:]
    assert "no longer in the store" in caplog.text
    now[0] = 200.0
    assert await memory.load_all("s") == []
    assert await memory.count("s") == 0


# ---------------------------------------------------------------- efficiency


async def test_appends_rewrite_at_most_a_chunk_and_loads_read_only_what_they_need() -> None:
    store = RecordingStore()
    chunk = 8
    memory = ConversationWindowMemory(store, 5, chunk_size=chunk)
    history = chat(203, system=None)
    for message in history:
        before = len(store.writes)
        await memory.append("s", message)
        written = store.writes[before:]
        assert 1 <= len(written) <= 3
        for _, value in written:
            stored = json.loads(value)
            assert len(stored.get("tail", stored.get("messages"))) <= chunk

    store.reads.clear()
    assert await memory.load("s") == history[-5:]
    # The head, and the one chunk holding message 198 (the other four are in the head).
    assert len(store.reads) == 2

    store.reads.clear()
    assert await memory.load_all("s") == history
    assert len(store.reads) == 1 + 203 // chunk  # the head, then every chunk in one get_many

    store.reads.clear()
    budget = TokenWindowMemory(store, tokens(history[-10:]), token_counter=len, chunk_size=chunk)
    assert await budget.load("s") == history[-10:]
    assert len(store.reads) <= 4


# ---------------------------------------------------------------- concurrency


async def test_fifty_concurrent_appending_tasks_lose_nothing(make_store: MakeStore) -> None:
    store = await make_store()
    memories = [ConversationWindowMemory(store, 5, chunk_size=4) for _ in range(2)]

    async def task(number: int) -> None:
        memory = memories[number % 2]
        if number % 5 == 0:
            await memory.append_many("s", [user(f"{number}-a"), user(f"{number}-b")])
        else:
            await memory.append("s", user(f"{number}-a"))

    await asyncio.gather(*(task(n) for n in range(50)))
    stored = contents(await memories[0].load_all("s"))
    expected = [f"{n}-a" for n in range(50)] + [f"{n}-b" for n in range(0, 50, 5)]
    assert sorted(stored) == sorted(expected)
    for number in range(0, 50, 5):  # a batch stays in one piece
        assert stored.index(f"{number}-b") == stored.index(f"{number}-a") + 1
    assert await memories[1].count("s") == len(expected)


async def test_plain_stores_serialize_appends_within_a_process() -> None:
    store = CountingStore()
    memories = [ConversationWindowMemory(store, 5, chunk_size=3) for _ in range(2)]
    await asyncio.gather(*(memories[n % 2].append("s", user(str(n))) for n in range(50)))
    assert sorted(contents(await memories[0].load_all("s")), key=int) == [str(n) for n in range(50)]
    await memories[1].clear("s")
    assert store.data == {}


# Appends from several processes: tests/recipes/test_window_memory_appends.py.


# ---------------------------------------------------------------- the docs guide


def test_the_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "window_memory.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert out[0] == str(["Message 2", "Reply 2", "Message 3", "Reply 3"])
    assert out[1] == "6 messages stored"
    assert out[2] == str(["Reply 2", "Message 3", "Reply 3"])
    assert out[3] == "[]"


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "window-memory.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/window_memory.py"\n```' in guide
