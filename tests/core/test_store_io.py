"""Which store calls the compressor bounds with a timer of its own, and which it awaits directly.

A store that states a bound on its calls no longer than ``store_timeout``
(:class:`slimcache.stores.SupportsCallTimeout`) is awaited in the caller's own task; any other
store's call runs as a task of its own under the compressor's timer, as before. Frozen real servers
under both arrangements are in ``test_compressor_faults.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import uuid
from typing import Any

import pytest
from slimcache_redis import RedisStore

from slimcache import (
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    Stats,
    StoreError,
    StoreTimeout,
    SummarizeCompressor,
)
from slimcache.core.store_io import RETRY_FIRST, StoreIO, bounds_itself, once_the_store_answers
from slimcache.stores import SupportsCallTimeout
from slimcache.stores.protocol import call_bound
from slimcache.stores.toolkit import translate_errors
from tests.fakes import CountingStore, RecordingSummarizer, chat
from tests.servers.store_factories import StoreFactoryOf


class Stated(CountingStore):
    """A plain store stating ``call_timeout``, recording the task each read ran in."""

    def __init__(self, call_timeout: Any) -> None:
        super().__init__()
        self._stated = call_timeout
        self.tasks: list[asyncio.Task[Any] | None] = []

    @property
    def call_timeout(self) -> Any:
        return self._stated

    async def get(self, key: str) -> str | None:
        self.tasks.append(asyncio.current_task())
        return await super().get(key)


class BrokenBound(CountingStore):
    @property
    def call_timeout(self) -> float:
        raise RuntimeError("no bound here")


class WaitingMemoryStore(MemoryStore):
    """A subclass whose reads wait: it must not inherit MemoryStore's bound of 0."""

    async def get(self, key: str) -> str | None:
        await asyncio.sleep(60)
        return None


def test_memory_store_states_a_bound_of_zero_but_its_subclasses_do_not() -> None:
    assert isinstance(MemoryStore(), SupportsCallTimeout)
    assert call_bound(MemoryStore()) == 0.0
    assert call_bound(WaitingMemoryStore()) is None


@pytest.mark.parametrize("stated", ["5", math.nan, math.inf, -1.0, True, None, [1.0]])
def test_a_bound_that_is_not_a_finite_number_of_seconds_is_no_promise(stated: Any) -> None:
    assert call_bound(Stated(stated)) is None


def test_stated_bounds_and_stores_stating_none() -> None:
    assert call_bound(Stated(2)) == 2.0
    assert call_bound(Stated(0.5)) == 0.5
    assert call_bound(CountingStore()) is None
    assert call_bound(BrokenBound()) is None


@pytest.mark.parametrize(
    ("stated", "timeout", "direct"),
    [
        (1.0, 1.0, True),  # the same bound
        (0.5, 1.0, True),  # a tighter one
        (2.0, 1.0, False),  # looser than the compressor's: its own timer still acts
        (None, 1.0, False),
        (math.nan, 1.0, False),
        (None, None, True),  # no bound asked for
    ],
)
def test_the_store_bound_is_relied_on_only_when_it_is_no_looser(
    stated: Any, timeout: float | None, direct: bool
) -> None:
    assert bounds_itself(Stated(stated), timeout) is direct


@pytest.mark.parametrize(("stated", "direct"), [(1.0, True), (5.0, False), (None, False)])
async def test_a_store_bounding_its_own_calls_is_awaited_in_the_callers_task(
    stated: Any, direct: bool
) -> None:
    store = Stated(stated)
    io = StoreIO(store, Stats(), timeout=1.0, ttl=None)
    assert await io.get("absent") is None
    assert (store.tasks == [asyncio.current_task()]) is direct


async def test_a_subclass_of_memory_store_that_waits_is_still_bounded() -> None:
    io = StoreIO(WaitingMemoryStore(), Stats(), timeout=0.2, ttl=None)
    with pytest.raises(StoreTimeout, match=r"timed out after 0\.2s"):
        await asyncio.wait_for(io.get("k"), 10)
    assert io.timeouts == 1


