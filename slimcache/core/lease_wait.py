"""One read of a thread's index planned, and a worker's wait for its turn under the lease.

A request plans on what it read; a worker that finds the thread's lease held waits, reading
and planning again, until the work it wanted is done, the lease is free, or it gives up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from slimcache.core import recorder as reporting
from slimcache.core.lease import Lease
from slimcache.core.plan import (
    Decision,
    ExtendCached,
    History,
    IndexView,
    Rules,
    SummarizeAnew,
    decide,
    pick_base,
    read_index,
)
from slimcache.core.results import Stats
from slimcache.core.thread_cache import ThreadCache
from slimcache.stores.entries import RangeRef, SummaryEntry

__all__ = ["PlannedRead", "Replan", "due_range", "plan_read", "take_turn"]

logger = logging.getLogger("slimcache")


@dataclass(frozen=True)
class PlannedRead:
    """The planner's answer for one read of the index.

    Attributes:
        index_raw: The index as read (``None``: there was none).
        view: What the planner made of it.
        base: The cached range the decision builds on, if any.
        gone: Listed ranges found missing or unusable when read.
        decision: What to do.
    """

    index_raw: str | None
    view: IndexView
    base: SummaryEntry | None
    gone: frozenset[RangeRef]
    decision: Decision


Replan = Callable[[str | None], Awaitable[PlannedRead]]
"""Plans again on a fresh read of the index (its raw value)."""


def due_range(decision: Decision) -> RangeRef | None:
    """The range a decision wants summarized, or ``None``."""
    return decision.target if isinstance(decision, (ExtendCached, SummarizeAnew)) else None


async def plan_read(
    cache: ThreadCache, history: History, index_raw: str | None, rules: Rules, *, force: bool
) -> PlannedRead:
    """Run the planner on one read of the index, reading candidate ranges it asks for."""
    view = read_index(cache.parse_index(index_raw), history, rules)
    # Usually no candidates: the head is the longest range that matches. A request for an
    # earlier point of the thread needs the longest candidate, read unless known already.
    known = cache.known(view.candidates[0]) if view.candidates else None
    base: SummaryEntry | None
    if known is not None and rules.usable(known):
        base, gone = known, frozenset[RangeRef]()
    else:
        fetched: list[SummaryEntry | None] = []
        if view.candidates:
            fetched = await cache.read_ranges([(r.start, r.end) for r in view.candidates])
        base, gone = pick_base(view, fetched, rules)
    decision = decide(history, base, rules, force=force)
    return PlannedRead(index_raw, view, base, gone, decision)


async def take_turn(
    cache: ThreadCache,
    plan: PlannedRead,
    lease: Lease,
    target: RangeRef,
    replan: Replan,
    lock_wait: float,
    stats: Stats,
) -> tuple[PlannedRead, tuple[str | None, str | None] | None]:
    """Hold the thread's lease, or wait until the work is done by the worker who holds it.

    Taking the lease at once reads the index and ``target``'s range in the same round trip
    (returned with the plan). A waiter watches the lease: when it vanishes without a
    result (its holder failed) or is abandoned, one waiter takes it over at once. After
    ``lock_wait`` seconds a waiter goes on without the lease.
    """
    keys = cache.keys
    read = await lease.acquire_and_read([keys.index, keys.summary(target.start, target.end)])
    if read is not None:
        return plan, (read[0], read[1])
    stats.lease_waits += 1
    if reporting.recorder is not None:
        reporting.recorder.lease_waited()
    deadline = time.monotonic() + lock_wait
    delay = 0.02
    while (remaining := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.5)
        index_raw, lease_raw = await cache.io.get_many([keys.index, keys.lease])
        plan = await replan(index_raw)
        if due_range(plan.decision) is None:
            return plan, None
        if lease_raw is None:
            if await lease.acquire():
                return plan, None
        elif await lease.take_over(lease_raw):
            return plan, None
    logger.warning(
        "thread %s: waited %.1fs for another worker, summarizing here", keys.encoded, lock_wait
    )
    return plan, None
