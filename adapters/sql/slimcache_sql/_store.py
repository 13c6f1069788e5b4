"""``SQLStore``: slimcache entries in one SQL table, through SQLAlchemy 2's asyncio engine.

The table holds ``key`` (text, primary key), ``value`` (text) and ``expires_at`` (epoch seconds as
a double, ``NULL`` for no expiry). Writes use each dialect's native ``INSERT ... ON CONFLICT``, so
``set`` and ``set_if_absent`` are single atomic statements on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import math
import re
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, Final

from sqlalchemy import (
    Column,
    ColumnElement,
    Double,
    MetaData,
    Table,
    Text,
    and_,
    delete,
    event,
    inspect,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.schema import CreateTable

from slimcache._exceptions import ConfigurationError, MissingExtraError, StoreError
from slimcache._store import validate_ttl

__all__ = ["DEFAULT_TABLE", "SQLStore"]

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
        errors += [asyncpg.PostgresError, asyncpg.InterfaceError]
    return tuple(errors)


_DRIVER_ERRORS: Final = _driver_errors()

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


def _validate_seconds(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value > 0
        or math.isinf(value)
    ):
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds, got {value!r}"
        )
    return float(value)


def _describe_key(key: object) -> str:
    shown = repr(key)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


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


class SQLStore:
    """A slimcache store kept in one table of a SQLite or PostgreSQL database.

    The table is created on first use (or by :meth:`setup`). Expired rows are never returned;
    they are overwritten by the next write of their key, and :meth:`purge_expired` deletes them
    in bulk. Every driver failure is raised as :class:`slimcache.StoreError` naming the operation
    and key, with the driver's exception chained as ``__cause__``.

    For SQLite, every new connection of ``engine`` is switched to WAL mode with a busy timeout,
    so several engines or processes can write to one database file; create the store before the
    engine opens its first connection. An in-memory SQLite database (``sqlite+aiosqlite://``)
    shares one connection and is meant for single-task use only.

    Args:
        engine: An async engine for SQLite (``aiosqlite``) or PostgreSQL (``asyncpg``).
        table: Name of the table holding the entries (letters, digits and ``_``).
        owns_engine: Dispose of ``engine`` in :meth:`aclose`.
        busy_timeout: SQLite only: seconds a writer waits for another writer's lock.

    Raises:
        ConfigurationError: ``engine`` is not an ``AsyncEngine`` of a supported dialect, or
            ``table`` or ``busy_timeout`` is invalid.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        table: str = DEFAULT_TABLE,
        owns_engine: bool = False,
        busy_timeout: float = 30.0,
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
        busy_timeout = _validate_seconds("busy_timeout", busy_timeout)

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
        self._ready = False
        self._setup_lock = asyncio.Lock()
        self._closed = False
        if dialect == "sqlite":
            _install_sqlite_pragmas(engine, busy_timeout)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        table: str = DEFAULT_TABLE,
        pool_size: int | None = None,
        connect_timeout: float = 10.0,
        busy_timeout: float = 30.0,
        command_timeout: float | None = None,
        **engine_options: Any,
    ) -> SQLStore:
        """Create an engine for ``url`` and a store that owns it.

        Args:
            url: ``sqlite+aiosqlite:///path/to/file.db`` or
                ``postgresql+asyncpg://user:password@host:5432/database``.
            table: Name of the table holding the entries.
            pool_size: Connections kept open in the pool (SQLAlchemy's default when ``None``).
            connect_timeout: PostgreSQL only: seconds to wait for a new connection, so an
                unreachable server fails promptly instead of hanging.
            busy_timeout: SQLite only: seconds a writer waits for another writer's lock.
            command_timeout: PostgreSQL only: seconds a statement may run (no limit if ``None``).
            **engine_options: Passed to :func:`sqlalchemy.ext.asyncio.create_async_engine`
                (``pool_pre_ping``, ``max_overflow``, ``echo``, ``connect_args``, ...).

        Returns:
            A store that disposes of its engine in :meth:`aclose`.

        Raises:
            ConfigurationError: The URL, table name or an option is invalid.
            MissingExtraError: The URL's driver is not installed.
        """
        parsed = cls._parse_url(url)
        _validate_table(table)
        connect_timeout = _validate_seconds("connect_timeout", connect_timeout)
        _validate_seconds("busy_timeout", busy_timeout)
        if command_timeout is not None:
            command_timeout = _validate_seconds("command_timeout", command_timeout)
        if pool_size is not None:
            if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
                raise ConfigurationError(
                    f"pool_size must be a positive integer or None, got {pool_size!r}"
                )
            engine_options["pool_size"] = pool_size

        connect_args = dict(engine_options.pop("connect_args", None) or {})
        if parsed.drivername == "postgresql+asyncpg":
            connect_args.setdefault("timeout", connect_timeout)
            if command_timeout is not None:
                connect_args.setdefault("command_timeout", command_timeout)
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
        return cls(engine, table=table, owns_engine=True, busy_timeout=busy_timeout)

    @staticmethod
    def _parse_url(url: str) -> URL:
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise ConfigurationError(f"url is not a valid database URL: {exc}") from None
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

    # -- setup ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create the table if it does not exist yet; safe to call any number of times.

        Raises:
            StoreError: The database could not be reached or the table could not be created.
        """
        self._check_open("setup")
        await self._ensure_table("setup")

    async def _ensure_table(self, what: str) -> None:
        if self._ready:
            return
        async with self._setup_lock:
            if self._ready:
                return
            try:
                await self._create_table()
            except _DRIVER_ERRORS as exc:
                raise StoreError(
                    f"{self}: {what} failed while creating the table: {_first_line(exc)}"
                ) from exc
            self._ready = True

    async def _create_table(self) -> None:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(CreateTable(self._table, if_not_exists=True))
        except SQLAlchemyError:
            # Two processes creating the table at once can collide inside PostgreSQL's
            # catalog even with IF NOT EXISTS; the loser sees the winner's table afterwards.
            async with self._engine.connect() as conn:
                if not await conn.run_sync(self._has_table):
                    raise

    def _has_table(self, conn: Connection) -> bool:
        return inspect(conn).has_table(self._table.name)

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise StoreError(f"{self}: {what} on a closed store")

    @contextlib.asynccontextmanager
    async def _connect(self, what: str, *, write: bool) -> AsyncIterator[AsyncConnection]:
        """Yield a connection (in a committed transaction when ``write``), wrapping failures."""
        await self._ensure_table(what)
        try:
            if write:
                async with self._engine.begin() as conn:
                    yield conn
            else:
                async with self._engine.connect() as conn:
                    yield conn
        except _DRIVER_ERRORS as exc:
            raise StoreError(f"{self}: {what} failed: {_first_line(exc)}") from exc

    def _live(self, now: float) -> ColumnElement[bool]:
        expires_at = self._table.c.expires_at
        return or_(expires_at.is_(None), expires_at > now)

    def _insert(self, key: str, value: str, expires_at: float | None) -> Any:
        insert = sqlite.insert if self._dialect == "sqlite" else postgresql.insert
        return insert(self._table).values(key=key, value=value, expires_at=expires_at)

    # -- the Store protocol --------------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or ``None`` if absent or expired.

        Raises:
            StoreError: The database failed.
        """
        self._check_open("get")
        query = select(self._table.c.value).where(self._table.c.key == key, self._live(time.time()))
        async with self._connect(f"get of key {_describe_key(key)}", write=False) as conn:
            result = await conn.execute(query)
            value: str | None = result.scalar_one_or_none()
        return value

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in the same order, ``None`` for absent or expired keys.

        The keys are read with one ``SELECT ... WHERE key IN (...)`` per 500 distinct keys.

        Raises:
            ConfigurationError: ``keys`` is a single string rather than a sequence of keys.
            StoreError: The database failed.
        """
        if isinstance(keys, str):
            raise ConfigurationError("keys must be a sequence of keys, not a single string")
        self._check_open("get_many")
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        now = time.time()
        found: dict[str, str] = {}
        what = f"get_many of {len(wanted)} keys starting with {_describe_key(wanted[0])}"
        async with self._connect(what, write=False) as conn:
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                query = select(self._table.c.key, self._table.c.value).where(
                    self._table.c.key.in_(chunk), self._live(now)
                )
                for row_key, row_value in await conn.execute(query):
                    found[row_key] = row_value
        return [found.get(key) for key in keys]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value and TTL.

        Args:
            key: The key.
            value: The value.
            ttl: Seconds until the entry expires; ``None`` keeps it until deleted.

        Raises:
            ConfigurationError: ``ttl`` is not ``None`` or a positive number.
            StoreError: The database failed.
        """
        ttl = validate_ttl(ttl)
        self._check_open("set")
        expires_at = None if ttl is None else time.time() + ttl
        stmt = self._insert(key, value, expires_at)
        stmt = stmt.on_conflict_do_update(
            index_elements=[self._table.c.key],
            set_={"value": stmt.excluded.value, "expires_at": stmt.excluded.expires_at},
        )
        async with self._connect(f"set of key {_describe_key(key)}", write=True) as conn:
            await conn.execute(stmt)

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
            StoreError: The database failed.
        """
        return await self._set_if_absent("set_if_absent", key, value, ttl)

    async def _set_if_absent(self, operation: str, key: str, value: str, ttl: float | None) -> bool:
        ttl = validate_ttl(ttl)
        self._check_open(operation)
        now = time.time()
        expires_at = None if ttl is None else now + ttl
        existing_expiry = self._table.c.expires_at
        stmt = self._insert(key, value, expires_at)
        stmt = stmt.on_conflict_do_update(
            index_elements=[self._table.c.key],
            set_={"value": stmt.excluded.value, "expires_at": stmt.excluded.expires_at},
            where=and_(existing_expiry.is_not(None), existing_expiry <= now),
        )
        async with self._connect(f"{operation} of key {_describe_key(key)}", write=True) as conn:
            result = await conn.execute(stmt)
            written: bool = result.rowcount == 1
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
            StoreError: The database failed.
        """
        if expected is None:
            return await self._set_if_absent("compare_and_set", key, value, ttl)
        ttl = validate_ttl(ttl)
        self._check_open("compare_and_set")
        now = time.time()
        columns = self._table.c
        stmt = (
            update(self._table)
            .where(columns.key == key, columns.value == expected, self._live(now))
            .values(value=value, expires_at=None if ttl is None else now + ttl)
        )
        what = f"compare_and_set of key {_describe_key(key)}"
        async with self._connect(what, write=True) as conn:
            result = await conn.execute(stmt)
            written: bool = result.rowcount == 1
        return written

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected`` (and has not expired), atomically.

        Returns:
            ``True`` if this call deleted the entry, ``False`` otherwise.

        Raises:
            StoreError: The database failed.
        """
        self._check_open("compare_and_delete")
        columns = self._table.c
        stmt = delete(self._table).where(
            columns.key == key, columns.value == expected, self._live(time.time())
        )
        what = f"compare_and_delete of key {_describe_key(key)}"
        async with self._connect(what, write=True) as conn:
            result = await conn.execute(stmt)
            deleted: bool = result.rowcount == 1
        return deleted

    async def delete(self, key: str) -> None:
        """Remove ``key``; deleting a missing key is not an error.

        Raises:
            StoreError: The database failed.
        """
        self._check_open("delete")
        stmt = delete(self._table).where(self._table.c.key == key)
        async with self._connect(f"delete of key {_describe_key(key)}", write=True) as conn:
            await conn.execute(stmt)

    async def purge_expired(self) -> int:
        """Delete every expired row.

        Returns:
            How many rows were deleted.

        Raises:
            StoreError: The database failed.
        """
        self._check_open("purge_expired")
        expires_at = self._table.c.expires_at
        stmt = delete(self._table).where(expires_at.is_not(None), expires_at <= time.time())
        async with self._connect("purge_expired", write=True) as conn:
            result = await conn.execute(stmt)
            deleted: int = result.rowcount
        return deleted

    # -- lifetime ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store, disposing of the engine if the store owns it; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_engine:
            await self._engine.dispose()

    async def __aenter__(self) -> SQLStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