class OwnTimeout(Stated):
    """States a bound, and reports running out of it as the bundled stores do."""

    async def get(self, key: str) -> str | None:
        raise StoreTimeout("OwnTimeout GET of 'k' failed: no answer within 1 s")


async def test_the_stores_own_timeout_counts_as_a_timeout() -> None:
    stats = Stats()
    io = StoreIO(OwnTimeout(1.0), stats, timeout=1.0, ttl=None)
    with pytest.raises(StoreTimeout, match="no answer within 1 s"):
        await io.get("k")
    assert (io.timeouts, stats.store_errors) == (1, 1)


async def test_other_store_errors_are_not_timeouts() -> None:
    class Failing(Stated):
        async def get(self, key: str) -> str | None:
            raise StoreError("refused")

    stats = Stats()
    io = StoreIO(Failing(1.0), stats, timeout=1.0, ttl=None)
    with pytest.raises(StoreError, match="refused") as raised:
        await io.get("k")
    assert not isinstance(raised.value, StoreTimeout)
    assert (io.timeouts, stats.store_errors) == (0, 1)


@pytest.mark.servers
async def test_the_bundled_stores_state_their_bound(
    store_factory: Any, request: pytest.FixtureRequest
) -> None:
    name = request.node.callspec.params["store_factory"]
    if name == "memory":
        assert call_bound(await store_factory()) == 0.0
        return
    store = await store_factory(timeout=1.5)
    # S3 reads several keys under a limit of concurrent requests, so a get_many may take
    # longer than one timeout: it states no bound, and the compressor keeps its timer.
    assert call_bound(store) == (None if name == "s3" else 1.5)
    assert bounds_itself(store, 1.5) is (name != "s3")
    assert not bounds_itself(store, 1.0)


class DriverTimeout(Exception):
    """A driver's own timeout class, unrelated to the builtin TimeoutError."""


class DriverFailure(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (TimeoutError("read timed out"), StoreTimeout),
        (asyncio.TimeoutError(), StoreTimeout),
        (DriverTimeout("no reply"), StoreTimeout),
        (DriverFailure("refused"), StoreError),
        (ConnectionResetError("reset"), StoreError),
    ],
)
def test_driver_timeouts_become_store_timeouts(error: Exception, kind: type[StoreError]) -> None:
    errors = (DriverTimeout, DriverFailure, OSError, asyncio.TimeoutError)
    with (
        pytest.raises(StoreError, match=r"^Driver GET of key 'k' failed") as raised,
        translate_errors("Driver GET", "key 'k'", errors, timeouts=(DriverTimeout,)),
    ):
        raise error
    assert type(raised.value) is kind
    assert raised.value.__cause__ is error


class RaisesAsyncioTimeout(CountingStore):
    """A store whose driver gives up with asyncio's own TimeoutError."""

    async def get(self, key: str) -> str | None:
        raise asyncio.TimeoutError


@pytest.mark.parametrize(("timeout", "message"), [(None, "timed out$"), (1.0, "after 1s$")])
async def test_a_stores_own_asyncio_timeout_is_a_store_timeout_with_or_without_a_bound(
    timeout: float | None, message: str
) -> None:
    io = StoreIO(RaisesAsyncioTimeout(), Stats(), timeout=timeout, ttl=None)
    with pytest.raises(StoreTimeout, match=message):
        await io.get("k")
    assert io.timeouts == 1


# -- entries a process has read: an earlier point of a thread needs no second read -------------


class SharedStore(CountingStore):
    """A plain store over a dict another one may share: two of them are two processes'
    connections to the same server."""

    def __init__(self, data: dict[str, str]) -> None:
        super().__init__()
        self.data = data


