"""SQL-specific behaviour of ``SQLStore`` on real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import gc
import socket
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy
from slimcache_sql import DEFAULT_TABLE, SQLStore
from sqlalchemy import Engine, create_engine, event, func, insert, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import QueuePool

from slimcache import (
    ConfigurationError,
    KeepMessages,
    MessageThreshold,
    StoreError,
    StoreTimeout,
    SummarizeCompressor,
    open_store,
)
from slimcache.stores import CompareAndDeleteOp, DeleteOp, GetOp, SetOp, StoreOp
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT
from tests.fakes import RecordingSummarizer, chat
from tests.servers.postgres_server import PostgresServer
from tests.servers.sqlite_files import held_file, sqlite_url

Factory = Callable[..., Awaitable[SQLStore]]

# Generous bounds that only stop a hang; no test asserts on how fast anything is.
GUARD = 30.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.servers)])
def make_store(request: pytest.FixtureRequest) -> Factory:
    """The store factory of each SQL backend in turn."""
    return cast(Factory, request.getfixturevalue(f"{request.param}_store_factory"))


def _new_table() -> str:
    return f"t_{uuid.uuid4().hex}"


async def _table_exists(store: SQLStore) -> bool:
    async with store.engine.connect() as conn:
        exists: bool = await conn.run_sync(lambda c: inspect(c).has_table(store.table.name))
    return exists


async def _row_count(store: SQLStore) -> int:
    async with store.engine.connect() as conn:
        count = await conn.scalar(select(func.count()).select_from(store.table))
    return int(count or 0)


async def _wait_until_gone(store: SQLStore, *keys: str) -> None:
    """Poll until every key reads as absent (they were written with a short TTL)."""
    deadline = time.monotonic() + GUARD
    while any(value is not None for value in await store.get_many(keys)):
        if time.monotonic() > deadline:
            pytest.fail(f"keys {keys} did not expire within {GUARD} s")
        await asyncio.sleep(0.05)


# -- construction --------------------------------------------------------------------------------


async def test_from_url_sqlite_through_the_registry(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "cache.db")
    store = open_store(url)
    assert isinstance(store, SQLStore)
    async with store:
        assert store.engine.dialect.name == "sqlite"
        assert store.table.name == DEFAULT_TABLE
        await store.set("greeting", "hello")
        assert await store.get("greeting") == "hello"
        async with store.engine.connect() as conn:
            mode = await conn.scalar(text("PRAGMA journal_mode"))
            busy_ms = await conn.scalar(text("PRAGMA busy_timeout"))
        assert mode == "wal"
        assert busy_ms == DEFAULT_STORE_TIMEOUT / 2 * 1000
    # The data lives in the file: a new store on it sees the entry.
    async with SQLStore.from_url(url) as again:
        assert await again.get("greeting") == "hello"


@pytest.mark.servers
async def test_from_url_postgres_through_the_registry(postgres_server: PostgresServer) -> None:
    table = _new_table()
    store = open_store(postgres_server.url, table=table, pool_size=2)
    assert isinstance(store, SQLStore)
    async with store:
        assert store.engine.dialect.name == "postgresql"
        await store.set("greeting", "hello", ttl=60)
        assert await store.get("greeting") == "hello"
        assert await _table_exists(store)


BAD_TABLES = ["", "1table", "with-dash", "with space", 'x"; drop table y; --', "a" * 64, "sqlite_x"]


@pytest.mark.parametrize("table", BAD_TABLES)
@pytest.mark.parametrize(
    "url", ["sqlite+aiosqlite:///unused.db", "postgresql+asyncpg://u@127.0.0.1:1/db"]
)
def test_bad_table_name_is_a_configuration_error(url: str, table: str) -> None:
    with pytest.raises(ConfigurationError, match="table"):
        SQLStore.from_url(url, table=table)


@pytest.mark.parametrize("table", [*BAD_TABLES, None, 7])
async def test_bad_table_name_in_constructor(table: object) -> None:
    engine = create_async_engine("sqlite+aiosqlite://")
    try:
        with pytest.raises(ConfigurationError, match="table"):
            SQLStore(engine, table=table)  # type: ignore[arg-type]
    finally:
        await engine.dispose()


async def test_longest_valid_table_name_is_accepted(make_store: Factory) -> None:
    store = await make_store(table="T" + "_" * 61 + "9")
    await store.set("k", "v")
    assert await store.get("k") == "v"


@pytest.mark.parametrize(
    ("url", "options", "argument"),
    [
        ("postgresql://u@127.0.0.1:1/db", {}, "url"),
        ("mysql+aiomysql://u@127.0.0.1:1/db", {}, "url"),
        ("not a url", {}, "url"),
        ("postgresql+asyncpg://u@127.0.0.1:1/db", {"connect_timeout": 0}, "connect_timeout"),
        ("postgresql+asyncpg://u@127.0.0.1:1/db", {"command_timeout": -1}, "command_timeout"),
        ("postgresql+asyncpg://u@127.0.0.1:1/db", {"pool_size": 0}, "pool_size"),
        ("sqlite+aiosqlite:///unused.db", {"busy_timeout": float("inf")}, "busy_timeout"),
        ("sqlite+aiosqlite:///unused.db", {"pool_size": True}, "pool_size"),
        ("sqlite+aiosqlite:///unused.db", {"no_such_engine_option": 1}, "engine options"),
        ("sqlite+aiosqlite:///unused.db", {"timeout": 0}, "timeout"),
        ("sqlite+aiosqlite:///unused.db?timeout=soon", {}, "timeout"),
        ("sqlite+aiosqlite:///unused.db?pool_size=x", {}, "pool_size"),
        ("sqlite+aiosqlite:///unused.db?table=a&table=b", {}, "table"),
        ("sqlite+aiosqlite:///unused.db", {"timeout": 1, "busy_timeout": 2}, "busy_timeout"),
        ("postgresql+asyncpg://u@127.0.0.1:1/db?command_timeout=9", {}, "command_timeout"),
        ("postgresql+asyncpg://u@127.0.0.1:1/db", {"connect_timeout": 6}, "connect_timeout"),
        (
            "postgresql+asyncpg://u@127.0.0.1:1/db",
            {"connect_args": {"command_timeout": 1}},
            "command_timeout",
        ),
    ],
)
def test_bad_from_url_arguments(url: str, options: dict[str, Any], argument: str) -> None:
    with pytest.raises(ConfigurationError, match=argument):
        SQLStore.from_url(url, **options)


async def test_options_in_the_url_query(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "query.db") + "?table=from_query&timeout=3&busy_timeout=1.25"
    async with SQLStore.from_url(url) as store:
        assert store.table.name == "from_query"
        assert store.timeout == 3.0
        await store.set("k", "v")
        async with store.engine.connect() as conn:
            assert await conn.scalar(text("PRAGMA busy_timeout")) == 1250
        assert await _table_exists(store)


@pytest.mark.parametrize(
    ("query", "keyword"),
    [
        ("table=a", {"table": "b"}),
        ("timeout=2", {"timeout": 2.0}),
        ("busy_timeout=1", {"busy_timeout": 1.0}),
        ("pool_size=2", {"pool_size": 3}),
    ],
)
def test_an_option_in_the_url_and_as_a_keyword_is_a_configuration_error(
    query: str, keyword: dict[str, Any]
) -> None:
    name = next(iter(keyword))
    with pytest.raises(ConfigurationError, match=f"{name}.*both in the URL"):
        SQLStore.from_url(f"sqlite+aiosqlite:///unused.db?{query}", **keyword)


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("postgresql+asyncpg://u@127.0.0.1:1/db?timeout=3", {}, (1.5, 1.5)),
        ("postgresql+asyncpg://u@127.0.0.1:1/db", {"timeout": 4, "command_timeout": 1}, (2, 1)),
        ("postgresql+asyncpg://u@127.0.0.1:1/db?connect_timeout=0.5", {}, (0.5, 2.5)),
    ],
)
async def test_postgres_driver_timeouts_follow_the_call_timeout(
    url: str, options: dict[str, Any], expected: tuple[float, float]
) -> None:
    store = SQLStore.from_url(url, **options)
    connects: list[dict[str, Any]] = []

    @event.listens_for(store.engine.sync_engine, "do_connect")
    def record(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        connects.append(dict(cparams))
        raise OSError("this test only looks at the connect arguments")

    async with store:
        with pytest.raises(StoreError, match="get of key 'k'"):
            await store.get("k")
        pool: Any = store.engine.pool
        assert pool.timeout() == store.timeout  # waiting for a pooled connection
    assert (connects[0]["timeout"], connects[0]["command_timeout"]) == expected


def test_constructor_needs_an_async_engine() -> None:
    sync_engine = create_engine("sqlite://")
    with pytest.raises(ConfigurationError, match="AsyncEngine"):
        SQLStore(sync_engine)  # type: ignore[arg-type]


async def test_bad_arguments_fail_before_any_io() -> None:
    # Nothing listens on port 1: reaching the server would be a StoreError, not these.
    store = SQLStore.from_url("postgresql+asyncpg://u@127.0.0.1:1/db", connect_timeout=1)
    async with store:
        with pytest.raises(ConfigurationError, match="ttl"):
            await store.set("k", "v", ttl=0)
        with pytest.raises(ConfigurationError, match="ttl"):
            await store.set_if_absent("k", "v", ttl=-5)
        with pytest.raises(ConfigurationError, match="keys"):
            await store.get_many("abc")


# -- table creation ------------------------------------------------------------------------------


async def test_table_is_created_lazily_on_first_use(make_store: Factory) -> None:
    store = await make_store()
    assert not await _table_exists(store)
    assert await store.get("missing") is None
    assert await _table_exists(store)


async def test_explicit_setup_creates_the_table_once(make_store: Factory) -> None:
    store = await make_store()
    await store.setup()
    assert await _table_exists(store)
    await store.set("k", "v")
    await store.setup()
    await asyncio.gather(*(store.setup() for _ in range(5)))
    assert await store.get("k") == "v"


@pytest.mark.servers
async def test_many_engines_setting_up_one_postgres_table_at_once(
    postgres_store_factory: Factory,
) -> None:
    table = _new_table()
    stores = [await postgres_store_factory(table=table, pool_size=1) for _ in range(6)]
    await asyncio.gather(*(store.setup() for store in stores))
    await stores[0].set("k", "v")
    assert [await store.get("k") for store in stores] == ["v"] * 6


# -- reads and writes ----------------------------------------------------------------------------


async def test_set_upserts_value_and_expiry(make_store: Factory) -> None:
    store = await make_store()
    await store.set("k", "first", ttl=0.2)
    await store.set("k", "second")
    assert await store.get("k") == "second"
    assert await _row_count(store) == 1
    async with store.engine.connect() as conn:
        expires_at = await conn.scalar(select(store.table.c.expires_at))
    assert expires_at is None  # the overwrite dropped the old TTL
    await store.set("k", "third", ttl=3600)
    assert await store.get("k") == "third"
    assert await _row_count(store) == 1


async def test_get_many_in_order_with_duplicates_and_missing(make_store: Factory) -> None:
    store = await make_store()
    keys = [f"key-{i}" for i in range(1200)]  # more than one IN (...) chunk
    for key in keys[::3]:
        await store.set(key, key.upper())
    asked = ["nope", *keys, keys[3], "nope"]
    got = await store.get_many(asked)
    expected = [None] + [k.upper() if i % 3 == 0 else None for i, k in enumerate(keys)]
    assert got == [*expected, keys[3].upper(), None]
    assert await store.get_many([]) == []


async def test_delete(make_store: Factory) -> None:
    store = await make_store()
    await store.set("k", "v")
    await store.delete("k")
    await store.delete("k")
    assert await store.get("k") is None
    assert await _row_count(store) == 0


async def test_unicode_and_large_values_round_trip(make_store: Factory) -> None:
    store = await make_store()
    value = "résumé — 要約 🧠 " * 20_000
    key = "thread/ümlaut/🔑"
    await store.set(key, value)
    assert await store.get(key) == value
    assert await store.get_many([key]) == [value]


@pytest.mark.skipif(
    tuple(int(part) for part in sqlalchemy.__version__.split(".")[:2]) < (2, 1),
    reason="SQLAlchemy 2.0 (what Python 3.10 resolves) compiles ON CONFLICT statements again",
)
async def test_every_operation_runs_a_statement_from_the_compiled_cache(
    make_store: Factory,
) -> None:
    store = await make_store()
    await store.setup()
    executed: list[tuple[str, bool]] = []

    @event.listens_for(store.engine.sync_engine, "before_cursor_execute")
    def record(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        executed.append((statement.split()[0], context.cache_hit is context.dialect.CACHE_HIT))

    async def every_operation(round_: int) -> None:
        key = f"k{round_}"
        await store.set(key, "v", ttl=60 * (round_ + 1))
        await store.set(key, "v")
        assert await store.get(key) == "v"
        assert await store.get_many([key, "missing"]) == ["v", None]
        assert await store.set_if_absent(f"fresh{round_}", "v") is True
        assert await store.compare_and_set(key, "v", "w") is True
        assert await store.compare_and_set(f"new{round_}", None, "v") is True
        assert await store.compare_and_delete(key, "w") is True
        await store.delete(f"fresh{round_}")
        assert await store.purge_expired() == 0

    await every_operation(0)
    first = len(executed)
    assert first == 10  # one statement per operation, every one of them seen by the listener
    for round_ in (1, 2):
        await every_operation(round_)
    # After the first round each statement (with or without a TTL, a key found or not) is
    # compiled once and then found in SQLAlchemy's cache by its cache key.
    misses = [verb for verb, hit in executed[first:] if not hit]
    assert not misses, f"statements compiled again: {misses}"
    assert len(executed) == 3 * first


async def test_a_batch_deletes_a_run_of_keys_with_one_statement_per_500(
    make_store: Factory,
) -> None:
    store = await make_store()
    keys = [f"k{i}" for i in range(1200)]
    await store.batch([SetOp(key, "v") for key in [*keys, "kept"]])
    executed: list[str] = []

    @event.listens_for(store.engine.sync_engine, "before_cursor_execute")
    def record(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        executed.append(statement.split()[0])

    ops: list[StoreOp] = [DeleteOp(key) for key in keys[:1000]]
    ops += [SetOp("k0", "again"), DeleteOp("k1000"), GetOp("k0"), *map(DeleteOp, keys[1001:])]
    results = await store.batch(ops)
    assert results == [None] * 1001 + [None, "again"] + [None] * 199
    # 1000 keys, then one, then 199: the single delete and the runs, in order.
    assert executed.count("DELETE") == 2 + 1 + 1
    assert len(executed) == 4 + 2  # and the set and the get
    assert await store.get_many(["k0", "k999", "k1000", "k1199", "kept"]) == [
        "again",
        None,
        None,
        None,
        "v",
    ]


# -- bytes another program stored ------------------------------------------------------------


async def with_foreign_rows(path: Path, rows: dict[str, bytes]) -> tuple[SQLStore, Engine]:
    """A store on a new SQLite file, and a second engine that put ``rows`` in as BLOBs."""
    store = SQLStore.from_url(sqlite_url(path), table="cache")
    await store.setup()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        for key, raw in rows.items():
            conn.execute(text("INSERT INTO cache VALUES (:k, :v, NULL)"), {"k": key, "v": raw})
    return store, engine


async def test_blobs_another_program_stored_read_as_text_and_can_be_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite keeps a BLOB in a TEXT column: it reads as text and compares as what it reads."""
    foreign = {"garbage": b"\xff\xfe not utf-8", "utf8": b"valid text", "gone": b"\x80"}
    store, engine = await with_foreign_rows(tmp_path / "foreign.db", foreign)
    with caplog.at_level("WARNING", logger="slimcache"):
        garbage = await store.get("garbage")
    assert garbage == "\ufffd\ufffd not utf-8"
    assert "not UTF-8" in caplog.text
    assert await store.get_many(["utf8", "garbage"]) == ["valid text", garbage]
    assert await store.batch([GetOp("utf8")]) == ["valid text"]
    # What get returned is what the key holds: compares against it succeed, others do not.
    assert await store.compare_and_set("garbage", "something else", "lost") is False
    assert await store.compare_and_set("garbage", garbage, "replaced") is True
    assert await store.compare_and_set("utf8", "valid text", "replaced too") is True
    assert await store.batch([CompareAndDeleteOp("gone", "\ufffd")]) == [True]
    assert await store.get_many(["garbage", "utf8", "gone"]) == ["replaced", "replaced too", None]
    engine.dispose()
    await store.aclose()


