"""What the SQL store knows of its drivers: their errors, SQLite's busy file, SQLite's pragmas,
aiosqlite's thread.

A driver error is any of :data:`DRIVER_ERRORS` (SQLAlchemy's, sqlite3's, asyncpg's when it is
installed, and the socket layer's). SQLite refuses a statement with ``SQLITE_BUSY`` when another
connection holds the file's lock longer than its busy timeout; :func:`while_busy` tries such a
call again within its time bound, and :func:`install_sqlite_pragmas` gives every new SQLite
connection the busy timeout and WAL mode. :func:`install_sqlite_connect` opens aiosqlite's
connections so that one that could not be opened leaves no thread behind.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sqlite3
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "DRIVER_ERRORS",
    "install_sqlite_connect",
    "install_sqlite_pragmas",
    "lock_wait_ran_out",
    "while_busy",
]

_T = TypeVar("_T")


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


DRIVER_ERRORS: Final = _driver_errors()
"""The exceptions that mean the database (or the way to it) failed."""

_SQLITE_BUSY: Final = 5  # SQLite's result code for "database is locked"

# Pause between attempts at a call while another connection holds an SQLite file's lock.
_BUSY_RETRY_SECONDS: Final = 0.02


def lock_wait_ran_out(exc: BaseException) -> bool:
    """Whether SQLite gave up waiting for a lock (``SQLITE_BUSY``: its busy timeout ran out)."""
    error = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return bool(code & 0xFF == _SQLITE_BUSY)  # extended codes keep it in the low byte
    return str(error).startswith("database is locked")


async def while_busy(attempt: Callable[[], Awaitable[_T]], *, deadline: float) -> _T:
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
        except DRIVER_ERRORS as exc:
            if not lock_wait_ran_out(exc) or loop.time() + _BUSY_RETRY_SECONDS >= deadline:
                raise
        await asyncio.sleep(_BUSY_RETRY_SECONDS)


# Sync engines that already carry the SQLite connect hook, so stores sharing one engine add it once.
_PRAGMA_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def install_sqlite_pragmas(engine: AsyncEngine, busy_timeout: float) -> None:
    """Put every new SQLite connection in WAL mode with a busy timeout.

    WAL lets readers proceed while one connection writes, and the busy timeout makes a writer
    wait for the file lock instead of failing at once with "database is locked" when another
    connection (or another process) is writing.

    The pragmas after the busy timeout read the file, which another connection may hold locked
    (switching a fresh file to WAL even needs its write lock). A connection opened then is kept
    all the same, and tries them again each time it is taken out of the pool until they pass:
    its statements wait for the lock as any do. Refusing the connection instead would drop it
    in the middle of a call that waits for the lock, once per attempt; and a call given up on
    at its time bound while aiosqlite closes such a connection can leave the close waiting
    forever, hanging the program's event loop when it shuts down.
    """
    sync_engine = engine.sync_engine
    if sync_engine in _PRAGMA_ENGINES:
        return
    busy_ms = max(1, round(busy_timeout * 1000))

    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            # First, and it reads nothing: the statements after it wait for a locked file.
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
        finally:
            cursor.close()
        _file_pragmas(dbapi_connection, connection_record)

    def on_checkout(dbapi_connection: Any, connection_record: Any, proxy: Any) -> None:
        if connection_record.info.get(_PRAGMAS_PENDING):
            _file_pragmas(dbapi_connection, connection_record)

    event.listen(sync_engine, "connect", on_connect)
    event.listen(sync_engine, "checkout", on_checkout)
    _PRAGMA_ENGINES.add(sync_engine)


# Set in a pooled connection's info while its file pragmas have not passed yet.
_PRAGMAS_PENDING: Final = "slimcache_pragmas_pending"


def _file_pragmas(dbapi_connection: Any, connection_record: Any) -> None:
    """Switch the connection's file to WAL and its syncing to NORMAL, or mark the connection
    to try again when it is next taken out of the pool if the file is locked."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode = WAL")
        # Durable across application crashes in WAL mode, and much faster than FULL.
        cursor.execute("PRAGMA synchronous = NORMAL")
    except Exception as exc:
        if not lock_wait_ran_out(exc):
            raise
        connection_record.info[_PRAGMAS_PENDING] = True
    else:
        connection_record.info.pop(_PRAGMAS_PENDING, None)
    finally:
        cursor.close()


def install_sqlite_connect(engine: AsyncEngine) -> None:
    """Open the engine's aiosqlite connections so that one that fails leaves no thread running.

    aiosqlite runs each connection on a thread of its own. When the connection cannot be opened
    (a folder that does not exist, a path that is a folder), aiosqlite raises the error and
    asks the thread to stop without waiting for it: the thread then hands the stop's outcome to
    the event loop. A program whose loop closes in the meantime (``asyncio.run`` returning with
    the error) would get two ``RuntimeError: Event loop is closed`` tracebacks from that
    thread, in some runs, besides its own message. A connect that fails here waits for the
    thread to end before it raises.

    An engine made with its own ``creator`` or ``async_creator`` opens its connections its own
    way, and is left to it.
    """
    sync_engine = engine.sync_engine
    if not event.contains(sync_engine, "do_connect", _connect_through_aiosqlite):
        event.listen(sync_engine, "do_connect", _connect_through_aiosqlite)


# How often a failed connect looks whether aiosqlite's thread has ended (it ends at once).
_THREAD_POLL_SECONDS: Final = 0.001


def _connect_through_aiosqlite(
    dialect: Any, connection_record: Any, cargs: list[Any], cparams: dict[str, Any]
) -> None:
    # SQLAlchemy's aiosqlite dialect opens the connection with the function it is given here
    # (its async_creator_fn), on the URL's arguments; returning None lets it go on.
    cparams.setdefault("async_creator_fn", _open_aiosqlite)


def _open_aiosqlite(*args: Any, **kwargs: Any) -> Awaitable[Any]:
    aiosqlite = importlib.import_module("aiosqlite")
    connection = aiosqlite.connect(*args, **kwargs)
    # The connection is its thread before aiosqlite 0.22, and holds it since.
    thread = connection if isinstance(connection, threading.Thread) else connection._thread
    thread.daemon = True  # as SQLAlchemy's own connect does: it never keeps the program alive
    return _opened(connection, thread)


async def _opened(connection: Any, thread: threading.Thread) -> Any:
    """``connection`` once open; or, when it could not be opened, its error once the
    connection's thread has handed the loop its last outcome and ended."""
    try:
        return await connection
    except BaseException:
        # A thread's end is nothing to await; a thread of the executor waiting on join() for
        # it could itself hold up the loop's shutdown, where looking again gives way to a
        # cancellation.
        while thread.is_alive():  # noqa: ASYNC110
            await asyncio.sleep(_THREAD_POLL_SECONDS)
        raise
