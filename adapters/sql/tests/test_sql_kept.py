"""How ``SQLStore`` runs its calls: on connections it keeps, straight through the driver.

After its first call a store runs on a connection of its own, in autocommit mode, instead of
checking one out of the engine's pool for every call. These tests hold what that must keep:
one statement per read or write and no transaction around it, batches all or nothing,
SQLAlchemy's logging and cursor events seeing every statement while anyone listens, and
connections closed with the store, on a real SQLite file and a real PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from slimcache_sql import SQLStore
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from slimcache import StoreError
from slimcache.stores import DeleteOp, GetOp, SetOp, StoreOp
from tests.servers.postgres_server import PostgresServer

Factory = Callable[..., Awaitable[SQLStore]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.servers)])
def make_store(request: pytest.FixtureRequest) -> Factory:
    """The store factory of each SQL backend in turn."""
    return cast(Factory, request.getfixturevalue(f"{request.param}_store_factory"))


async def every_kind_of_call(store: SQLStore, tag: str) -> None:
    """One call of each kind the store offers, each checked."""
    key = f"k-{tag}"
    await store.set(key, "v", ttl=60)
    assert await store.get(key) == "v"
    assert await store.get_many([key, "missing"]) == ["v", None]
    assert await store.set_if_absent(key, "other") is False
    assert await store.compare_and_set(key, "v", "w") is True
    assert await store.compare_and_delete(key, "w") is True
    assert await store.batch([SetOp(key, "x"), GetOp(key), DeleteOp(key)]) == [None, "x", None]
    await store.delete(key)
    assert await store.purge_expired() == 0


async def test_calls_run_on_a_kept_connection_not_through_the_pool(make_store: Factory) -> None:
    store = await make_store()
    await store.set("first", "v")  # the first call opens the connection the store keeps
    checkouts: list[object] = []
    event.listen(store.engine.sync_engine.pool, "checkout", lambda *args: checkouts.append(args))
    for round_ in range(5):
        await every_kind_of_call(store, str(round_))
    assert checkouts == []  # no checkout, so no reset on return either
    pool: Any = store.engine.pool
    assert pool.checkedout() == 0  # the kept connection is the store's, not the pool's


def _logged_statements(server: PostgresServer, since: int) -> list[str]:
    """The statements PostgreSQL logged (``log_statement = all``) after byte ``since``."""
    with server.log.open(encoding="utf-8", errors="replace") as log:
        log.seek(since)
        lines = log.read().splitlines()
    pattern = re.compile(r"LOG:\s+(?:statement|execute [^:]*): (.*)")
    return [m.group(1) for line in lines if (m := pattern.search(line))]


@pytest.mark.servers
async def test_postgres_runs_each_call_as_one_statement_outside_any_transaction(
    postgres_server: PostgresServer, postgres_store_factory: Factory
) -> None:
    store = await postgres_store_factory(connect_args={"server_settings": {"log_statement": "all"}})
    await store.set("k", "v")  # opens the kept connection (and creates the table)
    since = postgres_server.log.stat().st_size
    for _ in range(3):
        assert await store.get("k") == "v"
        await store.set("k", "v")
        assert await store.compare_and_set("k", "v", "v") is True
    logged = _logged_statements(postgres_server, since)
    verbs = [statement.split()[0].upper() for statement in logged]
    # Before, a read was BEGIN, SELECT, ROLLBACK and a write BEGIN, INSERT, COMMIT.
    assert verbs == ["SELECT", "INSERT", "UPDATE"] * 3, logged

    since = postgres_server.log.stat().st_size
    assert await store.batch([SetOp("a", "1"), SetOp("b", "2")]) == [None, None]
    verbs = [s.split()[0].upper().rstrip(";") for s in _logged_statements(postgres_server, since)]
    assert verbs == ["BEGIN", "INSERT", "INSERT", "COMMIT"]


async def _poison_inserts(store: SQLStore, key: str) -> None:
    """Make the database refuse to insert ``key`` into the store's table (a trigger)."""
    table = store.table.name
    async with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            await conn.execute(
                text(
                    f"CREATE TRIGGER {table}_poison BEFORE INSERT ON {table} "
                    f"WHEN NEW.key = '{key}' BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
                )
            )
            return
        await conn.execute(
            text(
                f"CREATE FUNCTION {table}_poison() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF NEW.key = '{key}' THEN RAISE EXCEPTION 'poisoned'; END IF; "
                "RETURN NEW; END $$"
            )
        )
        await conn.execute(
            text(
                f"CREATE TRIGGER {table}_poison BEFORE INSERT ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION {table}_poison()"
            )
        )


async def test_a_batch_refused_midway_writes_nothing_and_the_store_goes_on(
    make_store: Factory,
) -> None:
    store = await make_store()
    await store.set("kept", "before")
    await _poison_inserts(store, "poison")
    ops: list[StoreOp] = [SetOp("kept", "during"), SetOp("new", "during"), SetOp("poison", "x")]
    for _ in range(3):  # on the kept connection, again and again
        with pytest.raises(StoreError, match="poisoned"):
            await store.batch(ops)
        assert await store.get_many(["kept", "new", "poison"]) == ["before", None, None]
    assert await store.batch(ops[:2]) == [None, None]
    assert await store.get_many(["kept", "new"]) == ["during", "during"]