async def test_a_compressor_replaces_a_foreign_blob_under_its_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    foreign = {"thread_t:index": b"\xff junk"}
    store, engine = await with_foreign_rows(tmp_path / "foreign-index.db", foreign)
    summarizer = RecordingSummarizer()
    compressor = SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(20), keep=KeepMessages(10)
    )
    with caplog.at_level("WARNING", logger="slimcache"):
        first = await compressor.compress_detailed(chat(30), thread_id="t")
        second = await compressor.compress_detailed(chat(30), thread_id="t")
    assert (first.outcome, first.cached, second.outcome) == ("summarized", True, "hit")
    assert len(summarizer.calls) == 1
    assert "index kept changing" not in caplog.text
    with engine.connect() as conn:
        kind = conn.execute(text("SELECT typeof(value) FROM cache WHERE key = 'thread_t:index'"))
        assert kind.scalar_one() == "text"
    engine.dispose()
    await store.aclose()


# -- expiry --------------------------------------------------------------------------------------


async def test_expired_rows_are_hidden_then_purged(make_store: Factory) -> None:
    store = await make_store()
    short = [f"short-{i}" for i in range(3)]
    for key in short:
        await store.set(key, "soon gone", ttl=0.2)
    await store.set("long", "stays", ttl=3600)
    await store.set("forever", "stays")
    await _wait_until_gone(store, *short)
    assert [await store.get(key) for key in short] == [None, None, None]
    assert await _row_count(store) == 5  # still stored, never returned
    assert await store.purge_expired() == 3
    assert await store.purge_expired() == 0
    assert await _row_count(store) == 2
    assert await store.get_many(["long", "forever", *short]) == ["stays", "stays", None, None, None]


