"""Calling slimcache from code that cannot await: Flask, Django, sync agents, scripts.

Every front door is async, and a store's connections belong to the event loop that opened them.
Calling ``asyncio.run(compressor.compress(...))`` per request makes a new loop each time, so the
second request finds the store's connections tied to a loop that is closed ("Event loop is
closed"). :func:`run` instead hands the call to one event loop that slimcache keeps running in a
background thread, waits for it, and returns its result::

    from slimcache.sync import run

    messages = run(compressor.compress(history, thread_id="chat-42"))

It works with every front door and every method (``run(memory.load("t"))``,
``run(summarize(messages, thread_id="t"))``, ``run(clear_thread(store, "t"))``), with every
store, and from any number of threads at once: all of them run on the one loop, so the store's
connections, leases and single flight behave as in an async server. The caller's context
variables (logging, tracing) travel with each call, as with :func:`asyncio.to_thread`.

:class:`Runner` is that loop as an object, for code that wants to choose when it stops (tests,
a worker shutting down); :func:`run` uses one shared by the whole process, started on first use
and stopped at exit. A child process made by ``fork`` starts a loop of its own on first use.
Summaries a compressor with ``refresh="background"`` extends after answering go on on that loop
once :func:`run` has returned; :func:`drain` waits for them.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import inspect
import logging
import os
import threading
import weakref
from collections.abc import Awaitable, Coroutine
from types import TracebackType
from typing import Any, Generic, TypeVar

from slimcache.core.background import refreshes

__all__ = ["Runner", "default_runner", "drain", "run"]

T = TypeVar("T")

logger = logging.getLogger("slimcache")

# How long close() waits for the loop's thread to finish its clean-up.
_CLOSE_TIMEOUT = 10.0


class Runner:
    """An event loop in a background thread that runs coroutines for synchronous code.

    The loop and its thread start on the first call; store connections opened by the
    coroutines it runs stay on that loop for as long as the runner lives. Any thread may call
    :meth:`run` at any time, concurrently.

    Use it as a context manager, or call :meth:`close`, to stop it. Close the stores used
    through it first (``runner.run(store.aclose())``): they cannot be used once their loop is
    gone.

    Args:
        name: The name of the loop's thread, as shown in thread dumps.
    """

    def __init__(self, *, name: str = "slimcache-sync") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._closed = False
        # Stores to close on the loop before it goes (see close_with), while they live.
        self._to_close: weakref.WeakSet[Any] = weakref.WeakSet()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the runner's loop and return its result, or raise its error.

        Args:
            awaitable: What to run, typically a coroutine such as
                ``compressor.compress(history, thread_id="t")``.

        Returns:
            What the awaitable returns.

        Raises:
            TypeError: ``awaitable`` is not awaitable (a method not yet called, say).
            RuntimeError: The runner is closed, or ``run`` was called from a coroutine that
                this runner itself is running (it would wait for itself forever: await
                instead).
        """
        if self._thread is not None and threading.get_ident() == self._thread.ident:
            _discard(awaitable)
            raise RuntimeError(
                "slimcache.sync: run() was called from inside a coroutine this runner is "
                "running, which would wait for itself; await the call instead"
            )
        job = self._schedule(awaitable)
        try:
            return job.future.result()
        except BaseException:
            # Interrupted (Ctrl-C): make sure nothing keeps running for nobody.
            if not job.future.done():
                job.cancel()
            raise

    def submit(self, awaitable: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Start ``awaitable`` on the runner's loop; return a future for its result.

        From async code on another loop, ``await asyncio.wrap_future(runner.submit(...))``
        waits without blocking that loop.

        Raises:
            TypeError: ``awaitable`` is not awaitable.
            RuntimeError: The runner is closed.
        """
        return self._schedule(awaitable).future

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until the background refreshes of compressors with ``refresh="background"``
        have ended (see :mod:`slimcache.background`): the ones calls run here started go on
        on this runner's loop after the call returned.

        Args:
            timeout: Seconds to wait at most; ``None``: as long as they take.

        Returns:
            Whether they all ended (``False``: the time ran out first; they go on).

        Raises:
            RuntimeError: The runner is closed.
        """
        return self.run(refreshes.drain(timeout))

    def close_with(self, store: object) -> None:
        """Have :meth:`close` close ``store`` (its ``aclose()``) on this loop, if it is still
        open by then, before the loop goes.

        For a store a front door opened from a URL and uses through this runner: one the
        application never closes (a middleware made once, at start-up) is then closed at exit
        rather than left with its connections open. Only a reference that lets ``store`` be
        garbage-collected is kept; :meth:`forget` takes it back once the store is closed.
        """
        try:
            self._to_close.add(store)
        except TypeError:  # a store that cannot be referred to weakly (or hashed) stays as is
            return

    def forget(self, store: object) -> None:
        """Take back :meth:`close_with` (the store was closed by its owner)."""
        try:
            self._to_close.discard(store)
        except TypeError:
            return

    def close(self) -> None:
        """Cancel what is still running, close the stores given to :meth:`close_with`, stop the
        loop and its thread, and close the loop.

        Background refreshes still running are cancelled too, leaving the cache as it was:
        :meth:`drain` first to let them end. Calling it again does nothing. Calls made
        afterwards raise :class:`RuntimeError`.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            stores = list(self._to_close)
            self._to_close = weakref.WeakSet()
        if loop is None or thread is None or self._pid != os.getpid():
            return
        if thread.is_alive():
            asyncio.run_coroutine_threadsafe(_wind_down(stores), loop)
            thread.join(_CLOSE_TIMEOUT)
        if not thread.is_alive():
            loop.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._thread else "idle"
        return f"<Runner {self._name!r} {state}>"

    # ------------------------------------------------------------------ internals

    def _schedule(self, awaitable: Awaitable[T]) -> _Job[T]:
        if not inspect.isawaitable(awaitable):
            raise TypeError(
                f"slimcache.sync needs an awaitable, such as compressor.compress(...), got "
                f"{type(awaitable).__name__}" + (": call it first" if callable(awaitable) else "")
            )
        context = contextvars.copy_context()
        with self._lock:
            if self._closed:
                _discard(awaitable)
                raise RuntimeError("slimcache.sync: this runner is closed")
            loop = self._started()
            job: _Job[T] = _Job(loop)
            loop.call_soon_threadsafe(job.start, _as_coroutine(awaitable), context)
        return job

    def _started(self) -> asyncio.AbstractEventLoop:
        """The running loop, started now if need be (called with the lock held)."""
        if self._pid != os.getpid():
            # A forked child: the parent's thread does not exist here. Start afresh.
            self._loop = self._thread = None
            self._pid = os.getpid()
        if self._loop is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(
                target=_serve, args=(loop, ready), name=self._name, daemon=True
            )
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
        return self._loop


class _Job(Generic[T]):
    """One call handed to the runner: the caller's future and, once started, the task."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._loop = loop
        self._task: asyncio.Task[T] | None = None

    def start(self, coroutine: Coroutine[Any, Any, T], context: contextvars.Context) -> None:
        """On the loop: start the coroutine as a task in the caller's context."""
        if not self.future.set_running_or_notify_cancel():
            coroutine.close()
            return
        # A task copies the context current when it is made: the caller's, inside run().
        task = context.run(self._loop.create_task, coroutine)
        task.add_done_callback(self._settle)
        self._task = task

    def _settle(self, task: asyncio.Task[T]) -> None:
        if task.cancelled():
            self.future.set_exception(concurrent.futures.CancelledError())
        elif (error := task.exception()) is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(task.result())

    def cancel(self) -> bool:
        """Cancel the task from any thread (a job not yet started is cancelled at its start)."""
        if self.future.cancel():
            return True
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._cancel_task)
        return False

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


