"""How a call of the SQL store reaches its database, and its attempts there.

A call's work (the steps of :mod:`slimcache_sql._statements`) runs on a connection the store
keeps, straight through the driver (see :mod:`slimcache_sql._kept`), or, when none is free,
through the engine's pool, in a committed transaction when it writes. Each attempt takes the
steps afresh, so that a call SQLite refused for a busy file can be tried again
(:func:`~slimcache_sql._driver.while_busy`); a call through the pool creates the table first if
needed. Driver errors are translated into :class:`slimcache.StoreError` here, inside the call's
time bound, so that the bound's own ``TimeoutError`` is never mistaken for a driver's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.schema import CreateTable
from sqlalchemy.util import greenlet_spawn

from slimcache import StoreError, StoreTimeout
from slimcache.stores import store_error
from slimcache_sql._driver import DRIVER_ERRORS, lock_wait_ran_out, while_busy
from slimcache_sql._kept import KeptConnection, KeptConnections
from slimcache_sql._statements import (
    ROWS,
    VALUE,
    DriverSQL,
    OneStep,
    Statements,
    Steps,
    Work,
    steps_of,
)

__all__ = ["About", "Attempts", "describe_key"]

_T = TypeVar("_T")

About: TypeAlias = str | Callable[[], str]
"""What a call is about besides a key, for its error message (a function: put into words only
when the call fails)."""


def describe_key(key: object) -> str:
    """A key as error messages show it: its ``repr``, cut to 80 characters."""
    shown = repr(key)
    return shown if len(shown) <= 80 else shown[:77] + "..."


class Attempts:
    """The attempts at each call's work of one store, on its kept connections or its engine.

    Args:
        engine: The store's engine.
        table: The table of the entries, created on first use through the pool.
        statements: The store's statements.
        kept: The connections the store keeps.
        timeout: The bound on each call, in seconds.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        table: Table,
        statements: Statements,
        *,
        kept: KeptConnections,
        timeout: float,
    ) -> None:
        self._engine = engine
        self._table = table
        self._sqlite = engine.dialect.name == "sqlite"
        self._by_name = statements.by_name()
        self._sql = DriverSQL(statements, engine.dialect)
        self._kept = kept
        self._timeout = timeout
        self._ready = False
        self._setup_lock = asyncio.Lock()

    def what(self, key: str | None, about: About) -> str:
        """Describe what a call was about, for its error message."""
        if key is not None:
            target = f"key {describe_key(key)}"
        else:
            target = about if isinstance(about, str) else about()
        table = self._table.name
        return f"{target} in table {table!r}" if target else f"table {table!r}"

    async def on_kept(
        self,
        operation: str,
        kept: KeptConnection,
        work: Work[_T],
        atomic: bool,
        key: str | None,
        about: About,
    ) -> _T:
        """Run a call on ``kept``, bounded in the caller's own task (Python 3.11+).

        A kept connection whose call is given up on is closed in the background, never
        waited on (see :meth:`KeptConnections.give_back`), so the call needs no task of its
        own.
        """
        kept.watch(self._timeout)
        try:
            if isinstance(work, OneStep) and not self._sqlite:
                # One statement on a connection that is never busy: nothing to drive or retry.
                text, parameters = self._sql.prepare(work.query)
                return work.finish(await kept.ask(work.query.answer, text, parameters))
            return await self._attempts_on(kept, work, atomic, kept.deadline)
        except DRIVER_ERRORS as exc:
            raise self._failure(operation, key, about, exc) from exc
        except asyncio.CancelledError as exc:
            if kept.unwatch():
                raise StoreTimeout(
                    f"SQLStore {operation} of {self.what(key, about)} failed: "
                    f"no answer within {self._timeout:g} s"
                ) from exc
            raise
        finally:
            kept.unwatch()
            self._kept.give_back(kept)

    async def attempt(
        self,
        operation: str,
        work: Work[_T],
        write: bool,
        atomic: bool,
        key: str | None,
        about: About,
        deadline: float,
        kept: KeptConnection | None,
    ) -> _T:
        """Run a call within a bound set around it: on ``kept``, on a connection opened to be
        kept, or through the pool (creating the table first if needed), until ``deadline``."""
        try:
            if kept is None and not self._ready:
                await self.ensure_table(deadline)
            if kept is None and self._kept.may_open():
                kept = await while_busy(self._kept.open, deadline=deadline)
            if kept is not None:
                try:
                    return await self._attempts_on(kept, work, atomic, deadline)
                finally:
                    self._kept.give_back(kept)
            return await while_busy(
                lambda: greenlet_spawn(self._in_connection, work, write), deadline=deadline
            )
        except DRIVER_ERRORS as exc:
            raise self._failure(operation, key, about, exc) from exc

    def _failure(
        self, operation: str, key: str | None, about: About, exc: BaseException
    ) -> StoreError:
        # SQLite gives up waiting for another connection's lock with "database is locked":
        # its busy timeout ran out, as much a timeout as the driver's own.
        timeouts = (type(exc),) if lock_wait_ran_out(exc) else ()
        return store_error(f"SQLStore {operation}", self.what(key, about), exc, timeouts=timeouts)

    def _attempts_on(
        self, kept: KeptConnection, work: Work[_T], atomic: bool, deadline: float
    ) -> Awaitable[_T]:
        """Attempts at ``work`` on ``kept``: again while SQLite is busy, until ``deadline``.

        The caller gives ``kept`` back afterwards (it is closed unless it is clean).
        """
        if not self._sqlite:  # only SQLite is ever busy
            return self._kept_attempt(kept, steps_of(work), atomic)
        return while_busy(
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

    # -- the table -----------------------------------------------------------------------------

    async def ensure_table(self, deadline: float) -> None:
        """Create the table if this store has not made sure it exists yet."""
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
            await while_busy(self._create, deadline=deadline)
        except SQLAlchemyError as exc:
            if lock_wait_ran_out(exc):
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