async def test_set_if_absent_treats_an_expired_row_as_absent(make_store: Factory) -> None:
    store = await make_store()
    await store.set("live", "kept", ttl=3600)
    assert await store.set_if_absent("live", "intruder") is False
    assert await store.get("live") == "kept"

    await store.set("stale", "old", ttl=0.2)
    await _wait_until_gone(store, "stale")
    assert await store.set_if_absent("stale", "new") is True
    assert await store.get("stale") == "new"
    async with store.engine.connect() as conn:
        expires_at = await conn.scalar(
            select(store.table.c.expires_at).where(store.table.c.key == "stale")
        )
    assert expires_at is None  # the winner's own TTL (none) replaced the stale one
    assert await store.set_if_absent("stale", "newer") is False
    assert await store.set_if_absent("fresh", "first", ttl=60) is True
    assert await store.get("fresh") == "first"


@pytest.mark.parametrize("previous", ["none", "expired"])
async def test_set_if_absent_race_has_exactly_one_winner(
    make_store: Factory, previous: str
) -> None:
    store = await make_store()
    if previous == "expired":
        await store.set("lock", "stale", ttl=0.2)
        await _wait_until_gone(store, "lock")
    values = [f"contender-{i}" for i in range(50)]
    results = await asyncio.wait_for(
        asyncio.gather(*(store.set_if_absent("lock", value, ttl=60) for value in values)),
        timeout=GUARD,
    )
    assert sum(results) == 1
    assert await store.get("lock") == values[results.index(True)]


