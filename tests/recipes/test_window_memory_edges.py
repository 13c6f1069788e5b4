"""Window memories facing values slimcache did not write: bad stored messages, on real stores.

A message planted in a history's head or in one of its chunks that breaks a rule of
``check_messages`` is never returned: ``ConversationWindowMemory.load`` and ``load_all``,
``TokenWindowMemory.load`` and ``SlidingWindow.get_messages`` raise ``StoreError`` naming the
key that holds it, and ``clear(session)`` removes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from slimcache import (
    ConversationWindowMemory,
    SlidingWindow,
    Store,
    StoreError,
    TokenWindowMemory,
)
from slimcache.stores import ThreadKeys
from slimcache.testing import StoreFactory
from tests.fakes import RecordingSummarizer

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
