"""Connections a store keeps for itself, driven through their driver (asyncpg or aiosqlite).

SQLAlchemy's asyncio layer costs several times the driver's own round trip on a one-row read:
a pool checkout and a reset on return, a ``BEGIN`` and a ``ROLLBACK`` around the statement on
PostgreSQL, a greenlet, and on SQLite five trips to aiosqlite's thread where one does. A store
therefore takes connections out of its engine's pool (opened with the engine's URL, options
and connect hooks), puts them in autocommit mode, and runs its calls on them straight through
the driver: a read or a one-statement write is one driver call, a batch of writes is wrapped
in ``BEGIN`` and ``COMMIT``. The statements are the ones SQLAlchemy compiles
(:class:`slimcache_sql._statements.DriverSQL`), so expiry stays on the database's clock.

A connection is kept only while it is known to be clean: when a call is given up on in the
middle of a driver call (its time bound, a caller's cancellation, a lost connection), the
connection is closed in the background, never waited on, and a later call opens another. A
statement the database refused (a locked SQLite file, a value PostgreSQL rejects) leaves it
clean.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool, QueuePool
from sqlalchemy.util import greenlet_spawn

from slimcache_sql._statements import COUNT, ROWS, VALUE, Answer

__all__ = ["KeptConnection", "KeptConnections"]

logger = logging.getLogger("slimcache")


class KeptConnection:
    """One connection of the store's own, serving one call at a time.

    Attributes:
        driver: The driver's connection (``asyncpg.Connection`` or ``aiosqlite.Connection``).
        loop: The event loop the connection belongs to.
        in_call: A driver call was started and has not answered: the connection's state is
            unknown, and it must not be used again.
        refusal: The driver's error for a statement the database refused.
        deadline: When the call being watched runs out of time (loop time).
    """

    # Opens a transaction that will write.
    begin_write: ClassVar[str] = "BEGIN"

    def __init__(
        self,
        driver: Any,
        loop: asyncio.AbstractEventLoop,
        *,
        refusal: type[Exception],
        hide_parameters: bool,
        timeout: float,
    ) -> None:
        self.driver = driver
        self.loop = loop
        self.in_call = False
        self.refusal = refusal
        self._hide_parameters = hide_parameters
        self._timeout = timeout  # for closing
        # The call being watched (see watch): its task, and whether it ran out of time.
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self.deadline = 0.0
        self._ran_out = False
        self._timer: asyncio.TimerHandle | None = None

    # -- the time bound of a call --------------------------------------------------------------

    def watch(self, seconds: float) -> None:
        """Bound the call starting now, in the running task, to ``seconds`` (Python 3.11+).

        The connection serves one call at a time, so one timer serves them all: it waits for
        the deadline of the call running when it was set, and when it fires, cancels the
        call running then if that call is past its own deadline, or waits again for it. A
        stream of short calls sets the timer about once per ``seconds``, not once per call
        (``asyncio.timeout`` sets and cancels one per call, which costs more than a read).
        """
        task = asyncio.current_task()
        assert task is not None  # a coroutine awaited by a task
        self._task = task
        if sys.version_info >= (3, 11):
            self._cancelling = task.cancelling()
        self.deadline = self.loop.time() + seconds
        self._ran_out = False
        if self._timer is None:
            self._timer = self.loop.call_at(self.deadline, self._check)

    def unwatch(self) -> bool:
        """End the bound of the call; return whether the call ran out of time.

        A call that ran out was cancelled by the bound: that cancellation is taken back, as
        ``asyncio.timeout`` does, unless the caller cancelled the task too.
        """
        task, self._task = self._task, None
        if not self._ran_out or task is None:
            return False
        if sys.version_info >= (3, 11):
            return task.uncancel() <= self._cancelling
        return True  # not reached: calls are bounded this way on Python 3.11+ only

    def _check(self) -> None:
        self._timer = None
        if self._task is None:
            return  # idle: the next call sets the timer again
        if self.loop.time() < self.deadline:
            self._timer = self.loop.call_at(self.deadline, self._check)
            return
        self._ran_out = True
        self._task.cancel()

    # -- statements ----------------------------------------------------------------------------

    async def ask(self, answer: Answer, sql: str, parameters: Sequence[Any]) -> Any:
        """Run ``sql`` and return the answer wanted.

        Raises:
            sqlalchemy.exc.DBAPIError: The database refused the statement (the driver's error
                is its ``orig``, as when SQLAlchemy runs it).
        """
        raise NotImplementedError

    async def command(self, sql: str) -> None:
        """Run a statement without parameters (``BEGIN``, ``COMMIT``, ``ROLLBACK``)."""
        await self.ask(COUNT, sql, ())

    def _refused(self, sql: str, parameters: Sequence[Any], exc: Exception) -> StatementError:
        """The database refused a statement (the driver's ``refusal``), wrapped as SQLAlchemy
        wraps it when it runs the statement.

        Unless the refusal also ends the connection (:meth:`_still_open_after`), the
        connection answered and is still usable.
        """
        if self._still_open_after(exc):
            self.in_call = False
        return DBAPIError.instance(
            sql, parameters, exc, self.refusal, hide_parameters=self._hide_parameters
        )

    def _still_open_after(self, refusal: Exception) -> bool:
        return True

    # -- state and lifetime --------------------------------------------------------------------

    def usable(self) -> bool:
        """Whether the connection may serve another call: open, answered, no transaction."""
        return not self.in_call and self._idle()

    def in_transaction(self) -> bool:
        """Whether a transaction is open on the connection."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the connection, letting the database know, within the store's timeout.

        Raises:
            Exception: The driver's, when it could not close the connection politely (it
                lets go of it all the same).
        """
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await asyncio.wait_for(self._close(), self._timeout)

    def forget(self) -> None:
        """Let go of a connection whose event loop is closed (nothing can be awaited on it)."""

    def _idle(self) -> bool:
        raise NotImplementedError

    async def _close(self) -> None:
        raise NotImplementedError


class AsyncpgConnection(KeptConnection):
    """A kept asyncpg connection. asyncpg prepares each statement once per connection."""

    async def ask(self, answer: Answer, sql: str, parameters: Sequence[Any]) -> Any:
        driver = self.driver
        self.in_call = True
        try:
            if answer == VALUE:
                result = await driver.fetchval(sql, *parameters)
            elif answer == ROWS:
                result = await driver.fetch(sql, *parameters)
            else:
                # The command tag: "INSERT 0 1", "UPDATE 1", "DELETE 3", "BEGIN".
                tag: str = await driver.execute(sql, *parameters)
                last = tag.rpartition(" ")[2]
                result = int(last) if last.isdigit() else 0
        except self.refusal as exc:
            raise self._refused(sql, parameters, exc) from exc
        self.in_call = False
        return result

    def in_transaction(self) -> bool:
        return bool(self.driver.is_in_transaction())

    def _still_open_after(self, refusal: Exception) -> bool:
        # A statement's error leaves the session as it was; a FATAL one (the server shutting
        # down, the session terminated) ends it, and asyncpg learns of the closed socket
        # only later. Errors asyncpg makes itself (a lost connection) carry no severity.
        severity = getattr(refusal, "severity_en", None) or getattr(refusal, "severity", None)
        return severity == "ERROR"

    def _idle(self) -> bool:
        # A server that closed the connection (a restart, an idle timeout) is noticed here.
        return not self.driver.is_closed() and not self.driver.is_in_transaction()

    async def _close(self) -> None:
        # A statement given up on is cancelled first (asyncpg sends the server a cancel
        # request), so that it does not take effect later; asyncpg aborts the connection
        # itself when it cannot close it politely.
        await self.driver.close(timeout=self._timeout)


class AiosqliteConnection(KeptConnection):
    """A kept aiosqlite connection: each driver call is one trip to its thread.

    Its sqlite3 connection has ``isolation_level = None`` (autocommit): a write is one
    statement, a batch opens its own transaction.
    """

    # Take the write lock first: a batch that reads, then writes, never has to upgrade it.
    begin_write = "BEGIN IMMEDIATE"

    async def ask(self, answer: Answer, sql: str, parameters: Sequence[Any]) -> Any:
        driver = self.driver
        self.in_call = True
        try:
            if answer == COUNT:
                # The cursor is let go on this thread when this returns, while the
                # connection's own thread is idle (one call at a time): its statement is done.
                result = (await driver.execute(sql, parameters)).rowcount
            else:
                rows = await driver.execute_fetchall(sql, parameters)
                result = rows if answer == ROWS else (rows[0][0] if rows else None)
        except self.refusal as exc:
            raise self._refused(sql, parameters, exc) from exc
        self.in_call = False
        return result

    def in_transaction(self) -> bool:
        return bool(self.driver.in_transaction)

    def _idle(self) -> bool:
        return not self.driver.in_transaction

    async def _close(self) -> None:
        # The connection's thread may still be inside SQLite (waiting for a lock, for at most
        # the busy timeout): closing waits for it, and rolls back whatever was open.
        await self.driver.close()

    def forget(self) -> None:
        # Ends the connection's thread (aiosqlite 0.22+); before that, it ends with the process.
        stop = getattr(self.driver, "stop", None)
        if stop is not None:
            stop()


def _kept_limit(pool: Pool) -> int:
    """How many connections a store keeps besides an engine's ``pool``: the pool's size.

    A queue pool opens another connection in the place of one it lets go. A null pool keeps
    no connection open, and a static pool has one, which is the database (in-memory SQLite):
    a store on them keeps none.
    """
    return pool.size() if isinstance(pool, QueuePool) else 0


class KeptConnections:
    """The connections a store keeps for its calls, as many as its engine's pool holds.

    A call takes an idle one (:meth:`take`), or opens one when fewer are open (:meth:`open`),
    and gives it back (:meth:`give_back`), which keeps it if it is clean and closes it in the
    background otherwise; a call that finds them all in use goes through the pool. While
    SQLAlchemy is asked to see every statement (``echo``, or listeners of its cursor events,
    such as tracing), calls go through the engine instead.

    Args:
        engine: The store's engine.
        timeout: Seconds closing a connection may take (the store's ``timeout``).
        unwinding: Where closings in the background are kept until they finish (the store
            waits for them in ``aclose``).
    """

    def __init__(
        self, engine: AsyncEngine, *, timeout: float, unwinding: set[asyncio.Future[Any]]
    ) -> None:
        self._engine = engine.sync_engine
        self._dialect = engine.dialect.name
        self._limit = _kept_limit(self._engine.pool)
        self._timeout = timeout
        self._unwinding = unwinding
        self._idle: list[KeptConnection] = []
        self._open = 0  # idle, in use, or being opened
        self._closed = False

    def take(self) -> KeptConnection | None:
        """An idle connection of the running event loop, if there is one to use."""
        if not self._idle or self._engine_watched():
            return None
        kept = self._idle.pop()
        if kept.loop is asyncio.get_running_loop() and kept.usable():
            return kept
        self._drop(kept)
        return None

    def may_open(self) -> bool:
        """Whether a call should open a connection to keep (see :meth:`open`)."""
        return self._open < self._limit and not self._closed and not self._engine_watched()

    async def open(self) -> KeptConnection:
        """Take a connection out of the engine's pool, in autocommit mode, for the store.

        The pool opens it as it opens any (the engine's URL, options, connect hooks and
        checkout checks), then lets go of it, and opens another in its place when needed.
        """
        self._open += 1
        try:
            driver = await greenlet_spawn(self._detach)
        except BaseException:
            self._open -= 1
            raise
        loop = asyncio.get_running_loop()
        options: dict[str, Any] = {
            "hide_parameters": self._engine.hide_parameters,
            "timeout": self._timeout,
        }
        if self._dialect == "sqlite":
            return AiosqliteConnection(driver, loop, refusal=sqlite3.Error, **options)
        asyncpg = importlib.import_module("asyncpg")  # optional: the "postgres" extra
        return AsyncpgConnection(driver, loop, refusal=asyncpg.PostgresError, **options)

    def give_back(self, kept: KeptConnection) -> None:
        """Keep ``kept`` for the next call unless its call was stopped mid-statement (then it
        is closed); :meth:`take` checks the rest (a transaction left open, a closed socket)."""
        if not kept.in_call and not self._closed:
            self._idle.append(kept)
        else:
            self._drop(kept)

    async def aclose(self) -> None:
        """Close every idle connection; those in use are closed when given back."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        closed = await asyncio.gather(*(kept.close() for kept in idle), return_exceptions=True)
        for outcome in closed:
            if isinstance(outcome, BaseException):
                _closing_failed(outcome)

    def _detach(self) -> Any:
        # Runs inside greenlet_spawn: the pool's driver calls are awaited from here.
        dialect = self._engine.dialect
        try:
            pooled = self._engine.raw_connection()
        except dialect.loaded_dbapi.Error as exc:
            # Wrapped as Engine.connect wraps it (the pool leaves it as the driver raised it).
            raise DBAPIError.instance(
                None, None, exc, dialect.loaded_dbapi.Error, dialect=dialect
            ) from exc
        try:
            connection = pooled.dbapi_connection
            assert connection is not None  # a pool hands out open connections
            self._engine.dialect.set_isolation_level(connection, "AUTOCOMMIT")
            driver = pooled.driver_connection  # none once detached
        except BaseException:
            # Never hand a connection in autocommit mode back to the pool.
            pooled.invalidate()
            raise
        pooled.detach()
        return driver

    def _drop(self, kept: KeptConnection) -> None:
        self._open -= 1
        if kept.loop is asyncio.get_running_loop():
            task = _close_in_background(kept)
            self._unwinding.add(task)
            task.add_done_callback(self._unwinding.discard)
        elif kept.loop.is_closed():
            kept.forget()
        else:
            # A connection of another running event loop can only be closed on that loop.
            kept.loop.call_soon_threadsafe(_close_in_background, kept)

    def _engine_watched(self) -> bool:
        """Whether SQLAlchemy should see every statement: logged, or listened to."""
        dispatch = self._engine.dispatch
        return bool(
            dispatch.before_cursor_execute or dispatch.after_cursor_execute
        ) or self._engine.logger.isEnabledFor(logging.INFO)


def _close_in_background(kept: KeptConnection) -> asyncio.Future[None]:
    task = asyncio.ensure_future(kept.close())
    task.add_done_callback(_closed)
    return task


def _closed(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        _closing_failed(error)


def _closing_failed(error: BaseException) -> None:
    # The driver lets go of a connection it could not close politely all the same (a server
    # that is gone, or frozen past the timeout): nothing is left to do.
    logger.debug("a kept SQL connection could not be closed politely: %r", error)
