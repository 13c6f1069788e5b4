"""The compressor when a real store stops answering: bounded failures, and a clean recovery.

Each real server is frozen (SIGSTOP of its processes: connections stay open, nothing answers),
and SQLite is held by another connection in ``BEGIN EXCLUSIVE``. A request then fails with
``StoreTimeout`` (or, under ``on_store_error="bypass"``, is served without the cache) within one
bound, never hangs; and once the store answers again, the very next request is neither held up by
a lease the failed request left behind nor served a wrong summary. The bound that acts is the
compressor's ``store_timeout`` or, when it is the shorter, the store's own ``timeout``.

The store stops answering at three points of a request:

* ``cold``: before anything, so the first read (the thread's index) hangs; on SQLite, where a
  writer's lock does not stop readers, the first write does;
* ``lease``: after the reads, right before the first write (taking the thread's lease);
* ``commit``: while the summarizer runs, so writing the summary hangs.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import pytest
from slimcache_sql import SQLStore

from slimcache import (
    CompressionResult,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    Store,
    StoreTimeout,
    SummarizeCompressor,
    SummaryContext,
)
from tests.fakes import chat

pytestmark = pytest.mark.servers

STORE_TIMEOUT = 1.0
# What a failing request may take: one bounded store call, plus scheduling slack.
BOUND = 2 * STORE_TIMEOUT
LEASE_TTL = 10.0
# The store bound of the requests before and after the outage: only the failing one needs the
# short bound, and on a loaded machine a SQLite write can wait past it while the failed
# request's commit is settled in the background.
CALM = LEASE_TTL / 2
# Only reached when a request hangs, so that a hang fails the test instead of the suite.
GUARD = 30.0
SUMMARIZER_ID = "faults"
WARM, FULL = 30, 45  # messages cached before the outage, and in the request during it

Phase = Literal["cold", "lease", "commit"]
Policy = Literal["raise", "bypass"]
Bound = Literal["compressor", "store"]


class Outage(Protocol):
    """Makes a store stop answering, and answer again."""

    def freeze(self) -> None:
        """Stop answering."""

    def thaw(self) -> None:
        """Answer again; harmless when not frozen."""


class ExclusiveLock:
    """Another connection holding a SQLite file in ``BEGIN EXCLUSIVE`` (no writer gets in)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._holder: sqlite3.Connection | None = None

    def freeze(self) -> None:
        holder = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        holder.execute("BEGIN EXCLUSIVE")
        self._holder = holder

    def thaw(self) -> None:
        holder, self._holder = self._holder, None
        if holder is not None:
            holder.execute("ROLLBACK")
            holder.close()


@dataclass
class Target:
    """A store kind: how to open a store, and how to make that store stop answering."""

    make: Callable[..., Awaitable[Any]]
    outage: Callable[[Any], Outage]


