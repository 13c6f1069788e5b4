"""``SQLStore``: slimcache entries in one SQL table, through SQLAlchemy 2's asyncio engine.

The table holds ``key`` (text, primary key), ``value`` (text) and ``expires_at`` (epoch seconds as
a double, ``NULL`` for no expiry). Writes use each dialect's native ``INSERT ... ON CONFLICT``, so
``set`` and ``set_if_absent`` are single atomic statements on SQLite and PostgreSQL alike.

Expiry times are computed and compared by the database's clock, inside the statements: a client
whose clock runs ahead or behind neither keeps entries alive too long nor expires them early.
On SQLite that clock is the one of the machine running the statement.

This module holds the store's operations, each written as the steps of
:mod:`slimcache_sql._statements`; :mod:`slimcache_sql._url` reads a URL and its options,
:mod:`slimcache_sql._attempts` carries a call's steps to the database and
:mod:`slimcache_sql._driver` knows the drivers' errors and SQLite's busy file.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, cast

from sqlalchemy import Column, Double, MetaData, Table, Text
from sqlalchemy.ext.asyncio import AsyncEngine

from slimcache import ConfigurationError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    CallBoundedStore,
    CompareAndDeleteOp,
    CompareAndSetOp,
    DatabaseTarget,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
    check_ops,
    decode_value,
    driver_timeout,
    validate_ttl,
)
from slimcache_sql._attempts import About, Attempts, describe_key
from slimcache_sql._driver import install_sqlite_connect, install_sqlite_pragmas
from slimcache_sql._kept import KeptConnections
from slimcache_sql._statements import (
    COUNT,
    ROWS,
    VALUE,
    OneStep,
    Query,
    Steps,
    Work,
    build_statements,
    count_of,
    no_result,
    no_steps,
    one_row,
    steps_of,
)
from slimcache_sql._url import DEFAULT_TABLE, check_table, engine_from_url

__all__ = ["DEFAULT_TABLE", "SQLStore"]

_T = TypeVar("_T")

_DIALECTS: Final = ("sqlite", "postgresql")

# Keep each IN (...) list well below SQLite's historical limit of 999 bound parameters.
_IN_CHUNK: Final = 500

# A call on a kept connection is bounded in the caller's own task where a bound's cancellation
# can be taken back (Task.uncancel, Python 3.11+); before, it runs as a task of its own.
_IN_PLACE: Final = sys.version_info >= (3, 11)


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
        table = check_table(table)
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
        # Calls abandoned at the time bound that are still unwinding (see _run).
        self._unwinding: set[asyncio.Future[Any]] = set()
        self._kept = KeptConnections(engine, timeout=bound, unwinding=self._unwinding)
        self._attempts = Attempts(
            engine,
            self._table,
            build_statements(self._table, dialect),
            kept=self._kept,
            timeout=bound,
        )
        if dialect == "sqlite":
            install_sqlite_pragmas(engine, busy)
            install_sqlite_connect(engine)
        url = engine.url
        self._target = DatabaseTarget(
            dialect,
            url.host,
            url.port,
            url.database if dialect == "postgresql" else None,  # SQLite's is a file path
            table,
        )

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
        opened = engine_from_url(
            url,
            {
                "table": table,
                "timeout": timeout,
                "pool_size": pool_size,
                "connect_timeout": connect_timeout,
                "busy_timeout": busy_timeout,
                "command_timeout": command_timeout,
            },
            engine_options,
        )
        return cls(
            opened.engine,
            table=opened.table,
            owns_engine=True,
            timeout=opened.timeout,
            busy_timeout=opened.busy_timeout,
        )

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine the store runs on."""
        return self._engine

    @property
    def table(self) -> Table:
        """The SQLAlchemy table holding the entries."""
        return self._table

    @property
    def database_target(self) -> DatabaseTarget:
        """SQLite or PostgreSQL, its server, database and table, as telemetry reports them."""
        return self._target

    def __repr__(self) -> str:
        return f"SQLStore(dialect={self._dialect!r}, table={self._table.name!r})"

    # -- running a call ------------------------------------------------------------------------

    def _run(
        self,
        operation: str,
        work: Work[_T],
        *,
        write: bool,
        atomic: bool = False,
        key: str | None = None,
        about: About = "",
    ) -> Awaitable[_T]:
        """Run the steps of ``work`` (in one transaction when ``atomic``), creating the table
        first if needed, within the store's timeout, translating every failure.

        A call runs on a connection the store keeps, straight through the driver (see
        :mod:`slimcache_sql._kept`): an idle one, or one it opens while the store keeps fewer
        than the engine's pool holds. Otherwise it runs through the engine's pool, in a
        committed transaction when ``write``. Each attempt takes the steps afresh (see
        :mod:`slimcache_sql._attempts`).

        ``key`` or ``about`` says what the call is about, for error messages only: they are
        put into words when a call fails, not on every call.

        Returns:
            The call, to be awaited at once (it holds the kept connection it took).
        """
        self.check_open(operation)
        attempts = self._attempts
        kept = self._kept.take()
        if kept is not None and _IN_PLACE:
            return attempts.on_kept(operation, kept, work, atomic, key, about)
        deadline = asyncio.get_running_loop().time() + self._timeout
        # Calls given up on are kept until they have unwound, for aclose.
        return self.run_call(
            attempts.attempt(operation, work, write, atomic, key, about, deadline, kept),
            f"SQLStore {operation}",
            lambda: attempts.what(key, about),
            unwinding=self._unwinding,
        )

    # -- setup ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create the table if it does not exist yet; safe to call any number of times.

        Raises:
            StoreError: The database could not be reached or the table could not be created.
        """

        await self._run("setup", no_steps, write=False)

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
            return f"{len(wanted)} keys starting with {describe_key(wanted[0])}"

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
            return f"{len(checked)} operations, the first on {describe_key(checked[0].key)}"

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
            return no_result(Query("delete", {"key": op.key}, COUNT))
        parameters: dict[str, Any]
        if isinstance(op, CompareAndDeleteOp):
            parameters = {"key": op.key, "expected": op.expected}
            return self._compare(Query("compare_and_delete", parameters, COUNT), op.key)
        ttl = validate_ttl(op.ttl)
        if isinstance(op, SetOp):
            parameters = {"key": op.key, "value": op.value, "ttl": ttl}
            return no_result(Query("set", parameters, COUNT))
        if isinstance(op, SetIfAbsentOp) or op.expected is None:
            # The same statement serves compare-and-set expecting nothing live.
            parameters = {"key": op.key, "value": op.value, "ttl": ttl}
            return one_row(Query("set_if_absent", parameters, COUNT))
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
                bytes(raw), where=f"key {describe_key(key)} in table {self._table.name!r}"
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
            return one_row(attempt)
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
            count_of(Query("purge_expired", {}, COUNT)),
            write=True,
            about="expired rows",
        )

    async def scan_keys(
        self, prefix: str, *, cursor: str | None = None, count: int = 100
    ) -> tuple[list[str], str | None]:
        """Up to ``count`` live keys that start with ``prefix``, after ``cursor``, in order: one
        ``SELECT`` (see :class:`~slimcache.stores.SupportsScanKeys`).

        Raises:
            StoreError: The database failed or did not answer in time.
        """
        limits = {"prefix": prefix, "length": len(prefix), "limit": count + 1}
        query = Query("scan_keys", {**limits, "after": cursor or ""}, ROWS)
        rows = await self._run("scan_keys", OneStep(query, list), write=False, about=prefix)
        keys = [str(row[0]) for row in rows][:count]
        return keys, keys[-1] if len(rows) > count else None

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


def _is_delete(op: StoreOp) -> bool:
    return isinstance(op, DeleteOp)
