"""Window memories facing values slimcache did not write, and long histories, on real stores.

A message planted in a history's head or in one of its chunks that breaks a rule of
``check_messages`` is never returned: ``ConversationWindowMemory.load`` and ``load_all``,
``TokenWindowMemory.load`` and ``SlidingWindow.get_messages`` raise ``StoreError`` naming the
key that holds it, and ``clear(session)`` removes it.

A head's message count is trusted only as far as the chunks in the store back it: a head
claiming millions of messages costs a call or two, and clearing a long history costs a few
calls per thousand chunks (counted through a wrapper around the real store); a cancelled
clear stops.
"""

from __future__ import annotations

import asyncio
import json
import math
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from slimcache import (
    ConversationWindowMemory,
    SlidingWindow,
    Store,
    StoreError,
    TokenWindowMemory,
)
from slimcache.recipes.window_chunks import CHUNKS_PER_CALL
from slimcache.stores import SupportsGetMany, ThreadKeys
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT
from slimcache.testing import StoreFactory
from tests.fakes import CallCountingStore, RecordingSummarizer

CHUNK = 4
WINDOW = 4


def history() -> list[dict[str, Any]]:
    """Ten messages, a tool call among them: chunks 0 and 1 (messages 0-7) and a tail of two."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    for i in range(4, 10):
        messages.append({"role": "user" if i % 2 else "assistant", "content": f"message {i}"})
    return messages


Plant = Callable[[dict[str, Any]], None]


def setting(field: str, value: Any) -> Plant:
    def plant(message: dict[str, Any]) -> None:
        message[field] = value

    return plant


def without(field: str) -> Plant:
    def plant(message: dict[str, Any]) -> None:
        del message[field]

    return plant


def replaced_by(other: dict[str, Any]) -> Plant:
    def plant(message: dict[str, Any]) -> None:
        message.clear()
        message.update(other)

    return plant


CALL = {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
BAD_MESSAGES: dict[str, Plant] = {
    "numeric role": setting("role", 7),
    "unknown role": setting("role", "robot"),
    "dict content": setting("content", {"text": "hi"}),
    "numeric content": setting("content", 42),
    "no content": without("content"),
    "content part not a dict": setting("content", ["hi"]),
    "numeric name": setting("name", 5),
    "boolean id": setting("id", True),
    "metadata not a dict": setting("metadata", "x"),
    "tool calls on a user message": replaced_by(
        {"role": "user", "content": "", "tool_calls": [CALL]}
    ),
    "tool result answering nothing": replaced_by(
        {"role": "tool", "tool_call_id": "no", "content": ""}
    ),
}


async def stored_json(store: Store, key: str) -> dict[str, Any]:
    raw = await store.get(key)
    assert raw is not None
    value: dict[str, Any] = json.loads(raw)
    return value


async def plant(store: Store, session: str, where: str, bad: Plant) -> str:
    """Write the history, then spoil message 7 (in chunk 1) or 8 (in the head); return its key."""
    await ConversationWindowMemory(store, WINDOW, chunk_size=CHUNK).append_many(session, history())
    keys = ThreadKeys(session)
    head = await stored_json(store, keys.history_head)
    assert (head["count"], head["base"]) == (10, 8)
    if where == "head":
        key, value, messages = keys.history_head, head, head["tail"]
        bad(messages[0])  # message 8, in the window
    else:
        key = keys.history_chunk(head["epoch"], 1)
        value = await stored_json(store, key)
        messages = value["messages"]
        bad(messages[3])  # message 7, in the window
    await store.set(key, json.dumps(value))
    return key


def front_doors(store: Store, session: str) -> dict[str, Any]:
    memory = ConversationWindowMemory(store, WINDOW, chunk_size=CHUNK)
    window = SlidingWindow(session, 100, RecordingSummarizer(), store)
    return {
        "load": memory.load(session),
        "load_all": memory.load_all(session),
        "token load": TokenWindowMemory(store, 10_000).load(session),
        "sliding window": window.get_messages(),
    }


@pytest.mark.parametrize("where", ["head", "chunk"])
async def test_a_bad_stored_message_is_never_returned(
    store_factory: StoreFactory, where: str
) -> None:
    store = await store_factory()
    wrong: list[str] = []  # every front door that served the message, or failed otherwise
    for number, (name, bad) in enumerate(BAD_MESSAGES.items()):
        session = f"s{number}"
        key = await plant(store, session, where, bad)
        for door, loading in front_doors(store, session).items():
            try:
                returned = await loading
            except StoreError as exc:
                if f"{key} holds a message slimcache did not write" not in str(exc):
                    wrong.append(f"{name} in the {where}, {door}: {exc}")
            else:
                wrong.append(f"{name} in the {where}, {door} returned {returned}")
    assert wrong == []


async def test_a_foreign_chunk_format_is_never_returned(store_factory: StoreFactory) -> None:
    store = await store_factory()
    await ConversationWindowMemory(store, WINDOW, chunk_size=CHUNK).append_many("s", history())
    keys = ThreadKeys("s")
    head = await stored_json(store, keys.history_head)
    key = keys.history_chunk(head["epoch"], 1)
    chunk = await stored_json(store, key)
    await store.set(key, json.dumps({"format": "other.chunk", "messages": chunk["messages"]}))
    for loading in front_doors(store, "s").values():
        with pytest.raises(StoreError, match=f"{key} holds a value slimcache did not write"):
            await loading


async def test_clear_removes_a_history_holding_a_bad_message(
    make_window_store: StoreFactory,
) -> None:
    store = await make_window_store()
    await plant(store, "s", "head", BAD_MESSAGES["dict content"])
    memory = ConversationWindowMemory(store, WINDOW, chunk_size=CHUNK)
    epoch = (await stored_json(store, ThreadKeys("s").history_head))["epoch"]
    await memory.clear("s")
    keys = ThreadKeys("s")
    assert await store.get(keys.history_head) is None
    assert await store.get(keys.history_chunk(epoch, 0)) is None
    await memory.append("s", {"role": "user", "content": "again"})
    assert await memory.load_all("s") == [{"role": "user", "content": "again"}]


# ---------------------------------------------------------------- a head's message count


def forged_head(count: int, chunk: int) -> str:
    """A head in slimcache's format claiming ``count`` messages, none of them stored."""
    return json.dumps(
        {
            "format": "slimcache.history",
            "v": 1,
            "epoch": "e0",
            "chunk": chunk,
            "count": count,
            "base": count,
            "open": [],
            "tail": [],
        }
    )


