"""``SQLStore``: slimcache entries in one SQL table, through SQLAlchemy 2's asyncio engine.

The table holds ``key`` (text, primary key), ``value`` (text) and ``expires_at`` (epoch seconds as
a double, ``NULL`` for no expiry). Writes use each dialect's native ``INSERT ... ON CONFLICT``, so
``set`` and ``set_if_absent`` are single atomic statements on SQLite and PostgreSQL alike.

Expiry times are computed and compared by the database's clock, inside the statements: a client
whose clock runs ahead or behind neither keeps entries alive too long nor expires them early.
On SQLite that clock is the one of the machine running the statement.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
import re
import sqlite3
import sys
import weakref
from collections.abc import Awaitable, Callable, Sequence
from inspect import signature
from typing import Any, Final, TypeVar, cast

from sqlalchemy import Column, Double, MetaData, Table, Text, event, inspect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.schema import CreateTable
from sqlalchemy.util import greenlet_spawn

from slimcache import ConfigurationError, MissingExtraError, StoreError, StoreTimeout
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    CallBoundedStore,
    CompareAndDeleteOp,
    CompareAndSetOp,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
    check_ops,
    check_seconds,
    combine_options,
    decode_value,
    driver_timeout,
    positive_int,
    redact_url,
    reject_unknown_options,
    store_error,
    validate_ttl,
)
from slimcache_sql._kept import KeptConnection, KeptConnections
from slimcache_sql._statements import (
    COUNT,
    ROWS,
    VALUE,
    DriverSQL,
    OneStep,
    Query,
    Steps,
    Work,
    build_statements,
    steps_of,
)

__all__ = ["DEFAULT_TABLE", "SQLStore"]

_T = TypeVar("_T")

DEFAULT_TABLE: Final = "slimcache_entries"

# URL drivers this store speaks, and the slimcache extra that installs each driver.
_DRIVERS: Final[dict[str, str]] = {
    "sqlite+aiosqlite": "sql",
    "postgresql+asyncpg": "postgres",
}
_DIALECTS: Final = ("sqlite", "postgresql")

# Unquoted-identifier rules, capped at PostgreSQL's 63-byte identifier limit.
_TABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

# Keep each IN (...) list well below SQLite's historical limit of 999 bound parameters.
_IN_CHUNK: Final = 500

# A call on a kept connection is bounded in the caller's own task where a bound's cancellation
# can be taken back (Task.uncancel, Python 3.11+); before, it runs as a task of its own.
_IN_PLACE: Final = sys.version_info >= (3, 11)

# from_url options that may also be given in the URL's query (``?table=cache&timeout=2``);
# any other query option goes to the driver, as SQLAlchemy does.
_STORE_OPTIONS: Final = (
    "table",
    "timeout",
    "pool_size",
    "busy_timeout",
    "connect_timeout",
    "command_timeout",
)


# What SQLAlchemy's pysqlite dialect reads of a SQLite URL's query, and the parameters of a
# SQLite URI (with uri=true they go to SQLite itself).
_SQLITE_URL_OPTIONS: Final = frozenset(
    {"uri", "timeout", "isolation_level", "detect_types", "check_same_thread", "cached_statements"}
    | {"mode", "cache", "immutable", "nolock", "psow", "vfs", "modeof"}
)
# What SQLAlchemy's asyncpg dialect reads itself; the rest go to asyncpg.connect().
_ASYNCPG_DIALECT_OPTIONS: Final = frozenset(
    {"prepared_statement_cache_size", "prepared_statement_name_func"}
)


def _known_url_options(drivername: str) -> frozenset[str]:
    """Every query option a URL of ``drivername`` may hold: the store's and its driver's."""
    known = set(_STORE_OPTIONS)
    if drivername.startswith("sqlite"):
        return frozenset(known | _SQLITE_URL_OPTIONS)
    known |= _ASYNCPG_DIALECT_OPTIONS
    try:
        asyncpg = importlib.import_module("asyncpg")
    except ImportError:  # from_url says what to install, once the options are right
        return frozenset(known | {"ssl", "server_settings", "timeout", "command_timeout"})
    parameters = signature(asyncpg.connect).parameters
    return frozenset(known | set(parameters) - {"dsn", "loop", "connection_class"})


def _driver_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        SQLAlchemyError,
        sqlite3.Error,
        OSError,
        # Distinct from the builtin before Python 3.11; asyncpg raises it on connect timeouts.
        asyncio.TimeoutError,
        TimeoutError,
    ]
    # asyncpg is optional (the "postgres" extra); without it its errors cannot occur.
    if importlib.util.find_spec("asyncpg") is not None:
        asyncpg = importlib.import_module("asyncpg")
        errors += [asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError]
    return tuple(errors)


_DRIVER_ERRORS: Final = _driver_errors()

_SQLITE_BUSY: Final = 5  # SQLite's result code for "database is locked"

# Pause between attempts at a call while another connection holds an SQLite file's lock.
_BUSY_RETRY_SECONDS: Final = 0.02


def _lock_wait_ran_out(exc: BaseException) -> bool:
    """Whether SQLite gave up waiting for a lock (``SQLITE_BUSY``: its busy timeout ran out)."""
    error = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return bool(code & 0xFF == _SQLITE_BUSY)  # extended codes keep it in the low byte
    return str(error).startswith("database is locked")


async def _while_busy(attempt: Callable[[], Awaitable[_T]], *, deadline: float) -> _T:
    """Await ``attempt()``, and again each time SQLite's lock wait runs out, until ``deadline``.

    SQLite waits for another connection's lock only ``busy_timeout`` seconds, and refuses at
    once a wait that could deadlock (a fresh file's first writer switching it to WAL): a call
    allowed more time than that tries again instead of failing at the first busy database. A
    busy attempt took effect nowhere (its transaction was rolled back), so trying again is
    harmless. ``deadline`` (loop time) is the end of the call's time bound, which also ends
    an attempt still waiting then.
    """
    loop = asyncio.get_running_loop()
    while True:
        try:
            return await attempt()
        except _DRIVER_ERRORS as exc:
            if not _lock_wait_ran_out(exc) or loop.time() + _BUSY_RETRY_SECONDS >= deadline:
                raise
        await asyncio.sleep(_BUSY_RETRY_SECONDS)


# Sync engines that already carry the SQLite connect hook, so stores sharing one engine add it once.
_PRAGMA_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _validate_table(table: object) -> str:
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        raise ConfigurationError(
            f"table must be a SQL identifier (a letter or '_' then letters, digits or '_', "
            f"at most 63 characters), got {table!r}"
        )
    if table.lower().startswith("sqlite_"):
        raise ConfigurationError(f"table must not start with 'sqlite_' (reserved), got {table!r}")
    return table


def _pool_size(value: object) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ConfigurationError(
                f"pool_size must be a positive integer, got {value!r}"
            ) from None
    return positive_int("pool_size", value)


def _describe_key(key: object) -> str:
    shown = repr(key)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _install_sqlite_pragmas(engine: AsyncEngine, busy_timeout: float) -> None:
    """Put every new SQLite connection in WAL mode with a busy timeout.

    WAL lets readers proceed while one connection writes, and the busy timeout makes a writer
    wait for the file lock instead of failing at once with "database is locked" when another
    connection (or another process) is writing.
    """
    sync_engine = engine.sync_engine
    if sync_engine in _PRAGMA_ENGINES:
        return
    busy_ms = max(1, round(busy_timeout * 1000))

    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            # busy_timeout first: switching a fresh file to WAL needs the write lock.
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA journal_mode = WAL")
            # Durable across application crashes in WAL mode, and much faster than FULL.
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    event.listen(sync_engine, "connect", on_connect)
    _PRAGMA_ENGINES.add(sync_engine)


class SQLStore(CallBoundedStore):
    """A slimcache store kept in one table of a SQLite or PostgreSQL database.

    The table is created on first use (or by :meth:`setup`). Expired rows are never returned;
    they are overwritten by the next write of their key, and :meth:`purge_expired` deletes them
    in bulk. Every driver failure is raised as :class:`slimcache.StoreError` naming the operation
    and key, with the driver's exception chained as ``__cause__``; so is a call that does not
    finish within ``timeout`` seconds (a database that does not answer, a file another
    connection keeps locked).

    For SQLite, every new connection of ``engine`` is switched to WAL mode with a busy timeout,
    so several engines or processes can write to one database file, and readers are not held
    up by a writer; create the store before the engine opens its first connection. A call
    whose statement still finds the file locked when the busy timeout runs out tries again,
    until ``timeout``. An in-memory SQLite database (``sqlite+aiosqlite://``) shares one
    connection and is meant for single-task use only.

    Calls run on connections the store keeps for itself, straight through the driver: taken
    out of the engine's pool as calls need them (up to the pool's size, beside the pool's own),
    in autocommit mode, so that a read or a write is one statement and a batch one
    transaction. Calls made while they are all in use go through the pool, and so do all
    calls while SQLAlchemy logs statements (``echo``) or anything listens to its cursor events
    (tracing). On a pool that keeps no connection (``NullPool``, an in-memory SQLite
    database) the store keeps none either. :meth:`aclose` closes them, whoever owns the engine.

    Args:
        engine: An async engine for SQLite (``aiosqlite``) or PostgreSQL (``asyncpg``).
        table: Name of the table holding the entries (letters, digits and ``_``).
        owns_engine: Dispose of ``engine`` in :meth:`aclose`.
        timeout: Seconds each call may take, end to end, before it fails with ``StoreError``.
        busy_timeout: SQLite only: seconds a statement waits for another connection's lock
            before the call tries it again (default half of ``timeout``; at most ``timeout``).

    Raises:
        ConfigurationError: ``engine`` is not an ``AsyncEngine`` of a supported dialect, or
            ``table``, ``timeout`` or ``busy_timeout`` is invalid.
    """

    expiry_clock = "store"  # by the database's clock, in the statements (SupportsOwnExpiry)

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        table: str = DEFAULT_TABLE,
        owns_engine: bool = False,
        timeout: float = DEFAULT_STORE_TIMEOUT,
        busy_timeout: float | None = None,
    ) -> None:
        if not isinstance(engine, AsyncEngine):
            raise ConfigurationError(
                f"engine must be a sqlalchemy.ext.asyncio.AsyncEngine, got {type(engine).__name__}"
            )
        dialect = engine.dialect.name
        if dialect not in _DIALECTS:
            raise ConfigurationError(
                f"engine dialect {dialect!r} is not supported (supported: sqlite, postgresql)"
            )
        table = _validate_table(table)
        bound = self.bound_calls(timeout)
        busy = driver_timeout("busy_timeout", busy_timeout, bound)

        self._engine = engine
        self._dialect = dialect
        self._owns_engine = owns_engine
        self._table = Table(
            table,
            MetaData(),
            Column("key", Text, primary_key=True),
            Column("value", Text, nullable=False),
            Column("expires_at", Double, nullable=True),
        )
        self._statements = build_statements(self._table, dialect)
        self._by_name = self._statements.by_name()
        self._ready = False
        self._setup_lock = asyncio.Lock()
        # Calls abandoned at the time bound that are still unwinding (see _run).
        self._unwinding: set[asyncio.Future[Any]] = set()
        self._sql = DriverSQL(self._statements, engine.dialect)
        self._kept = KeptConnections(engine, timeout=bound, unwinding=self._unwinding)
        if dialect == "sqlite":
            _install_sqlite_pragmas(engine, busy)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        table: str | None = None,
        timeout: float | None = None,
        pool_size: int | None = None,
        connect_timeout: float | None = None,
        busy_timeout: float | None = None,
        command_timeout: float | None = None,
        **engine_options: Any,
    ) -> SQLStore:
        """Create an engine for ``url`` and a store that owns it.

        The options named below may also be given in the URL's query
        (``sqlite+aiosqlite:///cache.db?table=summaries&timeout=2``), but not both ways at once;
        other query options go to the driver, and one the driver does not read either (a
        misspelling) is refused at once.

        Args:
            url: ``sqlite+aiosqlite:///path/to/file.db`` or
                ``postgresql+asyncpg://user:password@host:5432/database``.
            table: Name of the table holding the entries (default ``slimcache_entries``).
            timeout: Seconds each call may take, end to end (default
                :data:`~slimcache.stores.toolkit.DEFAULT_STORE_TIMEOUT`). Waiting for a pooled
                connection is bounded by it too.
            pool_size: Connections kept open in the pool (SQLAlchemy's default when ``None``).
            connect_timeout: PostgreSQL only: seconds to wait for a new connection (default
                half of ``timeout``; at most ``timeout``).
            busy_timeout: SQLite only: seconds a statement waits for another connection's lock
                before the call tries it again (default half of ``timeout``; at most
                ``timeout``).
            command_timeout: PostgreSQL only: seconds one statement may run (default half of
                ``timeout``; at most ``timeout``).
            **engine_options: Passed to :func:`sqlalchemy.ext.asyncio.create_async_engine`
                (``pool_pre_ping``, ``max_overflow``, ``echo``, ``connect_args``, ...).

        Returns:
            A store that disposes of its engine in :meth:`aclose`.

        Raises:
            ConfigurationError: The URL (a port that is no number included), table name or an
                option is invalid or unknown, or an option is given both in the URL and as a
                keyword argument. Messages show the URL with its password hidden.
            MissingExtraError: The URL's driver is not installed.
        """
        parsed = cls._parse_url(url)
        url_options: dict[str, str] = {}
        for name in _STORE_OPTIONS:
            value = parsed.query.get(name)
            if isinstance(value, tuple):
                raise ConfigurationError(
                    f"option {name!r} appears more than once in {redact_url(url)!r}"
                )
            if value is not None:
                url_options[name] = value
        reject_unknown_options(url, parsed.query, _known_url_options(parsed.drivername))
        parsed = parsed.difference_update_query(list(url_options))
        keywords = {
            "table": table,
            "timeout": timeout,
            "pool_size": pool_size,
            "connect_timeout": connect_timeout,
            "busy_timeout": busy_timeout,
            "command_timeout": command_timeout,
        }
        options = combine_options(url, url_options, keywords)
        table_name = _validate_table(options.get("table", DEFAULT_TABLE))
        bound = check_seconds("timeout", options.get("timeout", DEFAULT_STORE_TIMEOUT))
        assert bound is not None
        busy = driver_timeout("busy_timeout", options.get("busy_timeout"), bound)
        connect = driver_timeout("connect_timeout", options.get("connect_timeout"), bound)
        command = driver_timeout("command_timeout", options.get("command_timeout"), bound)
        if "pool_size" in options:
            engine_options["pool_size"] = _pool_size(options["pool_size"])
        if not _in_memory(parsed):
            # In-memory SQLite shares one connection (no pool to wait on); elsewhere waiting
            # for a pooled connection is bounded like the rest of the call.
            engine_options.setdefault("pool_timeout", bound)

        connect_args = dict(engine_options.pop("connect_args", None) or {})
        if parsed.drivername == "postgresql+asyncpg":
            for name, seconds in (("timeout", connect), ("command_timeout", command)):
                if name in connect_args:
                    raise ConfigurationError(
                        f"connect_args[{name!r}] is set by the store; give "
                        f"{'connect_timeout' if name == 'timeout' else name} instead"
                    )
                connect_args[name] = seconds
        elif "timeout" not in connect_args:
            # sqlite3's own busy wait, in force until the connect hook sets busy_timeout.
            connect_args["timeout"] = busy
        if connect_args:
            engine_options["connect_args"] = connect_args

        try:
            engine = create_async_engine(parsed, **engine_options)
        except ImportError as exc:
            extra = _DRIVERS[parsed.drivername]
            raise MissingExtraError(
                f"the {parsed.drivername}:// store needs its driver ({exc.name or exc}); "
                f"run: pip install 'slimcache[{extra}]'"
            ) from None
        except (ArgumentError, TypeError) as exc:
            raise ConfigurationError(
                f"invalid engine options for {parsed.drivername}: {exc}"
            ) from exc
        return cls(engine, table=table_name, owns_engine=True, timeout=bound, busy_timeout=busy)

    @staticmethod
    def _parse_url(url: str) -> URL:
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError) as exc:  # ValueError: a port that is no number
            raise ConfigurationError(
                f"url {redact_url(url)!r} is not a valid database URL: {exc}"
            ) from None
        if parsed.drivername not in _DRIVERS:
            known = ", ".join(f"{name}://" for name in _DRIVERS)
            raise ConfigurationError(
                f"url scheme {parsed.drivername!r} is not supported by SQLStore (use {known})"
            )
        return parsed

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine the store runs on."""
        return self._engine

    @property
    def table(self) -> Table:
        """The SQLAlchemy table holding the entries."""
        return self._table

    def __repr__(self) -> str:
        return f"SQLStore(dialect={self._dialect!r}, table={self._table.name!r})"

    # -- running statements --------------------------------------------------------------------

    def _run(
        self,
        operation: str,
        work: Work[_T],
        *,
        write: bool,
        atomic: bool = False,
        key: str | None = None,
        about: str | Callable[[], str] = "",
    ) -> Awaitable[_T]:
        """Run the steps of ``work`` (in one transaction when ``atomic``), creating the table
        first if needed, within the store's timeout, translating every failure.

        A call runs on a connection the store keeps, straight through the driver (see
        :mod:`slimcache_sql._kept`): an idle one, or one it opens while the store keeps fewer
        than the engine's pool holds. Otherwise it runs through the engine's pool, in a
        committed transaction when ``write``. Each attempt takes the steps afresh (see
        :func:`_while_busy`).

        ``key`` or ``about`` says what the call is about, for error messages only: they are
        put into words when a call fails, not on every call.

        Returns:
            The call, to be awaited at once (it holds the kept connection it took).
        """
        self.check_open(operation)
        kept = self._kept.take()
        if kept is not None and _IN_PLACE:
            return self._on_kept(operation, kept, work, atomic, key, about)
        deadline = asyncio.get_running_loop().time() + self._timeout
        # Calls given up on are kept until they have unwound, for aclose.
        return self.run_call(
            self._attempt(operation, work, write, atomic, key, about, deadline, kept),
            f"SQLStore {operation}",
            lambda: self._what(key, about),
            unwinding=self._unwinding,
        )

    async def _on_kept(
        self,
        operation: str,
        kept: KeptConnection,
        work: Work[_T],
        atomic: bool,
        key: str | None,
        about: str | Callable[[], str],
    ) -> _T:
        """Run a call on ``kept``, bounded in the caller's own task (Python 3.11+).

        A kept connection whose call is given up on is closed in the background, never
        waited on (see :meth:`KeptConnections.give_back`), so the call needs no task of its
        own.
        """
        kept.watch(self._timeout)
        try:
            if isinstance(work, OneStep) and self._dialect != "sqlite":
                # One statement on a connection that is never busy: nothing to drive or retry.
                text, parameters = self._sql.prepare(work.query)
                return work.finish(await kept.ask(work.query.answer, text, parameters))
            return await self._attempts_on(kept, work, atomic, kept.deadline)
        except _DRIVER_ERRORS as exc:
            raise self._failure(operation, key, about, exc) from exc
        except asyncio.CancelledError as exc:
            if kept.unwatch():
                raise StoreTimeout(
                    f"SQLStore {operation} of {self._what(key, about)} failed: "
                    f"no answer within {self._timeout:g} s"
                ) from exc
            raise
        finally:
            kept.unwatch()
            self._kept.give_back(kept)

    async def _attempt(
        self,
        operation: str,
        work: Work[_T],
        write: bool,
        atomic: bool,
        key: str | None,
        about: str | Callable[[], str],
        deadline: float,
        kept: KeptConnection | None,
    ) -> _T:
        # Driver errors are translated here, inside the bounded call, so that the bound's own
        # TimeoutError is never mistaken for a driver's (asyncpg times out connects with one).
        try:
            if kept is None and not self._ready:
                await self._ensure_table(deadline)
            if kept is None and self._kept.may_open():
                kept = await _while_busy(self._kept.open, deadline=deadline)
            if kept is not None:
                try:
                    return await self._attempts_on(kept, work, atomic, deadline)
                finally:
                    self._kept.give_back(kept)
            return await _while_busy(
                lambda: greenlet_spawn(self._in_connection, work, write), deadline=deadline
            )
        except _DRIVER_ERRORS as exc:
            raise self._failure(operation, key, about, exc) from exc

    def _failure(
        self,
        operation: str,
        key: str | None,
        about: str | Callable[[], str],
        exc: BaseException,
    ) -> StoreError:
        # SQLite gives up waiting for another connection's lock with "database is locked":
        # its busy timeout ran out, as much a timeout as the driver's own.
        timeouts = (type(exc),) if _lock_wait_ran_out(exc) else ()
        return store_error(f"SQLStore {operation}", self._what(key, about), exc, timeouts=timeouts)

    def _attempts_on(
        self, kept: KeptConnection, work: Work[_T], atomic: bool, deadline: float
    ) -> Awaitable[_T]:
        """Attempts at ``work`` on ``kept``: again while SQLite is busy, until ``deadline``.

        The caller gives ``kept`` back afterwards (it is closed unless it is clean).
        """
        if self._dialect != "sqlite":  # only SQLite is ever busy
            return self._kept_attempt(kept, steps_of(work), atomic)
        return _while_busy(
            lambda: self._kept_attempt(kept, steps_of(work), atomic), deadline=deadline
        )

    async def _kept_attempt(self, kept: KeptConnection, steps: Steps[_T], atomic: bool) -> _T:
        """One attempt at ``steps`` on ``kept``, inside ``BEGIN`` and ``COMMIT`` when
        ``atomic`` (the connection is in autocommit mode: one statement needs neither)."""
        if atomic:
            await kept.command(kept.begin_write)
        try:
            sql = self._sql
            answer: Any = None
            while True:
                try:
                    query = steps.send(answer)
                except StopIteration as done:
                    result: _T = done.value
                    break
                text, parameters = sql.prepare(query)
                answer = await kept.ask(query.answer, text, parameters)
            if atomic:
                await kept.command("COMMIT")
        except BaseException:
            # A connection that answered is cleaned up in place (a busy attempt may be tried
            # again on it); one stopped in the middle of a driver call is closed instead.
            if atomic and not kept.in_call and kept.in_transaction():
                await kept.command("ROLLBACK")
            raise
        return result

    def _in_connection(self, work: Work[_T], write: bool) -> _T:
        # Runs inside greenlet_spawn, the bridge AsyncConnection itself is built on: the sync
        # engine's driver calls are awaited on the event loop from here.
        engine = self._engine.sync_engine
        if write:
            with engine.begin() as conn:
                return self._take_steps(conn, steps_of(work))
        with engine.connect() as conn:
            return self._take_steps(conn, steps_of(work))

    def _take_steps(self, conn: Connection, steps: Steps[_T]) -> _T:
        """Run each step's statement on ``conn``, sending the step its answer."""
        statements = self._by_name
        answer: Any = None
        while True:
            try:
                query = steps.send(answer)
            except StopIteration as done:
                result: _T = done.value
                return result
            rows = conn.execute(statements[query.statement], query.parameters)
            if query.answer == VALUE:
                answer = rows.scalar_one_or_none()
            elif query.answer == ROWS:
                answer = rows.all()
            else:
                answer = rows.rowcount

    def _what(self, key: str | None, about: str | Callable[[], str]) -> str:
        """Describe what a call was about, for its error message."""
        if key is not None:
            target = f"key {_describe_key(key)}"
        else:
            target = about if isinstance(about, str) else about()
        table = self._table.name
        return f"{target} in table {table!r}" if target else f"table {table!r}"

    # -- setup ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create the table if it does not exist yet; safe to call any number of times.

        Raises:
            StoreError: The database could not be reached or the table could not be created.
        """

        await self._run("setup", _nothing, write=False)

    async def _ensure_table(self, deadline: float) -> None:
        if self._ready:
            return
        async with self._setup_lock:
            if self._ready:
                return
            await self._create_table(deadline)
            self._ready = True

    async def _create_table(self, deadline: float) -> None:
        try:
            # Another connection may hold the SQLite file (a fresh file's first writer switches
            # it to WAL): wait for it to let go, within the call's time bound.
            await _while_busy(self._create, deadline=deadline)
        except SQLAlchemyError as exc:
            if _lock_wait_ran_out(exc):
                raise
            # Two processes creating the table at once can collide inside PostgreSQL's catalog
            # even with IF NOT EXISTS; the loser sees the winner's table afterwards.
            async with self._engine.connect() as conn:
                if not await conn.run_sync(self._has_table):
                    raise

    async def _create(self) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(CreateTable(self._table, if_not_exists=True))

    def _has_table(self, conn: Connection) -> bool:
        return inspect(conn).has_table(self._table.name)

    # -- the Store protocol --------------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or ``None`` if absent or expired.

        Raises:
            StoreError: The database failed or did not answer in time.
        """
        value: str | None = await self._run("get", self._read(key), write=False, key=key)
        return value

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in the same order, ``None`` for absent or expired keys.

        The keys are read with one ``SELECT ... WHERE key IN (...)`` per 500 distinct keys.

        Raises:
            ConfigurationError: ``keys`` is a single string rather than a sequence of keys.
            StoreError: The database failed or did not answer in time.
        """
        if isinstance(keys, str):
            raise ConfigurationError("keys must be a sequence of keys, not a single string")
        self.check_open("get_many")
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []

        def read() -> Steps[dict[str, str | None]]:
            found: dict[str, str | None] = {}
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                rows = yield Query("get_many", {"keys": chunk}, ROWS)
                for row_key, row_value in rows:
                    found[row_key] = self._text(row_value, row_key)
            return found

        def about() -> str:
            return f"{len(wanted)} keys starting with {_describe_key(wanted[0])}"

        found = await self._run("get_many", read, write=False, about=about)
        return [found.get(key) for key in keys]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value and TTL.

        Args:
            key: The key.
            value: The value.
            ttl: Seconds until the entry expires; ``None`` keeps it until deleted.

        Raises:
            ConfigurationError: ``ttl`` is not ``None`` or a positive number.
            StoreError: The database failed or did not answer in time.
        """
        await self._run("set", self._work(SetOp(key, value, ttl)), write=True, key=key)

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` holds nothing or only an expired entry.

        One atomic ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` statement: the update branch
        fires only when the existing row has expired, so of many concurrent callers exactly one
        writes.

        Args:
            key: The key.
            value: The value.
            ttl: Seconds until the entry expires; ``None`` keeps it until deleted.

        Returns:
            ``True`` if this call wrote the value, ``False`` if a live entry already existed.

        Raises:
            ConfigurationError: ``ttl`` is not ``None`` or a positive number.
            StoreError: The database failed or did not answer in time.
        """
        work = self._work(SetIfAbsentOp(key, value, ttl))
        written: bool = await self._run("set_if_absent", work, write=True, key=key)
        return written

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` holds ``expected`` (``None``: nothing live), atomically.

        One statement: with ``expected=None`` the same ``INSERT ... ON CONFLICT`` as
        :meth:`set_if_absent`; otherwise ``UPDATE ... WHERE key = ? AND value = ?`` on a live
        row, so of many concurrent callers expecting the same value exactly one writes.

        Args:
            key: The key.
            expected: The value the key must hold, or ``None`` for no live entry.
            value: The new value.
            ttl: Seconds until the new entry expires; ``None`` keeps it until deleted.

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key held something else.

        Raises:
            ConfigurationError: ``ttl`` is not ``None`` or a positive number.
            StoreError: The database failed or did not answer in time.
        """
        work = self._work(CompareAndSetOp(key, expected, value, ttl))
        written: bool = await self._run("compare_and_set", work, write=True, key=key)
        return written

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected`` (and has not expired), atomically.

        Returns:
            ``True`` if this call deleted the entry, ``False`` otherwise.

        Raises:
            StoreError: The database failed or did not answer in time.
        """
        work = self._work(CompareAndDeleteOp(key, expected))
        deleted: bool = await self._run("compare_and_delete", work, write=True, key=key)
        return deleted

    async def delete(self, key: str) -> None:
        """Remove ``key``; deleting a missing key is not an error.

        Raises:
            StoreError: The database failed or did not answer in time.
        """
        await self._run("delete", self._work(DeleteOp(key)), write=True, key=key)

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        """Run ``ops`` in order in one transaction: all of them take effect, or none.

        Consecutive deletes run as one ``DELETE ... WHERE key IN (...)`` per 500 keys.

        Returns:
            One result per operation (see :class:`slimcache.stores.SupportsBatch`).

        Raises:
            ConfigurationError: An operation is malformed (nothing runs).
            StoreError: The database failed or did not answer in time (nothing is written).
        """
        checked = check_ops(ops)
        if not checked:
            return []
        works: list[tuple[int, Work[Any]]] = []  # (operations, work)
        for deleting, group in itertools.groupby(checked, key=_is_delete):
            run_of_ops = list(group)
            if deleting and len(run_of_ops) > 1:
                keys = [op.key for op in run_of_ops]
                works.append((len(keys), self._delete_many(keys)))
            else:
                works.extend((1, self._work(op)) for op in run_of_ops)

        def run() -> Steps[list[Any]]:
            results: list[Any] = []
            for operations, work in works:
                result = yield from steps_of(work)
                results.extend([result] * operations)  # a run of deletes: None each
            return results

        def about() -> str:
            return f"{len(checked)} operations, the first on {_describe_key(checked[0].key)}"

        write = not all(isinstance(op, GetOp) for op in checked)
        # One write needs no transaction of its own; several are all or nothing.
        atomic = write and len(checked) > 1
        return await self._run("batch", run, write=write, atomic=atomic, about=about)

    def _delete_many(self, keys: list[str]) -> Callable[[], Steps[None]]:
        """Work deleting ``keys`` (each result ``None``, as for single deletes)."""
        wanted = list(dict.fromkeys(keys))

        def steps() -> Steps[None]:
            for start in range(0, len(wanted), _IN_CHUNK):
                yield Query("delete_many", {"keys": wanted[start : start + _IN_CHUNK]}, COUNT)

        return steps

    def _work(self, op: StoreOp) -> Work[Any]:
        """The steps carrying out ``op``, returning its result.

        A conditional write changes one row exactly when its condition holds, so its result is
        whether one row changed.
        """
        if isinstance(op, GetOp):
            return self._read(op.key)
        if isinstance(op, DeleteOp):
            return _no_result(Query("delete", {"key": op.key}, COUNT))
        parameters: dict[str, Any]
        if isinstance(op, CompareAndDeleteOp):
            parameters = {"key": op.key, "expected": op.expected}
            return self._compare(Query("compare_and_delete", parameters, COUNT), op.key)
        ttl = validate_ttl(op.ttl)
        if isinstance(op, SetOp):
            parameters = {"key": op.key, "value": op.value, "ttl": ttl}
            return _no_result(Query("set", parameters, COUNT))
        if isinstance(op, SetIfAbsentOp) or op.expected is None:
            # The same statement serves compare-and-set expecting nothing live.
            parameters = {"key": op.key, "value": op.value, "ttl": ttl}
            return _one_row(Query("set_if_absent", parameters, COUNT))
        parameters = {
            "match_key": op.key,
            "expected": op.expected,
            "new_value": op.value,
            "new_ttl": ttl,
        }
        return self._compare(Query("compare_and_set", parameters, COUNT), op.key)

    def _read(self, key: str) -> OneStep[str | None]:
        return OneStep(Query("get", {"key": key}, VALUE), lambda raw: self._text(raw, key))

    def _text(self, raw: Any, key: str) -> str | None:
        """A stored value as text. SQLite keeps whatever another program stored, BLOBs too:
        their bytes are decoded as :meth:`get` shows them (foreign bytes read as a miss)."""
        if isinstance(raw, (bytes, bytearray, memoryview)):
            return decode_value(
                bytes(raw), where=f"key {_describe_key(key)} in table {self._table.name!r}"
            )
        return cast("str | None", raw)

    def _compare(self, attempt: Query, key: str) -> Work[bool]:
        """Work running the conditional write ``attempt`` (on its ``expected`` parameter).

        On SQLite a value another program stored as a BLOB never equals text, so when the
        write does not happen and the key holds a BLOB that reads as the expected text, the
        write is tried again against those very bytes: a value :meth:`get` returned can
        always be replaced. (The second try is a compare-and-set of its own: it writes only
        if the key still holds those bytes.)
        """
        if self._dialect != "sqlite":
            return _one_row(attempt)
        expected = attempt.parameters["expected"]

        def steps() -> Steps[bool]:
            if (yield attempt) == 1:
                return True
            raw = yield Query("get", {"key": key}, VALUE)
            if not isinstance(raw, bytes) or self._text(raw, key) != expected:
                return False
            again = attempt._replace(parameters={**attempt.parameters, "expected": raw})
            return bool((yield again) == 1)

        return steps

    async def purge_expired(self) -> int:
        """Delete every expired row.

        Returns:
            How many rows were deleted.

        Raises:
            StoreError: The database failed or did not answer in time.
        """
        return await self._run(
            "purge_expired",
            _count_of(Query("purge_expired", {}, COUNT)),
            write=True,
            about="expired rows",
        )

    # -- lifetime ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store, disposing of the engine if the store owns it; idempotent.

        Calls abandoned at the time bound are given up to ``timeout`` seconds to unwind first.
        """
        if not self.mark_closed():
            return
        await self._kept.aclose()
        if self._unwinding:
            await asyncio.wait(set(self._unwinding), timeout=self._timeout)
        if self._owns_engine:
            await self._engine.dispose()


def _in_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def _is_delete(op: StoreOp) -> bool:
    return isinstance(op, DeleteOp)


def _nothing() -> Steps[None]:
    """Work taking no step (:meth:`SQLStore.setup` only makes sure the table exists)."""
    yield from ()


def _no_result(query: Query) -> OneStep[None]:
    """Work running ``query``, with no result."""
    return OneStep(query, _none)


def _count_of(query: Query) -> OneStep[int]:
    """Work running ``query``, answering how many rows it changed."""
    return OneStep(query, int)


def _one_row(query: Query) -> OneStep[bool]:
    """Work running ``query``, answering whether it changed exactly one row."""
    return OneStep(query, _is_one)


def _none(answer: object) -> None:
    return None


def _is_one(changed: int) -> bool:
    return changed == 1
