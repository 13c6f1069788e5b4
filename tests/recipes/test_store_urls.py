"""One rule for every front door's ``store``: a URL is opened, owned and closed by the front
door; a store passed in is used as it is and never closed by it. Real stores: the memory store,
SQLite files and a real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slimcache_redis import RedisStore
from slimcache_sql import SQLStore

from slimcache import (
    Compaction,
    ConfigurationError,
    ConversationWindowMemory,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    SlidingWindow,
    Store,
    StoreError,
    SummarizeCompressor,
    TokenWindowMemory,
    cached_summarizer,
)
from slimcache.core.store_argument import close_owned_store, open_store_argument
from tests.fakes import RecordingSummarizer, chat
from tests.servers.redis_server import RedisServer
from tests.servers.sqlite_files import sqlite_url

pytestmark = pytest.mark.servers

USER = {"role": "user", "content": "hello"}


@dataclass(frozen=True)
class FrontDoor:
    """How to build one front door on a store, and use it so that it reads and writes."""

    name: str
    build: Callable[[Any], Any]
    use: Callable[[Any, str], Awaitable[None]]


async def use_memory(memory: Any, thread: str) -> None:
    await memory.append(thread, USER)
    assert await memory.load(thread) == [USER]


async def use_window(window: SlidingWindow, thread: str) -> None:
    await window.push_many(chat(8, system=None))
    assert len(await window.get_messages()) < 8


async def use_compaction(compaction: Compaction, thread: str) -> None:
    session = await compaction.handle_new_session({"summary": "s"}, thread_id=thread)
    assert await compaction.current_session(thread) == session.thread_id  # type: ignore[union-attr]


async def use_cached(summarize: Any, thread: str) -> None:
    assert await summarize(chat(3), thread_id=thread) == "summary"
    assert await summarize(chat(3), thread_id=thread) == "summary"
    assert summarize.stats.cache_hits == 1


def plain_summarize(messages: list[dict[str, Any]]) -> str:
    return "summary"


async def use_compressor(compressor: SummarizeCompressor, thread: str) -> None:
    await compressor.compress(chat(8), thread_id=thread)
    await compressor.compress(chat(8), thread_id=thread)
    assert compressor.stats.cache_hits == 1


FRONT_DOORS = [
    FrontDoor(
        "SummarizeCompressor",
        lambda s: SummarizeCompressor(
            RecordingSummarizer(), s, trigger=MessageThreshold(6), keep=KeepMessages(2)
        ),
        use_compressor,
    ),
    FrontDoor("ConversationWindowMemory", lambda s: ConversationWindowMemory(s, 3), use_memory),
    FrontDoor("TokenWindowMemory", lambda s: TokenWindowMemory(s, 100), use_memory),
    FrontDoor(
        "SlidingWindow",
        lambda s: SlidingWindow(uuid.uuid4().hex, 2, RecordingSummarizer(), s, batch=2),
        use_window,
    ),
    FrontDoor(
        "Compaction",
        lambda s: Compaction("llm", context_window=1000, store=s),
        use_compaction,
    ),
    FrontDoor("cached_summarizer", lambda s: cached_summarizer(s)(plain_summarize), use_cached),
]
DOOR_IDS = [door.name for door in FRONT_DOORS]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, type[Store]]:
    """A store URL on a real store, and the type of store it opens."""
    if request.param == "memory":
        return "memory://", MemoryStore
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "front-door.db"), SQLStore
    server: RedisServer = request.getfixturevalue("redis_server")
    return f"{server.url}?prefix=test-{uuid.uuid4().hex}:", RedisStore


async def is_closed(store: Store) -> bool:
    try:
        await store.get("any")
    except StoreError:
        return True
    return False


@pytest.mark.parametrize("door", FRONT_DOORS, ids=DOOR_IDS)
async def test_a_front_door_opens_a_store_url_and_closes_it(
    door: FrontDoor, store_url: tuple[str, type[Store]]
) -> None:
    url, kind = store_url
    front = door.build(url)
    assert type(front.store) is kind
    await door.use(front, uuid.uuid4().hex)
    assert not await is_closed(front.store)
    await front.aclose()
    assert await is_closed(front.store)
    await front.aclose()  # again: nothing more to do


@pytest.mark.parametrize("door", FRONT_DOORS, ids=DOOR_IDS)
async def test_async_with_closes_the_store_a_front_door_opened(
    door: FrontDoor, store_url: tuple[str, type[Store]]
) -> None:
    async with door.build(store_url[0]) as front:
        await door.use(front, uuid.uuid4().hex)
    assert await is_closed(front.store)


@pytest.mark.parametrize("door", FRONT_DOORS, ids=DOOR_IDS)
async def test_a_store_passed_in_is_never_closed_by_the_front_door(
    door: FrontDoor, make_store: Callable[..., Awaitable[Store]]
) -> None:
    store = await make_store()  # the fixture closes it
    async with door.build(store) as front:
        assert front.store is store
        await door.use(front, uuid.uuid4().hex)
    await front.aclose()
    assert not await is_closed(store)
    await store.set("still", "open")
    assert await store.get("still") == "open"


@pytest.mark.parametrize("door", FRONT_DOORS, ids=DOOR_IDS)
def test_a_malformed_store_url_is_a_configuration_error(door: FrontDoor) -> None:
    with pytest.raises(ConfigurationError, match="no scheme"):
        door.build("redis:/nowhere")


async def test_the_helper_says_who_owns_the_store(tmp_path: Path) -> None:
    given = MemoryStore()
    assert open_store_argument(given) == (given, False)
    made, owned = open_store_argument(None)
    assert (type(made), owned) == (MemoryStore, True)
    opened, owned = open_store_argument(sqlite_url(tmp_path / "x.db"))
    assert (type(opened), owned) == (SQLStore, True)
    await close_owned_store(given, False)
    await close_owned_store(opened, True)
    assert not await is_closed(given)
    assert await is_closed(opened)
    with pytest.raises(ConfigurationError, match="store must have async get, set and delete"):
        open_store_argument(None, optional=False)
    with pytest.raises(ConfigurationError, match="got int"):
        open_store_argument(42)  # type: ignore[arg-type]