async def test_compare_and_set_is_one_conditional_statement(make_store: Factory) -> None:
    store = await make_store()
    await store.set("k", "v1", ttl=3600)
    assert await store.compare_and_set("k", "v1", "v2") is True
    async with store.engine.connect() as conn:
        row = (await conn.execute(select(store.table.c.value, store.table.c.expires_at))).one()
    assert tuple(row) == ("v2", None)
    assert await store.compare_and_set("k", "v1", "v3", ttl=60) is False
    assert await store.compare_and_set("k", "v2", "v3", ttl=60) is True
    async with store.engine.connect() as conn:
        expires_at = await conn.scalar(select(store.table.c.expires_at))
    assert expires_at is not None
    assert time.time() + 50 < expires_at <= time.time() + 60
    assert await _row_count(store) == 1


async def test_compare_and_set_and_delete_ignore_expired_rows(make_store: Factory) -> None:
    store = await make_store()
    await store.set("k", "old", ttl=0.2)
    await _wait_until_gone(store, "k")
    assert await _row_count(store) == 1  # still stored, expired
    assert await store.compare_and_set("k", "old", "revived") is False
    assert await store.compare_and_delete("k", "old") is False
    assert await _row_count(store) == 1
    assert await store.compare_and_set("k", None, "new") is True
    assert await store.get("k") == "new"
    assert await store.compare_and_delete("k", "new") is True
    assert await _row_count(store) == 0


