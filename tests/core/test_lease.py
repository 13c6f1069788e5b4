"""The thread lease on the memory store: one summarizer call per range, takeover, no stale waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from slimcache import KeepMessages, MemoryStore, MessageThreshold, StoreError, SummarizeCompressor
from slimcache.core.lease import (
    CLOCK_TOLERANCE,
    WATCH_SLACK,
    Lease,
    lease_is_abandoned,
    lease_is_foreign,
)
from slimcache.core.results import Stats
from slimcache.core.store_io import StoreIO
from slimcache.stores import ThreadKeys
from slimcache.stores.protocol import StoreOp
from tests.fakes import RecordingSummarizer, WithoutBatch, chat


def make(summarizer: Any, store: Any, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(20), keep=KeepMessages(10), **options
    )


class FailFirst(RecordingSummarizer):
    """Fails its first call only, after a delay, as a holder whose LLM call errors out."""

    async def __call__(self, messages: Any, context: Any) -> str:
        first = not self.calls
        if first:
            self.calls.append(None)  # type: ignore[arg-type]
            await asyncio.sleep(self.delay)
            raise RuntimeError("LLM unavailable")
        return await super().__call__(messages, context)


async def test_a_failing_holder_costs_one_extra_call_not_one_per_waiter() -> None:
    store = MemoryStore()
    summarizer = FailFirst(delay=0.2)
    history = chat(30)
    started = time.monotonic()
    results = await asyncio.gather(
        *(make(summarizer, store).compress_detailed(history, thread_id="t") for _ in range(16)),
        return_exceptions=True,
    )
    elapsed = time.monotonic() - started
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1
    assert len(summarizer.calls) == 2
    # The waiters did not sit out lock_wait (30 s): one took the lease over when it was released.
    assert elapsed < 10
    assert not await store.get(ThreadKeys("t").lease)


async def test_waiters_serve_the_holders_result_without_calls() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer(delay=0.2)
    compressors = [make(summarizer, store) for _ in range(8)]
    results = await asyncio.gather(
        *(c.compress_detailed(chat(30), thread_id="t") for c in compressors)
    )
    assert len(summarizer.calls) == 1
    assert sorted(r.outcome for r in results) == ["hit"] * 7 + ["summarized"]
    assert sum(c.stats.lease_waits for c in compressors) == 7


async def test_interleaved_rolling_requests_make_the_sequential_calls() -> None:
    reference = RecordingSummarizer()
    sequential = make(reference, MemoryStore())
    history = chat(80)
    for k in range(2, 81, 2):
        await sequential.compress(history[:k], thread_id="t")
    expected = sorted((c.context.start, c.context.end) for c in reference.calls)

    store = MemoryStore()
    summarizer = RecordingSummarizer(delay=0.05)

    async def replay() -> None:
        compressor = make(summarizer, store)
        for k in range(2, 81, 2):
            await compressor.compress(history[:k], thread_id="t")

    await asyncio.gather(*(replay() for _ in range(8)))
    assert sorted((c.context.start, c.context.end) for c in summarizer.calls) == expected


class WriterClockStore(MemoryStore):
    """A memory store declaring that its expiry is the writer's clock, as S3's is."""

    expiry_clock = "writer"


def _undeclared() -> Any:
    """A user's store with every ability but no ``expiry_clock``: it counts as the writer's."""
    return WithoutBatch(MemoryStore())


@pytest.mark.parametrize(
    ("stale", "make_store"),
    [
        # Bytes slimcache did not write: on sight, on every store.
        ("\x00garbage", MemoryStore),
        ("\x00garbage", _undeclared),
        # A deadline long past, in a value the store never expires (written with no TTL): on
        # sight where the expiry is the writer's clock.
        ("dead-token 1.0", WriterClockStore),
        ("dead-token 1.0", _undeclared),
    ],
)
async def test_an_abandoned_lease_is_taken_over_at_once(stale: str, make_store: Any) -> None:
    store = make_store()
    keys = ThreadKeys("t")
    await store.set(keys.lease, stale)
    summarizer = RecordingSummarizer()
    started = time.monotonic()
    result = await make(summarizer, store, lock_wait=30).compress_detailed(chat(30), thread_id="t")
    assert time.monotonic() - started < 5
    assert result.outcome == "summarized"
    assert await store.get(keys.lease) is None


async def test_a_live_lease_is_not_taken_over() -> None:
    store = MemoryStore()
    io = StoreIO(store, Stats(), timeout=1.0, ttl=None)
    holder = Lease(io, "k", ttl=10)
    assert await holder.acquire()
    assert holder.value is not None
    other = Lease(io, "k", ttl=10)
    assert not await other.acquire()
    assert not await other.take_over(holder.value)
    # Only the holder's release deletes it.
    await other.release()
    assert await store.get("k") == holder.value
    assert await holder.renew()
    await holder.release()
    assert await store.get("k") is None


def test_lease_values_slimcache_did_not_write_or_long_past_are_abandoned_on_sight() -> None:
    past = 1_000_000.0
    # Further in the past than a live holder's clock could be behind: abandoned.
    assert lease_is_abandoned(f"tok {past}", now=past + CLOCK_TOLERANCE + 1)
    # A holder whose clock is a minute behind writes deadlines a minute "in the past".
    assert not lease_is_abandoned(f"tok {past}", now=past + 60)
    assert not lease_is_abandoned(f"tok {past}", now=past + 0.5)
    for foreign in ("no-deadline", " 100.0", "tok nan", "tok inf", "tok -inf", "tok 1e400"):
        assert lease_is_foreign(foreign), foreign
        assert lease_is_abandoned(foreign, now=past), foreign
    # Far in the future is not abandoned on sight: a waiter watches it (see below).
    assert not lease_is_abandoned("tok 99999999999", now=past)
    for written in (f"tok {past}", "tok 99999999999", "tok 0"):
        assert not lease_is_foreign(written), written


# Seconds off the right time: (the holder's clock, the waiter's clock).
CLOCK_PAIRS = {
    "holder an hour slow": (-3600.0, 0.0),
    "waiter an hour fast": (0.0, 3600.0),
    "holder an hour fast, waiter an hour slow": (3600.0, -3600.0),
}


@pytest.mark.parametrize("clocks", list(CLOCK_PAIRS))
async def test_on_a_store_that_expires_leases_itself_no_clock_error_takes_a_live_lease(
    clocks: str,
) -> None:
    holder_offset, waiter_offset = CLOCK_PAIRS[clocks]
    store = MemoryStore()
    io = StoreIO(store, Stats(), timeout=1.0, ttl=None)
    assert io.expires_itself
    ticks = [0.0]  # seconds passing, on every clock

    def clock(offset: float) -> Callable[[], float]:
        return lambda: time.time() + ticks[0] + offset

    holder = Lease(io, "k", ttl=10, clock=clock(holder_offset))
    waiter = Lease(io, "k", ttl=10, clock=clock(waiter_offset), watch_clock=lambda: ticks[0])
    assert await holder.acquire()
    # A holder renewing every third of the TTL keeps its lease, however long it holds it.
    for renewal in range(10):
        assert holder.value is not None
        assert not await waiter.take_over(holder.value)
        ticks[0] = (renewal + 1) * 10 / 3
        assert await holder.renew()
    # One that stops renewing loses it once the value is unchanged for the watch.
    assert holder.value is not None
    assert not await waiter.take_over(holder.value)
    ticks[0] += 10 + WATCH_SLACK + 0.01
    assert await waiter.take_over(holder.value)


@pytest.mark.parametrize("make_store", [WriterClockStore, _undeclared])
async def test_where_expiry_is_the_writers_clock_a_holder_far_behind_loses_its_lease(
    make_store: Any,
) -> None:
    # Kept on stores that do not time expiry themselves (S3, a user's store that does not
    # say): a deadline more than CLOCK_TOLERANCE in the waiter's past is taken over on sight.
    io = StoreIO(make_store(), Stats(), timeout=1.0, ttl=None)
    assert not io.expires_itself
    holder = Lease(io, "k", ttl=10, clock=lambda: time.time() - CLOCK_TOLERANCE - 60)
    waiter = Lease(io, "k", ttl=10)
    assert await holder.acquire()
    assert holder.value is not None
    assert await waiter.take_over(holder.value)


async def test_a_waiter_takes_over_a_value_unchanged_for_longer_than_the_ttl() -> None:
    store = MemoryStore()
    io = StoreIO(store, Stats(), timeout=1.0, ttl=None)
    ticks = [0.0]
    waiter = Lease(io, "k", ttl=10, watch_clock=lambda: ticks[0])
    stuck = "tok 1e308"
    await store.set("k", stuck)
    assert not await waiter.take_over(stuck)
    ticks[0] = 10 + WATCH_SLACK - 0.01
    assert not await waiter.take_over(stuck)
    # A new value (the holder renewed) starts the watch again.
    await store.set("k", "tok 1e307")
    assert not await waiter.take_over("tok 1e307")
    ticks[0] = 2 * (10 + WATCH_SLACK)
    assert await waiter.take_over("tok 1e307")
    assert await store.get("k") == waiter.value


class FreezingStore(MemoryStore):
    """Answers reads and the lease, then stops answering every write, as a server that froze
    while the summarizer ran."""

    frozen = False

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        if self.frozen:
            await asyncio.sleep(60)
        await super().set(key, value, ttl=ttl)

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        if self.frozen:
            await asyncio.sleep(60)
        return await super().compare_and_delete(key, expected)

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        if self.frozen:
            await asyncio.sleep(60)
        return await super().batch(ops)


async def test_a_request_whose_write_times_out_does_not_also_wait_on_the_release() -> None:
    store = FreezingStore()

    async def summarize(messages: Any, context: Any) -> str:
        store.frozen = True
        return "summary"

    bound = 1.0
    compressor = make(summarize, store, store_timeout=bound)
    started = time.monotonic()
    with pytest.raises(StoreError, match="timed out"):
        await compressor.compress(chat(30), thread_id="t")
    # One bound for the failed write, not a second one for releasing the lease: all the rest
    # of the second bound is slack for a busy machine.
    assert time.monotonic() - started < 2 * bound
    store.frozen = False
    # The release, retried in the background, now goes through (looked for up to 30 s).
    lease = ThreadKeys("t").lease
    for _ in range(600):
        if await store.get(lease) is None:
            break
        await asyncio.sleep(0.05)
    assert await store.get(lease) is None