@pytest.fixture(params=["redis", "postgres", "s3", "sqlite"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "sqlite":

        def lock(store: Any) -> Outage:
            assert isinstance(store, SQLStore)
            database = store.engine.url.database
            assert database
            return ExclusiveLock(database)

        return Target(request.getfixturevalue("sqlite_store_factory"), lock)
    server = request.getfixturevalue(f"{request.param}_server")
    factory = request.getfixturevalue(f"{request.param}_store_factory")
    return Target(factory, lambda store: server)


class FreezeBeforeFirstWrite:
    """Forwards every call to a store; right before the first write, the store stops answering."""

    def __init__(self, inner: Any, outage: Outage) -> None:
        self.inner = inner
        self.outage = outage
        self.fired = False

    def _before_write(self) -> None:
        if not self.fired:
            self.fired = True
            self.outage.freeze()

    async def get(self, key: str) -> str | None:
        value: str | None = await self.inner.get(key)
        return value

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        values: list[str | None] = await self.inner.get_many(keys)
        return values

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self._before_write()
        await self.inner.set(key, value, ttl=ttl)

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        self._before_write()
        won: bool = await self.inner.set_if_absent(key, value, ttl=ttl)
        return won

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        self._before_write()
        won: bool = await self.inner.compare_and_set(key, expected, value, ttl=ttl)
        return won

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        self._before_write()
        done: bool = await self.inner.compare_and_delete(key, expected)
        return done

    async def delete(self, key: str) -> None:
        self._before_write()
        await self.inner.delete(key)


def summary_text(context: SummaryContext) -> str:
    previous = f"{context.previous_summary} + " if context.previous_summary else ""
    return f"{previous}{context.task}[{context.start}-{context.end}]"


class Summarizer:
    """Deterministic summaries; with ``outage``, the store stops answering during each call."""

    def __init__(self, outage: Outage | None = None) -> None:
        self.outage = outage
        self.calls = 0

    async def __call__(self, messages: Sequence[Any], context: SummaryContext) -> str:
        self.calls += 1
        if self.outage is not None:
            self.outage.freeze()
            await asyncio.sleep(0.05)
        return summary_text(context)


def compressor(summarizer: Summarizer, store: Any, **options: Any) -> SummarizeCompressor:
    options.setdefault("store_timeout", STORE_TIMEOUT)
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        lease_ttl=LEASE_TTL,
        summarizer_id=SUMMARIZER_ID,
        **options,
    )


async def reference(history: list[dict[str, Any]], cached: int) -> CompressionResult:
    """What a store that never failed gives for ``history``, ``history[:cached]`` done before."""
    store = MemoryStore()
    if cached:
        await compressor(Summarizer(), store).compress_detailed(history[:cached], thread_id="r")
    return await compressor(Summarizer(), store).compress_detailed(history, thread_id="r")


async def timed(call: Awaitable[CompressionResult]) -> tuple[CompressionResult, float]:
    started = time.monotonic()
    result = await asyncio.wait_for(call, GUARD)
    return result, time.monotonic() - started


# The lease phase under "bypass" fails the same store call as under "raise"; left out for time.
@pytest.mark.parametrize(
    ("phase", "policy"),
    [
        ("cold", "raise"),
        ("cold", "bypass"),
        ("lease", "raise"),
        ("commit", "raise"),
        ("commit", "bypass"),
    ],
)
@pytest.mark.parametrize("bound", ["compressor", "store"])
async def test_a_store_that_stops_answering_fails_fast_and_recovers_cleanly(
    target: Target, phase: Phase, policy: Policy, bound: Bound
) -> None:
    if bound == "store":
        # The store's own timeout acts: the compressor's is longer (and the Redis and SQL
        # stores are then awaited with no timer of the compressor's).
        store: Store = await target.make(timeout=STORE_TIMEOUT)
        options: dict[str, Any] = {"store_timeout": LEASE_TTL}
    else:
        store = await target.make()
        options = {}
    outage = target.outage(store)
    thread = f"faults-{phase}-{policy}-{bound}"
    history = chat(FULL)
    cached = 0 if phase == "cold" else WARM
    await store.get("warm-up")  # connections open and tables made, as in a running service
    if cached:
        warm = await compressor(Summarizer(), store, store_timeout=CALM).compress_detailed(
            history[:cached], thread_id=thread
        )
        assert warm.outcome == "summarized"
    expected = await reference(history, cached)
    assert expected.outcome == ("extended" if cached else "summarized")

    summarizer = Summarizer(outage if phase == "commit" else None)
    gate = FreezeBeforeFirstWrite(store, outage) if phase == "lease" else None
    failing = compressor(summarizer, gate or store, on_store_error=policy, **options)
    started = time.monotonic()
    try:
        if phase == "cold":
            outage.freeze()
        if policy == "raise":
            with pytest.raises(StoreTimeout):
                await asyncio.wait_for(failing.compress_detailed(history, thread_id=thread), GUARD)
            elapsed = time.monotonic() - started
        else:
            result, elapsed = await timed(failing.compress_detailed(history, thread_id=thread))
            assert result.cached is False
            assert result.summary_range == expected.summary_range
            assert result.messages[2:] == expected.messages[2:]
            if result.outcome != "uncached":
                # Summarized with the cache's help, only its write failed: the same summary.
                assert result.outcome == expected.outcome
                assert result.summary == expected.summary
    finally:
        outage.thaw()
    # One bound: whichever bound acted, the request waits on the store neither to undo its
    # write nor to release its lease (a StoreTimeout sends both to the background).
    assert elapsed < BOUND, f"the failing request took {elapsed:.1f}s"
    if gate is not None:
        assert gate.fired  # the request got as far as writing
    if phase == "commit":
        assert summarizer.calls == 1

    # The store answers again: the next request, from another worker, is served at once.
    after, took = await timed(
        compressor(Summarizer(), store, store_timeout=CALM).compress_detailed(
            history, thread_id=thread
        )
    )
    assert took < LEASE_TTL / 2, f"the first request after the outage took {took:.1f}s"
    assert after.outcome in ("hit", "extended", "summarized")
    assert after.summary_range == expected.summary_range
    assert after.summary == expected.summary
    assert after.messages == expected.messages