async def test_compare_and_set_race_across_two_engines(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "cas.db")
    async with SQLStore.from_url(url) as first, SQLStore.from_url(url) as second:
        await first.set("index", "v0")
        await second.setup()
        contenders = [
            (store, f"{label}{i}")
            for i in range(20)
            for label, store in (("a", first), ("b", second))
        ]
        results = await asyncio.wait_for(
            asyncio.gather(*(store.compare_and_set("index", "v0", v) for store, v in contenders)),
            timeout=GUARD,
        )
        assert sum(results) == 1
        winner = contenders[results.index(True)][1]
        assert await first.get("index") == winner
        assert await second.get("index") == winner


# -- SQLite specifics ----------------------------------------------------------------------------


async def test_two_engines_write_one_sqlite_file_concurrently(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "shared.db")
    async with SQLStore.from_url(url) as first, SQLStore.from_url(url) as second:
        await asyncio.gather(first.setup(), second.setup())

        async def writes(store: SQLStore, name: str) -> list[bool]:
            won = []
            for i in range(40):
                await store.set(f"{name}-{i}", f"{name}:{i}", ttl=3600)
                await store.set("shared", name)
                won.append(await store.set_if_absent(f"once-{i}", name))
            await store.purge_expired()
            return won

        results = await asyncio.wait_for(
            asyncio.gather(
                *(
                    writes(store, f"{label}{n}")
                    for n in range(4)
                    for label, store in (("a", first), ("b", second))
                )
            ),
            timeout=120,
        )
        # Each set_if_absent key has exactly one winner across both engines.
        assert [sum(column) for column in zip(*results, strict=True)] == [1] * 40
        names = [f"{label}{n}" for n in range(4) for label in ("a", "b")]
        for store in (first, second):
            for name in names:
                got = await store.get_many([f"{name}-{i}" for i in range(40)])
                assert got == [f"{name}:{i}" for i in range(40)]
            assert await store.get("shared") in names


