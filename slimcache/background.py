"""Summaries extended in the background: wait for them, bound them, stop them.

A compressor built with ``refresh="background"`` answers a request whose answer stays within its
``ceiling`` at once, with the summary the store has, and extends the summary afterwards, in a
task of the request's event loop that outlives the request. Those refreshes are the process's:
at most :data:`~slimcache.core.background.DEFAULT_MAX_RUNNING` run at once and
:data:`~slimcache.core.background.DEFAULT_MAX_QUEUED` wait (one offered beyond that is
dropped, and the thread's next request offers it again), and a thread has at most one::

    import slimcache.background

    await slimcache.background.drain(timeout=10)  # at shutdown, or in a test

A process that exits with refreshes pending loses only their work: nothing is cached until a
refresh has its summary, and the thread's next request offers the refresh again.
:func:`cancel` stops them at once; code run through :mod:`slimcache.sync` drains with
:func:`slimcache.sync.drain`.
"""

from __future__ import annotations

from slimcache.core.background import BackgroundStatus, refreshes

__all__ = ["BackgroundStatus", "cancel", "configure", "drain", "status"]


async def drain(timeout: float | None = None) -> bool:
    """Wait until no background refresh runs or waits, those started meanwhile included.

    Refreshes running on other event loops of the process (another thread's, or the one of
    :mod:`slimcache.sync`) are waited for too.

    Args:
        timeout: Seconds to wait at most; ``None``: as long as they take.

    Returns:
        Whether they all ended (``False``: the time ran out first; they go on).
    """
    return await refreshes.drain(timeout)


def cancel() -> int:
    """Cancel every background refresh, running or waiting. Each leaves the cache as it was
    (and releases its lease); the thread's next request offers it again.

    The running ones stop at their next step: ``await drain()`` afterwards waits until they
    have.

    Returns:
        How many were cancelled.
    """
    return refreshes.cancel()


def configure(*, max_running: int | None = None, max_queued: int | None = None) -> None:
    """Change how many background refreshes run at once and how many may wait.

    Args:
        max_running: The most that run at once (at least 1); ``None`` keeps it.
        max_queued: The most that wait for a turn (0: none wait); ``None`` keeps it.

    Raises:
        ConfigurationError: A bound that is not a whole number in range.
    """
    refreshes.configure(max_running=max_running, max_queued=max_queued)


def status() -> BackgroundStatus:
    """The refreshes running and waiting now, and the counts since the process started."""
    return refreshes.status()