async def test_statement_listeners_see_every_statement(make_store: Factory) -> None:
    # Tracing and logging hook into SQLAlchemy's cursor events: while anything listens, the
    # store runs its statements through SQLAlchemy, even with a connection of its own open.
    store = await make_store()
    await store.set("k", "v")
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if store.table.name in statement:
            seen.append(statement.split()[0].upper())

    event.listen(store.engine.sync_engine, "before_cursor_execute", record)
    assert await store.get("k") == "v"
    await store.set("k", "w")
    assert seen == ["SELECT", "INSERT"]
    event.remove(store.engine.sync_engine, "before_cursor_execute", record)
    assert await store.get("k") == "w"
    assert seen == ["SELECT", "INSERT"]  # nobody listens: the kept connection serves again


async def test_echo_logs_every_statement(
    make_store: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    store = await make_store()
    await store.set("k", "v")
    with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
        assert await store.get("k") == "v"
    logged = [r.getMessage() for r in caplog.records if store.table.name in r.getMessage()]
    assert [message.split()[0] for message in logged] == ["SELECT"]


@pytest.mark.servers
def test_a_store_used_from_one_event_loop_then_another(postgres_server: PostgresServer) -> None:
    # A kept asyncpg connection belongs to the loop that opened it: the next loop opens its own.
    store = SQLStore.from_url(postgres_server.url, table=f"t_{uuid.uuid4().hex}")
    asyncio.run(store.set("k", "v"))
    assert asyncio.run(store.get("k")) == "v"
    asyncio.run(store.set("k", "w"))

    async def last() -> str | None:
        try:
            return await store.get("k")
        finally:
            await store.aclose()

    assert asyncio.run(last()) == "w"


async def _backends(server: PostgresServer, application: str) -> int:
    engine = create_async_engine(server.url)
    try:
        async with engine.connect() as conn:
            count = await conn.scalar(
                text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                {"name": application},
            )
    finally:
        await engine.dispose()
    return int(count or 0)


@pytest.mark.servers
async def test_aclose_closes_the_kept_connections_of_a_borrowed_engine(
    postgres_server: PostgresServer,
) -> None:
    application = f"slimcache-test-{uuid.uuid4().hex[:8]}"
    engine = create_async_engine(
        postgres_server.url, connect_args={"server_settings": {"application_name": application}}
    )
    try:
        store = SQLStore(engine, table=f"t_{uuid.uuid4().hex}")
        await asyncio.gather(*(store.set(f"k{i}", "v") for i in range(8)))
        await asyncio.gather(*(store.get(f"k{i}") for i in range(8)))
        assert await _backends(postgres_server, application) > 0
        await store.aclose()
        await engine.dispose()  # the pool's own connections
        assert await _backends(postgres_server, application) == 0
    finally:
        await engine.dispose()


async def _until_waiting_for_a_lock(conn: AsyncConnection, application: str) -> None:
    """Return once a session of ``application`` waits for a lock on the server."""
    for _ in range(3000):
        waiting = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name "
                "AND wait_event_type = 'Lock'"
            ),
            {"name": application},
        )
        if waiting:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"no session of {application} waited for a lock")


@pytest.mark.servers
async def test_a_postgres_session_the_server_ends_mid_call_is_not_used_again(
    postgres_server: PostgresServer, postgres_store_factory: Factory
) -> None:
    application = f"slimcache-test-{uuid.uuid4().hex[:8]}"
    store = await postgres_store_factory(
        connect_args={"server_settings": {"application_name": application}}
    )
    await store.set("k", "before")  # the store now keeps a connection
    holder = create_async_engine(postgres_server.url)
    try:
        async with holder.begin() as conn:
            # Hold the row's lock, so that the store's next write waits on the server.
            await conn.execute(text(f"UPDATE {store.table.name} SET value = 'held'"))
            waiting = asyncio.create_task(store.set("k", "during"))
            await _until_waiting_for_a_lock(conn, application)
            await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = :name"
                ),
                {"name": application},
            )
            with pytest.raises(StoreError, match="set of key 'k'"):
                await waiting
            # The session ended with a FATAL error: the very next call opens another one.
            assert await store.get("k") == "before"
    finally:
        await holder.dispose()


@pytest.mark.servers
async def test_a_connection_postgres_refuses_to_open_is_a_store_error(
    postgres_server: PostgresServer,
) -> None:
    # A kept connection is opened through the engine's pool, which leaves the driver's own
    # errors unwrapped: they must still come out as StoreError.
    database = f"db_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(postgres_server.url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f"CREATE DATABASE {database}"))
        url = postgres_server.url.rsplit("/", 1)[0] + f"/{database}"
        async with SQLStore.from_url(url) as store:
            await store.set("k", "v")  # the store now keeps a connection
            async with admin.connect() as conn:
                await conn.execute(text(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false"))
                await conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name"
                    ),
                    {"name": database},
                )
            # The first call may still find the ended session; the next opens a connection.
            for _ in range(2):
                with pytest.raises(StoreError, match="get of key 'k'"):
                    await store.get("k")
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        await admin.dispose()