async def test_setup_waits_for_a_fresh_file_held_by_another_connection(tmp_path: Path) -> None:
    # Another process holds a brand-new file in an exclusive transaction while this store sets
    # up: the table cannot be created (nor even WAL switched on) until it lets go. Setup waits
    # within its time bound, however short SQLite's own lock wait, instead of failing at once.
    path = tmp_path / "fresh.db"
    with held_file(path) as holder:
        async with SQLStore.from_url(sqlite_url(path), timeout=10.0, busy_timeout=0.05) as store:
            setup = asyncio.create_task(store.setup())
            await asyncio.sleep(0.5)
            assert not setup.done()  # waiting for the lock, not failed
            holder.execute("COMMIT")
            await asyncio.wait_for(setup, timeout=GUARD)
            await store.set("k", "v")
            assert await store.get("k") == "v"


async def test_setup_on_a_held_file_still_ends_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    with held_file(path):
        async with SQLStore.from_url(sqlite_url(path), timeout=0.5, busy_timeout=0.05) as store:
            start = time.monotonic()
            with pytest.raises(StoreTimeout):
                await asyncio.wait_for(store.setup(), timeout=GUARD)
            assert time.monotonic() - start < 0.5 + 2.0


async def test_a_held_file_does_not_make_the_store_open_a_connection_per_attempt(
    tmp_path: Path,
) -> None:
    # While another process holds the file, the new connection cannot switch it to WAL. It is
    # kept all the same (WAL is the file's mode, set by whichever connection gets the lock),
    # and setup waits on it. A connection refused at connect is instead terminated while the
    # call's bound may cancel it, and that cancellation can leave aiosqlite's closing task
    # waiting forever, so that the program hangs when its event loop shuts down.
    path = tmp_path / "held-connects.db"
    with held_file(path) as holder:
        async with SQLStore.from_url(sqlite_url(path), timeout=0.5, busy_timeout=0.02) as store:
            opened: list[object] = []

            @event.listens_for(store.engine.sync_engine, "do_connect")
            def count(*args: object) -> None:
                opened.append(args)

            with pytest.raises(StoreTimeout):
                await asyncio.wait_for(store.setup(), timeout=GUARD)
            assert 1 <= len(opened) <= 2  # not one per attempt (about 20 in 0.5 s)
            holder.execute("COMMIT")
            await store.set("k", "v")  # a kept connection switches the file to WAL now
            assert await store.get("k") == "v"
    with sqlite3.connect(path) as reader:
        assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_connection_opened_on_a_held_file_gets_its_pragmas_when_next_taken(
    tmp_path: Path,
) -> None:
    path = tmp_path / "held-pragmas.db"
    engine = create_async_engine(sqlite_url(path), pool_size=1, max_overflow=0)
    try:
        async with SQLStore(engine, busy_timeout=0.02):  # installs the connect hooks
            with held_file(path):
                async with engine.connect():  # opened while the file is held: no pragmas yet
                    pass
            async with engine.connect() as conn:  # the same connection, out of the pool again
                synchronous = (await conn.exec_driver_sql("PRAGMA synchronous")).scalar()
                journal = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
            assert (synchronous, journal) == (1, "wal")  # NORMAL, not SQLite's FULL (2)
    finally:
        await engine.dispose()