async def _wind_down(stores: list[Any]) -> None:
    """On the loop, at close: cancel what runs, close ``stores``, finish generators and the
    executor, stop."""
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks(loop) if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for store in stores:
        try:
            await store.aclose()
        except Exception:  # one store's failure to close must not keep the others open
            logger.warning("slimcache.sync: closing %r at shutdown failed", store, exc_info=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
    loop.call_soon(loop.stop)


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _as_coroutine(awaitable: Awaitable[T]) -> Coroutine[Any, Any, T]:
    return awaitable if inspect.iscoroutine(awaitable) else _await(awaitable)


def _discard(awaitable: object) -> None:
    # A coroutine refused is closed, so that Python does not warn it was never awaited.
    if inspect.iscoroutine(awaitable):
        awaitable.close()


_default: Runner | None = None
_default_lock = threading.Lock()


def default_runner() -> Runner:
    """The runner :func:`run` uses: one per process, started on first use, closed at exit."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Runner()
        return _default


def run(awaitable: Awaitable[T]) -> T:
    """Run a slimcache call from synchronous code and return its result.

    The call runs on the process's :func:`default_runner`, an event loop slimcache keeps in a
    background thread, so stores keep their connections from one call to the next, and any
    number of threads may call at once::

        messages = run(compressor.compress(history, thread_id="chat-42"))

    Args:
        awaitable: The call, typically a coroutine such as
            ``compressor.compress(history, thread_id="t")``.

    Returns:
        What the call returns; what it raises is raised here.

    Raises:
        TypeError: ``awaitable`` is not awaitable (a method not yet called, say).
        RuntimeError: Called from a coroutine that the runner itself runs: await instead.
    """
    return default_runner().run(awaitable)


def drain(timeout: float | None = None) -> bool:
    """Wait until the background refreshes of compressors with ``refresh="background"`` have
    ended, from synchronous code: those started by calls that :func:`run` ran go on on its
    loop after each call returned (see :mod:`slimcache.background`)::

        run(compressor.compress(history, thread_id="chat-42"))
        drain(timeout=10)  # at shutdown, or in a test

    At exit the process's runner is closed, cancelling the refreshes still running: the
    thread's next request does their work.

    Args:
        timeout: Seconds to wait at most; ``None``: as long as they take.

    Returns:
        Whether they all ended (``False``: the time ran out first; they go on).
    """
    return default_runner().drain(timeout)


@atexit.register
def _close_default() -> None:
    with _default_lock:
        runner = _default
    if runner is not None:
        runner.close()
