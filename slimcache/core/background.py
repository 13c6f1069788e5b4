"""Background refreshes: summaries extended after the request that needed them was answered.

A compressor with ``refresh="background"`` answers a request with the summary the store has and
offers the extension to :data:`refreshes`, the process's one :class:`BackgroundRefreshes`. It
runs at most ``max_running`` refreshes at once and keeps at most ``max_queued`` waiting for a
turn; one offered beyond that is dropped (and counted): the thread's next request offers it
again. A thread has at most one refresh in this process, per store: one offered while another
waits for its turn takes its place (it has the newer messages), one offered while another runs
is left out (that one is doing the work). Across processes the thread's lease does the same.

Each refresh runs as a task on the event loop of the request that offered it, in that request's
context (its context variables, as a task made there would have), and is referenced here until
it ends, so it outlives the request. :meth:`BackgroundRefreshes.drain` waits for every refresh
to end, for a server's shutdown or a test; :meth:`BackgroundRefreshes.cancel` cancels them. A
refresh cancelled, or lost with its process, leaves the cache as it was, and the thread's next
request does the work. The public face is :mod:`slimcache.background`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass
from typing import Any, Literal

from slimcache._exceptions import ConfigurationError

__all__ = [
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_RUNNING",
    "BackgroundRefreshes",
    "BackgroundStatus",
    "Offered",
    "refreshes",
]

logger = logging.getLogger("slimcache")

DEFAULT_MAX_RUNNING = 8
"""Background refreshes a process runs at once, by default."""

DEFAULT_MAX_QUEUED = 256
"""Background refreshes a process keeps waiting for a turn, by default."""

Offered = Literal["started", "queued", "replaced", "running", "dropped"]
"""What became of an offered refresh: ``started`` now; ``queued`` for a turn; ``replaced`` the
one of the same thread waiting for its turn; left out because one of the same thread is
``running``; ``dropped`` because the queue is full."""

Refresh = Callable[[], Coroutine[Any, Any, bool]]
"""Makes the refresh's coroutine, which returns whether it succeeded (it counts and logs its
own failures)."""


@dataclass(frozen=True)
class BackgroundStatus:
    """The process's background refreshes at one moment, and what became of those before.

    Attributes:
        running: Refreshes running now.
        queued: Refreshes waiting for a turn.
        max_running: The most that run at once.
        max_queued: The most that wait.
        started: Refreshes accepted (started at once or queued) since the process started.
        finished: Refreshes that ended well.
        failed: Refreshes that failed (the cache left as it was).
        cancelled: Refreshes cancelled, or lost with their event loop, before they ended.
        dropped: Refreshes not accepted because the queue was full.
    """

    running: int
    queued: int
    max_running: int
    max_queued: int
    started: int
    finished: int
    failed: int
    cancelled: int
    dropped: int

    @property
    def pending(self) -> int:
        """Refreshes that have not ended: running or queued."""
        return self.running + self.queued


class _Job:
    """One refresh: what makes it, where and in which context it runs, and its task."""

    __slots__ = ("context", "key", "loop", "make", "task")

    def __init__(
        self,
        key: Hashable,
        make: Refresh,
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
    ) -> None:
        self.key = key
        self.make = make
        self.loop = loop
        self.context = context
        self.task: asyncio.Task[bool] | None = None


class BackgroundRefreshes:
    """The process's background refreshes: bounded, one per thread, referenced, drainable.

    Any thread's event loop may offer refreshes; each runs on the loop that offered it. See
    the module docstring.

    Args:
        max_running: The most refreshes that run at once.
        max_queued: The most refreshes that wait for a turn (0: none wait; a refresh offered
            when all run is dropped).

    Raises:
        ConfigurationError: A bound that is not a whole number (``max_running`` at least 1,
            ``max_queued`` at least 0).
    """

    def __init__(
        self, max_running: int = DEFAULT_MAX_RUNNING, max_queued: int = DEFAULT_MAX_QUEUED
    ) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, _Job] = {}
        self._queued: OrderedDict[Hashable, _Job] = OrderedDict()
        self._idle: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._counts = dict.fromkeys(("started", "finished", "failed", "cancelled", "dropped"), 0)
        self.max_running = self.max_queued = 0
        self.configure(max_running=max_running, max_queued=max_queued)

    def configure(self, *, max_running: int | None = None, max_queued: int | None = None) -> None:
        """Change the bounds; ``None`` keeps one as it is. Refreshes already running go on.

        Raises:
            ConfigurationError: A bound that is not a whole number (``max_running`` at least
                1, ``max_queued`` at least 0).
        """
        for name, value, least in (("max_running", max_running, 1), ("max_queued", max_queued, 0)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < least
            ):
                raise ConfigurationError(
                    f"{name} must be a whole number of at least {least}, got {value!r}"
                )
        with self._lock:
            if max_running is not None:
                self.max_running = max_running
            if max_queued is not None:
                self.max_queued = max_queued
            starting = self._take_turns()
        self._start_all(starting)

    def offer(self, key: Hashable, make: Refresh) -> Offered:
        """Run ``make()``'s coroutine in the background, on the running loop, in the current
        context: now, or once a running refresh ends.

        Args:
            key: The thread (with its store): one refresh per key at a time.
            make: Makes the coroutine; called when the refresh starts.

        Returns:
            What became of it (see :data:`Offered`).
        """
        job = _Job(key, make, asyncio.get_running_loop(), contextvars.copy_context())
        with self._lock:
            self._forget_closed_loops()
            if key in self._running:
                return "running"
            if key in self._queued:
                self._queued[key] = job  # the newer request's messages: it keeps its place
                return "replaced"
            if len(self._running) < self.max_running:
                self._running[key] = job
                self._counts["started"] += 1
                offered: Offered = "started"
            elif len(self._queued) < self.max_queued:
                self._queued[key] = job
                self._counts["started"] += 1
                return "queued"
            else:
                self._counts["dropped"] += 1
                return "dropped"
        self._start(job)
        return offered

    def status(self) -> BackgroundStatus:
        """The refreshes now, and the counts so far."""
        with self._lock:
            self._forget_closed_loops()
            return BackgroundStatus(
                running=len(self._running),
                queued=len(self._queued),
                max_running=self.max_running,
                max_queued=self.max_queued,
                **self._counts,
            )

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until no refresh runs or waits, those offered meanwhile included.

        Refreshes on other event loops are waited for too; their loops must be running.

        Args:
            timeout: Seconds to wait at most; ``None``: as long as it takes.

        Returns:
            Whether every refresh ended (``False``: the time ran out first).
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_closed_loops()
            if not self._running and not self._queued:
                return True
            idle: asyncio.Future[None] = loop.create_future()
            self._idle.append((loop, idle))
        try:
            await asyncio.wait_for(idle, timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def cancel(self) -> int:
        """Cancel every refresh, running or queued; the cache is left as it was for each.

        The running ones end at their next step on their own loops: ``await drain()``
        afterwards waits for them.

        Returns:
            How many were cancelled.
        """
        with self._lock:
            queued = list(self._queued.values())
            self._queued.clear()
            self._counts["cancelled"] += len(queued)
            running = list(self._running.values())
            for job in running:
                if job.task is None:  # handed to its loop, not started yet: it never will be
                    del self._running[job.key]
                    self._counts["cancelled"] += 1
            self._notify_if_idle()
        for job in running:
            if job.task is not None:
                # A closed loop runs nothing any more: there is nothing to cancel there.
                with contextlib.suppress(RuntimeError):
                    job.loop.call_soon_threadsafe(job.task.cancel)
        return len(queued) + len(running)

    # ------------------------------------------------------------------ internals

    def _start(self, job: _Job) -> None:
        """Start ``job`` on its loop: from that loop's thread, or handed to it."""
        try:
            running_loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running_loop = None
        if running_loop is job.loop:
            self._create_task(job)
            return
        try:
            job.loop.call_soon_threadsafe(self._create_task, job)
        except RuntimeError:  # its loop closed while it waited
            self._ended(job, "cancelled")

    def _start_all(self, jobs: list[_Job]) -> None:
        for job in jobs:
            self._start(job)

    def _create_task(self, job: _Job) -> None:
        with self._lock:
            if self._running.get(job.key) is not job:
                return  # cancelled before it started
            # A task copies the context current when it is made: the offering request's.
            task = job.context.run(job.loop.create_task, job.make())
            job.task = task
        task.add_done_callback(lambda done: self._ended(job, _how_it_ended(done)))

    def _ended(self, job: _Job, how: str) -> None:
        with self._lock:
            if self._running.get(job.key) is job:
                del self._running[job.key]
            self._counts[how] += 1
            starting = self._take_turns()
            self._notify_if_idle()
        self._start_all(starting)

    def _take_turns(self) -> list[_Job]:
        """Move queued refreshes to the free places (called with the lock held)."""
        starting: list[_Job] = []
        while self._queued and len(self._running) < self.max_running:
            key, job = self._queued.popitem(last=False)
            if job.loop.is_closed():
                self._counts["cancelled"] += 1
                continue
            self._running[key] = job
            starting.append(job)
        return starting

    def _forget_closed_loops(self) -> None:
        """Count the refreshes of loops closed without running them to their end as cancelled
        (called with the lock held): they will never end otherwise."""
        for jobs in (self._running, self._queued):
            for key in [key for key, job in jobs.items() if job.loop.is_closed()]:
                del jobs[key]
                self._counts["cancelled"] += 1
        self._notify_if_idle()

    def _notify_if_idle(self) -> None:
        """Wake the drains waiting, if nothing runs or waits (called with the lock held)."""
        if self._running or self._queued or not self._idle:
            return
        for loop, idle in self._idle:
            with contextlib.suppress(RuntimeError):  # that drain's loop is gone
                loop.call_soon_threadsafe(_settle, idle)
        self._idle.clear()


def _settle(idle: asyncio.Future[None]) -> None:
    if not idle.done():
        idle.set_result(None)


def _how_it_ended(task: asyncio.Task[bool]) -> str:
    if task.cancelled():
        return "cancelled"
    error = task.exception()
    if error is not None:
        # The refresh counts and logs the failures it expects; this one it did not.
        logger.error("a background refresh failed", exc_info=error)
        return "failed"
    return "finished" if task.result() else "failed"


refreshes = BackgroundRefreshes()
"""The process's background refreshes, which every compressor with ``refresh="background"``
offers its refreshes to. Live state, never cleared (see :mod:`slimcache._process`)."""