async def test_sqlite_writer_waits_for_another_engines_lock(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "locked.db")
    async with (
        SQLStore.from_url(url) as holder,
        SQLStore.from_url(url) as patient,
        SQLStore.from_url(url, timeout=0.5, busy_timeout=0.05) as impatient,
    ):
        await holder.setup()
        async with holder.engine.begin() as conn:
            # This open write transaction holds the file's write lock until the block ends.
            await conn.execute(insert(holder.table).values(key="held", value="x"))
            waiting = asyncio.create_task(patient.set("waiter", "done"))
            with pytest.raises(StoreTimeout, match="set of key 'hurry'"):
                await asyncio.wait_for(impatient.set("hurry", "x"), timeout=GUARD)
            assert not waiting.done()  # blocked on the lock, not failed
        await asyncio.wait_for(waiting, timeout=GUARD)
        assert await impatient.get_many(["held", "waiter"]) == ["x", "done"]


async def test_sqlite_writer_waits_past_busy_timeout_within_its_bound(tmp_path: Path) -> None:
    # SQLite's own lock wait (busy_timeout) runs out long before the call's bound: the call
    # tries again until the lock is let go, instead of failing at the first busy database.
    url = sqlite_url(tmp_path / "contended.db")
    async with (
        SQLStore.from_url(url) as holder,
        SQLStore.from_url(url, timeout=10.0, busy_timeout=0.05) as writer,
    ):
        await holder.setup()
        await writer.set("k", "before")
        async with holder.engine.begin() as conn:
            await conn.execute(insert(holder.table).values(key="held", value="x"))
            waiting = asyncio.create_task(writer.compare_and_set("k", "before", "after"))
            await asyncio.sleep(0.5)  # ten of SQLite's lock waits
            assert not waiting.done()  # still waiting for the lock, not failed
        assert await asyncio.wait_for(waiting, timeout=GUARD) is True
        assert await writer.get_many(["k", "held"]) == ["after", "x"]


async def test_a_call_given_up_on_unwinds_quietly_before_aclose_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = sqlite_url(tmp_path / "given-up.db")
    async with SQLStore.from_url(url) as holder:
        await holder.setup()
        impatient = SQLStore.from_url(url, timeout=2.0, busy_timeout=0.5)
        await impatient.set("k", "before")
        async with holder.engine.begin() as conn:
            await conn.execute(insert(holder.table).values(key="held", value="x"))
            # The caller gives up while the write waits for the lock; the write is cancelled
            # and unwinds in the background (closing its connection waits for the lock too).
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(impatient.set("k", "given up"), timeout=0.05)
            start = time.monotonic()
            await asyncio.wait_for(impatient.aclose(), timeout=GUARD)
            waited = time.monotonic() - start
        assert 0.2 < waited < GUARD  # aclose waited for the abandoned write to unwind
        assert await holder.get_many(["k", "held"]) == ["before", "x"]
    gc.collect()
    await asyncio.sleep(0)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_driver_errors_name_the_operation_and_key(sqlite_store_factory: Factory) -> None:
    store = await sqlite_store_factory()
    await store.set("k", "v")
    async with store.engine.begin() as conn:
        await conn.run_sync(store.table.drop)
    calls: list[tuple[Callable[[], Awaitable[object]], str]] = [
        (lambda: store.get("k"), "get of key 'k'"),
        (lambda: store.set("k", "v"), "set of key 'k'"),
        (lambda: store.set_if_absent("k", "v"), "set_if_absent of key 'k'"),
        (lambda: store.compare_and_set("k", None, "v"), "compare_and_set of key 'k'"),
        (lambda: store.compare_and_set("k", "v", "w"), "compare_and_set of key 'k'"),
        (lambda: store.compare_and_delete("k", "v"), "compare_and_delete of key 'k'"),
        (lambda: store.delete("k"), "delete of key 'k'"),
        (lambda: store.get_many(["k", "j"]), "get_many of 2 keys"),
        (store.purge_expired, "purge_expired"),
    ]
    for call, operation in calls:
        with pytest.raises(StoreError, match=operation) as info:
            await call()
        assert isinstance(info.value.__cause__, SQLAlchemyError)
        assert store.table.name in str(info.value)


# -- isolation and lifetime ----------------------------------------------------------------------