async def within_store_timeout(operation: Awaitable[Any]) -> Any:
    """Await ``operation``; a result or a StoreError, within the memory's store_timeout."""
    try:
        return await asyncio.wait_for(operation, DEFAULT_STORE_TIMEOUT)
    except StoreError as exc:
        return exc


@pytest.mark.parametrize("chunk", [1, 32])
async def test_a_head_claiming_three_million_messages_costs_a_call_or_two(
    make_window_store: StoreFactory, chunk: int
) -> None:
    store = CallCountingStore(await make_window_store())
    await store.set(ThreadKeys("s").history_head, forged_head(3_000_000, chunk))
    memory = ConversationWindowMemory(store, 3_000_000)
    tracemalloc.start()
    try:
        outcomes = {
            "load_all": await within_store_timeout(memory.load_all("s")),
            "load": await within_store_timeout(memory.load("s")),
            "token load": await within_store_timeout(TokenWindowMemory(store, 10**9).load("s")),
            "sliding window": await within_store_timeout(
                SlidingWindow("s", 10, RecordingSummarizer(), store).get_messages()
            ),
            "clear": await within_store_timeout(memory.clear("s")),
        }
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcomes["load_all"] == outcomes["load"] == outcomes["token load"] == []
    assert isinstance(outcomes["sliding window"], StoreError)
    assert "missing from the store" in str(outcomes["sliding window"])
    assert outcomes["clear"] is None
    assert await store.get(ThreadKeys("s").history_head) is None
    assert peak < 100 * 2**20
    # No chunk is stored: each read (and the clear) stopped at the first batch of keys.
    assert store.keys["get_many"] <= 5 * CHUNKS_PER_CALL
    assert store.round_trips() <= 20


CHUNK_SIZE = 32  # the default chunk_size, which the memories here use


async def write_history(memory: ConversationWindowMemory, session: str, messages: int) -> int:
    """Append ``messages`` short user messages, a batch of chunks at a time; return the chunks."""
    per_append = CHUNKS_PER_CALL * CHUNK_SIZE
    for start in range(0, messages, per_append):
        batch = [{"role": "user", "content": f"m{i}"} for i in range(start, start + per_append)]
        await memory.append_many(session, batch[: messages - start])
    return messages // CHUNK_SIZE


async def chunks_stored(store: Store, session: str, epoch: str, chunks: int) -> int:
    """How many of the chunks ``0 .. chunks - 1`` of the history are in the store."""
    assert isinstance(store, SupportsGetMany)
    keys = ThreadKeys(session)
    found = 0
    for first in range(0, chunks, CHUNKS_PER_CALL):
        numbers = range(first, min(chunks, first + CHUNKS_PER_CALL))
        values = await store.get_many([keys.history_chunk(epoch, n) for n in numbers])
        found += sum(value is not None for value in values)
    return found


async def test_clearing_300_000_messages_takes_a_few_calls_per_thousand_chunks(
    make_window_store: StoreFactory,
) -> None:
    inner = await make_window_store()
    store = CallCountingStore(inner)
    memory = ConversationWindowMemory(store, 5)
    chunks = await write_history(memory, "s", 300_000)
    assert await memory.count("s") == 300_000
    epoch = (await stored_json(inner, ThreadKeys("s").history_head))["epoch"]
    assert await chunks_stored(inner, "s", epoch, chunks) == chunks
    store.reset()
    await memory.clear("s")
    # The head read and deleted, then for each batch of chunk keys one read and one delete.
    assert store.round_trips() <= 2 + 2 * math.ceil(chunks / CHUNKS_PER_CALL)
    assert await inner.get(ThreadKeys("s").history_head) is None
    assert await chunks_stored(inner, "s", epoch, chunks) == 0


async def test_a_cancelled_clear_stops(make_window_store: StoreFactory) -> None:
    inner = await make_window_store()
    store = CallCountingStore(inner)
    memory = ConversationWindowMemory(store, 5)
    await write_history(memory, "s", 2 * CHUNKS_PER_CALL * CHUNK_SIZE)
    epoch = (await stored_json(inner, ThreadKeys("s").history_head))["epoch"]
    store.reset()
    clearing = asyncio.create_task(memory.clear("s"))

    def cancel_once_deleting(name: str) -> None:
        if name == "batch":  # cancelled while the first batch of chunks is being deleted
            asyncio.get_running_loop().call_soon(clearing.cancel)

    store.on_call = cancel_once_deleting
    with pytest.raises(asyncio.CancelledError):
        await clearing
    # Deleting the newest batch of chunks was under way; the older batch is never touched.
    assert dict(store.calls) == {"get": 1, "compare_and_delete": 1, "get_many": 1, "batch": 1}
    assert await chunks_stored(inner, "s", epoch, CHUNKS_PER_CALL) == CHUNKS_PER_CALL
    assert await memory.count("s") == 0  # the history itself is gone