async def _replay(
    history: list[dict[str, Any]],
    stores: tuple[Any, Any] | None = None,
    **options: Any,
) -> list[tuple[int, tuple[int, int] | None]]:
    """Build a thread turn by turn through one store, then ask for its earlier points
    through another over the same data: the round trips and the range served of each."""
    summarizer = RecordingSummarizer()

    def make(store: Any) -> SummarizeCompressor:
        return SummarizeCompressor(
            summarizer, store, trigger=MessageThreshold(8), keep=KeepMessages(4), **options
        )

    data: dict[str, str] = {}
    builder, replayer = stores or (SharedStore(data), SharedStore(data))
    for n in range(2, len(history) + 1, 2):
        await make(builder).compress(history[:n], thread_id="t")
    served = []
    for n in range(12, len(history) - 1, 2):
        compressor = make(replayer)
        result = await compressor.compress_detailed(history[:n], thread_id="t")
        assert result.outcome == "hit"
        served.append((compressor.stats.store_round_trips, result.summary_range))
    assert len(summarizer.calls) >= 4
    return served


async def test_a_range_read_once_is_not_read_again_for_an_earlier_point() -> None:
    served = await _replay(chat(40))
    # Behind the index's newest summary, a request reads the range it needs (on this store
    # without get_many, one call per candidate range): once. After that, the index alone,
    # whose listing of the range's fingerprint vouches for the entry remembered.
    seen: set[tuple[int, int] | None] = set()
    for trips, served_range in served:
        assert (trips > 1) == (served_range not in seen), served
        seen.add(served_range)
    assert len(seen) >= 3


@pytest.mark.servers
async def test_on_redis_an_earlier_point_is_one_read_once_its_range_was_read(
    redis_store_factory: StoreFactoryOf[RedisStore],
) -> None:
    prefix = f"known:{uuid.uuid4().hex}:"
    stores = (await redis_store_factory(prefix=prefix), await redis_store_factory(prefix=prefix))
    served = await _replay(chat(40), stores)
    seen: set[tuple[int, int] | None] = set()
    for trips, served_range in served:
        assert trips == (1 if served_range in seen else 2), served
        seen.add(served_range)
    assert len(seen) >= 3


async def test_with_a_ttl_every_earlier_point_reads_its_range() -> None:
    served = await _replay(chat(40), ttl=3600)
    assert all(trips > 1 for trips, _ in served), served


async def test_an_entry_read_from_one_store_is_never_served_from_another() -> None:
    # Store b lists the same ranges (its index copied from a) but holds none of them: what
    # this process read from a does not stand in for them.
    a, b = MemoryStore(), MemoryStore()
    summarizer = RecordingSummarizer()

    def make(store: MemoryStore) -> SummarizeCompressor:
        return SummarizeCompressor(
            summarizer, store, trigger=MessageThreshold(8), keep=KeepMessages(4)
        )

    history = chat(40)
    for n in range(2, 41, 2):
        await make(a).compress(history[:n], thread_id="t")
    early = await make(a).compress_detailed(history[:12], thread_id="t")
    assert early.outcome == "hit"
    index = await a.get("thread_t:index")
    assert index is not None
    await b.set("thread_t:index", index)
    calls = len(summarizer.calls)
    result = await make(b).compress_detailed(history[:12], thread_id="t")
    assert result.outcome != "hit"
    assert len(summarizer.calls) > calls


async def test_a_clean_up_is_tried_until_the_store_answers_and_no_later_than_told() -> None:
    tries: list[int] = []

    async def fails_twice() -> None:
        tries.append(len(tries))
        if len(tries) < 3:
            raise StoreError("not answering")

    assert await once_the_store_answers(fails_twice, until=math.inf)
    assert len(tries) == 3

    async def never() -> None:
        tries.append(len(tries))
        raise StoreError(f"try {len(tries)}")

    # A clock that reads 0, 1, 2...: tries start at 0.1, 1.2 and 2.4 by it, within 2.5; the
    # fourth would start at 3.8.
    tries.clear()
    ticks = itertools.count()
    with pytest.raises(StoreError, match="try 3"):
        await once_the_store_answers(never, until=2.5, clock=lambda: next(ticks))
    assert len(tries) == 3

    tries.clear()
    assert not await once_the_store_answers(never, until=RETRY_FIRST / 2, clock=lambda: 0.0)
    assert tries == []