async def test_tables_are_isolated(make_store: Factory) -> None:
    first = await make_store()
    second = SQLStore(first.engine, table=_new_table())  # same database, other table
    await first.set("k", "one")
    await second.set("k", "two", ttl=0.2)
    assert (await first.get("k"), await second.get("k")) == ("one", "two")
    await _wait_until_gone(second, "k")
    assert await first.purge_expired() == 0
    assert await second.purge_expired() == 1
    await first.delete("k")
    assert await second.set_if_absent("k", "three") is True
    assert (await first.get("k"), await second.get("k")) == (None, "three")
    await second.aclose()  # does not own the shared engine
    assert await first.get_many(["k"]) == [None]


async def test_aclose_disposes_only_an_owned_engine(tmp_path: Path) -> None:
    engine = create_async_engine(sqlite_url(tmp_path / "borrowed.db"))
    try:
        async with SQLStore(engine) as borrowed:
            await borrowed.set("k", "v")
        with pytest.raises(StoreError, match="closed"):
            await borrowed.get("k")
        async with engine.connect() as conn:  # still usable by its owner
            assert await conn.scalar(text(f"SELECT value FROM {DEFAULT_TABLE}")) == "v"
    finally:
        await engine.dispose()

    owned = SQLStore.from_url(sqlite_url(tmp_path / "owned.db"))
    await owned.set("k", "v")
    pool = owned.engine.pool
    assert isinstance(pool, QueuePool)
    assert pool.checkedin() == 1
    await owned.aclose()
    await owned.aclose()
    assert owned.engine.pool is not pool  # disposed: the old pool and its connections are gone
    assert pool.checkedin() == 0
    with pytest.raises(StoreError, match="closed"):
        await owned.set("k", "v")


# -- PostgreSQL faults ---------------------------------------------------------------------------


@pytest.mark.servers
@pytest.mark.timeout(180)
async def test_postgres_outage_gives_store_error_then_recovers(
    postgres_server: PostgresServer, postgres_store_factory: Factory
) -> None:
    store = await postgres_store_factory(connect_timeout=2.0)
    await store.set("k", "before")

    async def work_until_failure() -> StoreError:
        for i in range(100_000):
            try:
                await store.set(f"busy-{i % 10}", "x")
                await store.get("k")
            except StoreError as exc:
                return exc
            await asyncio.sleep(0.005)
        pytest.fail("the outage never surfaced")

    worker = asyncio.create_task(work_until_failure())
    await asyncio.sleep(0.2)
    assert not worker.done()
    try:
        await asyncio.to_thread(postgres_server.stop)
        failure = await asyncio.wait_for(worker, timeout=GUARD)
        assert "of key 'busy-" in str(failure) or "of key 'k'" in str(failure)
        assert failure.__cause__ is not None
        # While the server is down, new operations fail too (refused, not hanging).
        with pytest.raises(StoreError, match="get of key 'k'"):
            await asyncio.wait_for(store.get("k"), timeout=GUARD)
    finally:
        if not worker.done():
            worker.cancel()
        await asyncio.to_thread(postgres_server.start)
    assert await asyncio.wait_for(store.get("k"), timeout=GUARD) == "before"
    await store.set("k", "after")
    assert await store.get("k") == "after"


async def test_unresponsive_postgres_fails_within_connect_timeout() -> None:
    # A socket that accepts connections at the TCP level but never speaks the protocol.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = f"postgresql+asyncpg://u@127.0.0.1:{port}/db"
        async with SQLStore.from_url(url, connect_timeout=0.5) as store:
            with pytest.raises(StoreError, match="get of key 'k'") as info:
                await asyncio.wait_for(store.get("k"), timeout=GUARD)
            assert isinstance(info.value.__cause__, (TimeoutError, asyncio.TimeoutError))


async def test_refused_postgres_connection_is_a_store_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as reserved:
        reserved.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = reserved.getsockname()[1]
        url = f"postgresql+asyncpg://u@127.0.0.1:{port}/db"
        async with SQLStore.from_url(url) as store:
            with pytest.raises(StoreError, match="set of key 'k'") as info:
                await asyncio.wait_for(store.set("k", "v"), timeout=GUARD)
            assert isinstance(info.value.__cause__, OSError)


@pytest.mark.servers
async def test_postgres_rejects_nul_characters_as_a_store_error(
    postgres_store_factory: Factory,
) -> None:
    store = await postgres_store_factory()
    with pytest.raises(StoreError, match="set of key 'nul") as info:
        await store.set("nul\x00key", "v")
    assert isinstance(info.value.__cause__, SQLAlchemyError)
    await store.set("k", "v")  # the failed write left the store usable
    assert await store.get("k") == "v"
