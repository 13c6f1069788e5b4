"""A conformance suite every slimcache store should pass, for adapters inside and outside slimcache.

:class:`StoreConformance` is a base class of pytest test methods. Subclass it in a test module
and provide a fixture named ``store_factory``: an async callable ``make(**options) -> Store``
that returns a fresh store each call, isolated from every other store it made (its own key
prefix, table, bucket or database), and that closes the stores it made when the test ends.

A third-party adapter runs the whole suite with a short ``conftest.py`` and one test module::

    # conftest.py
    from collections.abc import AsyncIterator
    from typing import Any
    import uuid

    import pytest_asyncio

    from my_package import MyStore
    from slimcache.testing import StoreFactory


    @pytest_asyncio.fixture
    async def store_factory() -> AsyncIterator[StoreFactory]:
        made: list[MyStore] = []

        async def make(**options: Any) -> MyStore:
            store = MyStore("myscheme://127.0.0.1", prefix=uuid.uuid4().hex, **options)
            made.append(store)
            return store

        yield make
        for store in made:
            await store.aclose()


    # test_my_store.py
    from slimcache.testing import StoreConformance


    class TestMyStore(StoreConformance):
        pass

The test methods carry the ``asyncio`` mark, so they run under pytest-asyncio in both its
``strict`` and ``auto`` modes (in ``strict`` mode declare the fixture with
``pytest_asyncio.fixture`` as above). Cases about an optional ability
(:class:`~slimcache.stores.SupportsSetIfAbsent`, :class:`~slimcache.stores.SupportsGetMany`,
:class:`~slimcache.stores.SupportsCompareAndSet`, :class:`~slimcache.stores.SupportsBatch`,
:class:`~slimcache.stores.SupportsClose`) are skipped when the store does not have it. A
subclass can
tune the class attributes (``short_ttl``, ``expiry_wait``, ``race_tasks``,
``large_value_size``), for instance to give a store with a coarse expiry sweep more time.

Without pytest's runner, :func:`run_conformance` runs the same cases in the current event loop
and returns one :class:`CaseResult` per case.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

import pytest

from slimcache._exceptions import ConfigurationError
from slimcache.stores.protocol import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    Store,
    StoreOp,
    SupportsBatch,
    SupportsClose,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsSetIfAbsent,
)

__all__ = [
    "CaseResult",
    "StoreConformance",
    "StoreFactory",
    "StoreWithBatch",
    "StoreWithCompareAndSet",
    "StoreWithGetMany",
    "StoreWithSetIfAbsent",
    "run_conformance",
]


class StoreFactory(Protocol):
    """An async callable returning a fresh, isolated store on each call.

    Two calls must return stores that cannot see each other's keys. Keyword options are
    passed on to the store's constructor (the suite itself calls it without options).
    """

    def __call__(self, **options: Any) -> Awaitable[Store]:
        """Make a new store."""
        ...


@runtime_checkable
class StoreWithSetIfAbsent(Store, SupportsSetIfAbsent, Protocol):
    """A store that also has the atomic ``set_if_absent`` ability."""


@runtime_checkable
class StoreWithGetMany(Store, SupportsGetMany, Protocol):
    """A store that also has the batch ``get_many`` ability."""


@runtime_checkable
class StoreWithCompareAndSet(Store, SupportsCompareAndSet, Protocol):
    """A store that also has the atomic ``compare_and_set`` / ``compare_and_delete`` ability."""


@runtime_checkable
class StoreWithBatch(Store, SupportsBatch, Protocol):
    """A store that also runs several operations in one round trip (``batch``)."""


# Keys that trip up naive encodings: separators, path syntax, URL syntax, control characters
# and characters outside the Basic Multilingual Plane.
UNUSUAL_KEYS: tuple[str, ...] = (
    "plain",
    "with:colons:in:it",
    "with/slashes/in/it",
    "/leading-slash",
    "trailing-slash/",
    "../dot-dot/./segments",
    "spaces in the key",
    "line\nbreak\tand tab",
    "percent%20encoded%2Flooking",
    "query?and=fragment#here",
    "back\\slash",
    "quote'and\"double",
    "emoji-\U0001f600-\U0001f389",
    "\u00e9t\u00e9-\u00fcber-\u65e5\u672c\u8a9e-\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "k" * 200,
)

UNUSUAL_VALUES: tuple[str, ...] = (
    "plain value",
    "",
    " leading and trailing spaces ",
    "multi\nline\r\nvalue\n",
    '{"json": ["document", 1, 2.5, null, true], "nested": {"a": "\\u00e9"}}',
    "emoji \U0001f600\U0001f389 and \u65e5\u672c\u8a9e and \u0645\u0631\u062d\u0628\u0627",
    "\u200bzero\u200dwidth\ufeff",
    "tab\tseparated\tvalue",
)


# TTLs every store must refuse with ConfigurationError, by test id.
INVALID_TTLS: dict[str, object] = {
    "zero": 0,
    "zero-float": 0.0,
    "negative": -1,
    "negative-float": -0.5,
    "true": True,
    "false": False,
    "nan": math.nan,
    "inf": math.inf,
    "minus-inf": -math.inf,
    "string": "10",
}


def _large_value(size: int) -> str:
    """Return a deterministic string of exactly ``size`` characters with varied content.

    Repeating a short cycle of mixed ASCII, accented and non-BMP characters makes a truncated,
    re-encoded or normalised value fail the comparison, unlike a run of one letter.
    """
    cycle = (
        "The quick brown fox jumps over the lazy dog. 0123456789 {}[]\"'\\/:;\n"
        "\u00e9\u00e8\u00fc\u00df\u65e5\u672c\u8a9e\U0001f600\U0001f389\t"
    )
    repeats = size // len(cycle) + 1
    return (cycle * repeats)[:size]


def _unique(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one conformance case run by :func:`run_conformance`.

    Attributes:
        name: The test method's name, e.g. ``"test_set_then_get"``; a parametrized case adds
            its parameter id in brackets (``"test_invalid_ttl_is_rejected_before_writing[nan]"``).
        outcome: ``"passed"``, ``"skipped"`` or ``"failed"``.
        detail: The skip reason or the failure's traceback; empty when the case passed.
    """

    name: str
    outcome: Literal["passed", "skipped", "failed"]
    detail: str = ""


@pytest.mark.asyncio
class StoreConformance:
    """Test cases every store must pass; subclass it and provide a ``store_factory`` fixture.

    Attributes:
        short_ttl: TTL in seconds used by the expiry cases.
        expiry_wait: Upper bound in seconds on how long an expiry case waits, after the TTL has
            run out, for an entry to disappear before failing.
        poll_interval: Seconds between reads while waiting for an entry to expire.
        race_tasks: How many tasks race on one key in the ``set_if_absent`` and
            ``compare_and_set`` cases.
        large_value_size: Length in characters of the value in the large-value case.
    """

    short_ttl: float = 1.0
    expiry_wait: float = 15.0
    poll_interval: float = 0.1
    race_tasks: int = 50
    large_value_size: int = 1_000_000

    # -- helpers --------------------------------------------------------------------------

    async def wait_until_expired(self, store: Store, key: str) -> bool:
        """Poll ``key`` until it reads as absent; return ``False`` if the bound ran out first.

        The bound is generous (``short_ttl + expiry_wait``) and only limits how long a broken
        store can hang the suite: the assertion is about *whether* the entry goes away, not
        how fast.
        """
        deadline = time.monotonic() + self.short_ttl + self.expiry_wait
        while True:
            if await store.get(key) is None:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(self.poll_interval)

    @staticmethod
    def require_set_if_absent(store: Store) -> StoreWithSetIfAbsent:
        """Return ``store`` typed with its ``set_if_absent`` ability, or skip the case."""
        if not isinstance(store, SupportsSetIfAbsent):
            pytest.skip(f"{type(store).__name__} has no set_if_absent")
        return cast("StoreWithSetIfAbsent", store)

    @staticmethod
    def require_get_many(store: Store) -> StoreWithGetMany:
        """Return ``store`` typed with its ``get_many`` ability, or skip the case."""
        if not isinstance(store, SupportsGetMany):
            pytest.skip(f"{type(store).__name__} has no get_many")
        return cast("StoreWithGetMany", store)

    @staticmethod
    def require_compare_and_set(store: Store) -> StoreWithCompareAndSet:
        """Return ``store`` typed with its ``compare_and_set`` ability, or skip the case."""
        if not isinstance(store, SupportsCompareAndSet):
            pytest.skip(f"{type(store).__name__} has no compare_and_set")
        return cast("StoreWithCompareAndSet", store)

    @staticmethod
    def require_batch(store: Store) -> StoreWithBatch:
        """Return ``store`` typed with its ``batch`` ability, or skip the case."""
        if not isinstance(store, SupportsBatch):
            pytest.skip(f"{type(store).__name__} has no batch")
        return cast("StoreWithBatch", store)

    async def expire_without_reading(self, store: Store, key: str) -> None:
        """Wait until an entry ``key`` written with ``short_ttl`` just before has expired.

        ``key`` itself is never read: a read may clean an expired entry up and hide a store
        that treats an expired-but-present entry as live. A witness written afterwards with the
        same TTL is watched instead.
        """
        witness = _unique(f"witness-for-{key}")
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"

    # -- the protocol ---------------------------------------------------------------------

    async def test_store_satisfies_protocol(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        assert isinstance(store, Store)
        for name in ("get", "set", "delete"):
            assert inspect.iscoroutinefunction(getattr(store, name)), f"{name} must be async"

    async def test_missing_key_reads_none(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        assert await store.get(_unique("never-written")) is None

    async def test_set_then_get(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("greeting")
        await store.set(key, "hello")
        assert await store.get(key) == "hello"

    async def test_overwrite_replaces_value(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("counter")
        await store.set(key, "first")
        await store.set(key, "second")
        assert await store.get(key) == "second"
        await store.set(key, "a much longer third value than either before it")
        assert await store.get(key) == "a much longer third value than either before it"
        await store.set(key, "4")
        assert await store.get(key) == "4"

    async def test_delete_removes_key(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key, kept = _unique("doomed"), _unique("kept")
        await store.set(key, "value")
        await store.set(kept, "other")
        await store.delete(key)
        assert await store.get(key) is None
        assert await store.get(kept) == "other"

    async def test_delete_missing_key_is_not_an_error(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("absent")
        await store.delete(key)
        await store.delete(key)
        assert await store.get(key) is None

    async def test_set_after_delete(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("phoenix")
        await store.set(key, "before")
        await store.delete(key)
        await store.set(key, "after")
        assert await store.get(key) == "after"

    async def test_empty_value_is_not_missing(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("empty")
        await store.set(key, "")
        assert await store.get(key) == ""

    async def test_unusual_keys_round_trip(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        for index, key in enumerate(UNUSUAL_KEYS):
            await store.set(key, f"value #{index} for {key}")
        for index, key in enumerate(UNUSUAL_KEYS):
            assert await store.get(key) == f"value #{index} for {key}", f"key {key!r}"
        # Keys that differ only in ways a lossy encoding might fold together stay distinct.
        assert await store.get("with:colons:in") is None
        assert await store.get("with/slashes/in") is None
        assert await store.get("leading-slash") is None
        assert await store.get("trailing-slash") is None
        for key in UNUSUAL_KEYS:
            await store.delete(key)
            assert await store.get(key) is None, f"key {key!r} survived delete"

    async def test_unusual_values_round_trip(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        keys = [_unique(f"value-{i}") for i in range(len(UNUSUAL_VALUES))]
        for key, value in zip(keys, UNUSUAL_VALUES, strict=True):
            await store.set(key, value)
        for key, value in zip(keys, UNUSUAL_VALUES, strict=True):
            assert await store.get(key) == value, f"value {value!r}"

    async def test_large_value_round_trips_exactly(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("large")
        value = _large_value(self.large_value_size)
        await store.set(key, value)
        got = await store.get(key)
        assert got is not None
        assert len(got) == len(value)
        assert got == value

    async def test_concurrent_writers_on_distinct_keys(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        keys = [_unique(f"parallel-{i}") for i in range(self.race_tasks)]

        async def write_then_read(index: int, key: str) -> str | None:
            await store.set(key, f"value {index}")
            return await store.get(key)

        results = await asyncio.gather(*(write_then_read(i, k) for i, k in enumerate(keys)))
        assert results == [f"value {i}" for i in range(len(keys))]

    # -- TTL --------------------------------------------------------------------------------

    async def test_entry_with_ttl_is_readable_before_expiry(
        self, store_factory: StoreFactory
    ) -> None:
        store = await store_factory()
        key = _unique("long-lived")
        await store.set(key, "value", ttl=3600)
        assert await store.get(key) == "value"

    async def test_ttl_expires_and_untimed_key_persists(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        forever, long_lived, short = _unique("forever"), _unique("long"), _unique("short")
        await store.set(forever, "stays")
        await store.set(long_lived, "stays too", ttl=3600)
        await store.set(short, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, short), "entry outlived its ttl"
        assert await store.get(forever) == "stays"
        assert await store.get(long_lived) == "stays too"

    async def test_fractional_ttl_expires(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("fraction")
        await store.set(key, "goes", ttl=self.short_ttl / 2)
        assert await self.wait_until_expired(store, key), "entry outlived a fractional ttl"

    async def test_overwrite_without_ttl_clears_ttl(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key, witness = _unique("rescued"), _unique("witness")
        await store.set(key, "old", ttl=self.short_ttl)
        await store.set(key, "new")
        # The witness is written after the key's first ttl started, so once the witness has
        # expired the key's original ttl has run out too.
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.get(key) == "new"

    async def test_overwrite_with_ttl_sets_ttl(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        key = _unique("doomed-later")
        await store.set(key, "forever")
        await store.set(key, "not any more", ttl=self.short_ttl)
        assert await store.get(key) in ("not any more", None)
        assert await self.wait_until_expired(store, key), "overwrite did not apply the ttl"

    @pytest.mark.parametrize("ttl", list(INVALID_TTLS.values()), ids=list(INVALID_TTLS))
    async def test_invalid_ttl_is_rejected_before_writing(
        self, store_factory: StoreFactory, ttl: object
    ) -> None:
        store = await store_factory()
        fresh, existing = _unique("fresh"), _unique("existing")
        await store.set(existing, "original")
        bad_ttl = cast("float", ttl)
        with pytest.raises(ConfigurationError):
            await store.set(fresh, "value", ttl=bad_ttl)
        with pytest.raises(ConfigurationError):
            await store.set(existing, "replacement", ttl=bad_ttl)
        assert await store.get(fresh) is None
        assert await store.get(existing) == "original"
        if isinstance(store, SupportsSetIfAbsent):
            with pytest.raises(ConfigurationError):
                await store.set_if_absent(fresh, "value", ttl=bad_ttl)
            assert await store.get(fresh) is None
        if isinstance(store, SupportsCompareAndSet):
            with pytest.raises(ConfigurationError):
                await store.compare_and_set(fresh, None, "value", ttl=bad_ttl)
            with pytest.raises(ConfigurationError):
                await store.compare_and_set(existing, "original", "replacement", ttl=bad_ttl)
            assert await store.get(fresh) is None
            assert await store.get(existing) == "original"

    # -- set_if_absent ----------------------------------------------------------------------

    async def test_set_if_absent_writes_only_once(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("claim")
        assert await store.set_if_absent(key, "first") is True
        assert await store.set_if_absent(key, "second") is False
        assert await store.get(key) == "first"

    async def test_set_if_absent_after_plain_set_fails(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("taken")
        await store.set(key, "plain")
        assert await store.set_if_absent(key, "claim") is False
        assert await store.get(key) == "plain"

    async def test_set_if_absent_after_delete_succeeds(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("freed")
        await store.set(key, "old")
        await store.delete(key)
        assert await store.set_if_absent(key, "new") is True
        assert await store.get(key) == "new"

    async def test_set_if_absent_race_has_one_winner(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key = _unique("contested")
        start = asyncio.Event()

        async def contender(index: int) -> bool:
            await start.wait()
            return await store.set_if_absent(key, f"contender {index}")

        tasks = [asyncio.ensure_future(contender(i)) for i in range(self.race_tasks)]
        await asyncio.sleep(0)
        start.set()
        results = await asyncio.gather(*tasks)
        winners = [i for i, won in enumerate(results) if won]
        assert len(winners) == 1, f"{len(winners)} winners: {winners}"
        assert await store.get(key) == f"contender {winners[0]}"

    async def test_set_if_absent_after_expiry_succeeds(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key, witness = _unique("lease"), _unique("witness")
        assert await store.set_if_absent(key, "first lease", ttl=self.short_ttl) is True
        # Never read the key before the claim: a read may clean the expired entry up and hide
        # a set_if_absent that treats an expired-but-present entry as taken.
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.set_if_absent(key, "second lease") is True
        assert await store.get(key) == "second lease"

    async def test_set_if_absent_over_expired_plain_set(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key, witness = _unique("stale"), _unique("witness")
        await store.set(key, "stale", ttl=self.short_ttl)
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.set_if_absent(key, "fresh") is True
        assert await store.get(key) == "fresh"

    async def test_set_if_absent_ttl_expires(self, store_factory: StoreFactory) -> None:
        store = self.require_set_if_absent(await store_factory())
        key, forever = _unique("lease"), _unique("forever")
        assert await store.set_if_absent(forever, "stays") is True
        assert await store.set_if_absent(key, "goes", ttl=self.short_ttl) is True
        assert await self.wait_until_expired(store, key), "entry outlived its ttl"
        assert await store.get(forever) == "stays"

    # -- compare_and_set and compare_and_delete ---------------------------------------------

    async def test_compare_and_set_on_absent_key(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key, other = _unique("new"), _unique("never")
        assert await store.compare_and_set(other, "anything", "value") is False
        assert await store.get(other) is None
        assert await store.compare_and_set(key, None, "first") is True
        assert await store.get(key) == "first"
        assert await store.compare_and_set(key, None, "second") is False
        assert await store.get(key) == "first"

    async def test_compare_and_set_on_matching_value(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("index")
        await store.set(key, "version 1")
        assert await store.compare_and_set(key, "version 1", "version 2") is True
        assert await store.get(key) == "version 2"
        # The old value no longer matches; the new one does.
        assert await store.compare_and_set(key, "version 1", "version 3") is False
        assert await store.get(key) == "version 2"
        assert await store.compare_and_set(key, "version 2", "version 2") is True
        assert await store.get(key) == "version 2"

    async def test_compare_and_set_on_mismatching_value(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("held")
        await store.set(key, "current")
        assert await store.compare_and_set(key, "stale", "lost") is False
        assert await store.compare_and_set(key, "curren", "lost") is False
        assert await store.compare_and_set(key, "current ", "lost") is False
        assert await store.compare_and_set(key, "", "lost") is False
        assert await store.compare_and_set(key, None, "lost") is False
        assert await store.get(key) == "current"

    async def test_compare_and_set_unusual_values(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("unusual")
        previous: str | None = None
        for value in UNUSUAL_VALUES:
            assert await store.compare_and_set(key, previous, value) is True, f"value {value!r}"
            assert await store.get(key) == value
            previous = value
        # The empty string is a value, not "absent".
        empty = _unique("empty")
        await store.set(empty, "")
        assert await store.compare_and_set(empty, None, "claimed") is False
        assert await store.compare_and_set(empty, "", "filled") is True
        assert await store.get(empty) == "filled"

    async def test_compare_and_set_over_expired_entry(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        stale, lapsed = _unique("stale"), _unique("lapsed")
        await store.set(stale, "old", ttl=self.short_ttl)
        await store.set(lapsed, "old", ttl=self.short_ttl)
        await self.expire_without_reading(store, stale)
        # An expired entry holds nothing: its old value no longer matches, and None does.
        assert await store.compare_and_set(stale, "old", "revived") is False
        assert await store.compare_and_set(lapsed, None, "fresh") is True
        assert await store.get(lapsed) == "fresh"
        assert await store.get(stale) is None

    async def test_compare_and_set_ttl_is_honoured(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        claimed, replaced, rescued = _unique("claimed"), _unique("replaced"), _unique("rescued")
        assert await store.compare_and_set(claimed, None, "goes", ttl=self.short_ttl) is True
        await store.set(replaced, "forever")
        assert await store.compare_and_set(replaced, "forever", "goes", ttl=self.short_ttl) is True
        await store.set(rescued, "doomed", ttl=self.short_ttl)
        assert await store.compare_and_set(rescued, "doomed", "stays") is True
        assert await store.get(claimed) in ("goes", None)
        assert await self.wait_until_expired(store, claimed), "entry outlived its ttl"
        assert await self.wait_until_expired(store, replaced), "replacement ignored its ttl"
        # The write without a ttl dropped the ttl of the entry it replaced, as set does.
        assert await store.get(rescued) == "stays"

    @pytest.mark.parametrize("start", ["absent", "present"])
    async def test_compare_and_set_race_has_one_winner(
        self, store_factory: StoreFactory, start: str
    ) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("contested")
        expected = None if start == "absent" else "shared starting point"
        if expected is not None:
            await store.set(key, expected)
        gate = asyncio.Event()

        async def contender(index: int) -> bool:
            await gate.wait()
            return await store.compare_and_set(key, expected, f"contender {index}")

        tasks = [asyncio.ensure_future(contender(i)) for i in range(self.race_tasks)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        winners = [i for i, won in enumerate(results) if won]
        assert len(winners) == 1, f"{len(winners)} winners: {winners}"
        assert await store.get(key) == f"contender {winners[0]}"

    async def test_compare_and_delete(self, store_factory: StoreFactory) -> None:
        store = self.require_compare_and_set(await store_factory())
        key, kept, missing = _unique("lease"), _unique("kept"), _unique("missing")
        await store.set(key, "mine")
        await store.set(kept, "theirs")
        assert await store.compare_and_delete(kept, "mine") is False
        assert await store.get(kept) == "theirs"
        assert await store.compare_and_delete(missing, "mine") is False
        assert await store.get(missing) is None
        assert await store.compare_and_delete(key, "mine") is True
        assert await store.get(key) is None
        assert await store.compare_and_delete(key, "mine") is False
        # A deleted key can be claimed again.
        assert await store.compare_and_set(key, None, "next") is True
        assert await store.get(key) == "next"

    async def test_compare_and_delete_leaves_expired_entry_alone(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("lapsed-lease")
        await store.set(key, "mine", ttl=self.short_ttl)
        await self.expire_without_reading(store, key)
        assert await store.compare_and_delete(key, "mine") is False
        assert await store.get(key) is None

    async def test_compare_and_delete_race_has_one_winner(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_compare_and_set(await store_factory())
        key = _unique("released")
        await store.set(key, "lease")
        gate = asyncio.Event()

        async def releaser() -> bool:
            await gate.wait()
            return await store.compare_and_delete(key, "lease")

        tasks = [asyncio.ensure_future(releaser()) for _ in range(self.race_tasks)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        assert results.count(True) == 1, f"{results.count(True)} releasers deleted the entry"
        assert await store.get(key) is None

    # -- batch ------------------------------------------------------------------------------

    async def test_batch_runs_in_order_with_each_operations_meaning(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_batch(await store_factory())
        lease, index, summary, stale = (_unique(n) for n in ("lease", "index", "summary", "stale"))
        await store.set(index, "index v1")
        await store.set(stale, "old range")
        # Take a lease, then read what it guards: as slimcache does once it has its turn.
        taken = await store.batch([SetIfAbsentOp(lease, "token-1"), GetOp(index), GetOp(summary)])
        assert taken == [True, "index v1", None]
        assert await store.batch([SetIfAbsentOp(lease, "token-2"), GetOp(lease)]) == [
            False,
            "token-1",
        ]
        # Commit: the range, the index if unchanged, stale ranges gone, the lease released.
        committed = await store.batch(
            [
                SetOp(summary, "range"),
                CompareAndSetOp(index, "index v1", "index v2"),
                DeleteOp(stale),
                CompareAndDeleteOp(lease, "token-1"),
                GetOp(index),
            ]
        )
        assert committed == [None, True, None, True, "index v2"]
        stored = [await store.get(k) for k in (summary, index, stale, lease)]
        assert stored == ["range", "index v2", None, None]
        # Conditions that do not hold leave their keys alone, and later operations still run.
        refused = await store.batch(
            [
                CompareAndSetOp(index, "index v1", "lost"),
                CompareAndSetOp(summary, None, "lost"),
                CompareAndDeleteOp(index, "index v1"),
                SetOp(stale, "written after"),
            ]
        )
        assert refused == [False, False, False, None]
        assert await store.get(index) == "index v2"
        assert await store.get(summary) == "range"
        assert await store.get(stale) == "written after"
        assert await store.batch([]) == []

    async def test_batch_unusual_keys_and_values(self, store_factory: StoreFactory) -> None:
        store = self.require_batch(await store_factory())
        values = [UNUSUAL_VALUES[i % len(UNUSUAL_VALUES)] for i in range(len(UNUSUAL_KEYS))]
        writes: list[StoreOp] = [SetOp(k, v) for k, v in zip(UNUSUAL_KEYS, values, strict=True)]
        assert await store.batch(writes) == [None] * len(writes)
        reads: list[StoreOp] = [GetOp(key) for key in UNUSUAL_KEYS]
        assert await store.batch(reads) == values
        key = UNUSUAL_KEYS[-1]
        assert await store.batch([CompareAndSetOp(key, values[-1], "next")]) == [True]
        assert await store.batch([CompareAndDeleteOp(key, "next")]) == [True]

    async def test_batch_ttls_are_honoured(self, store_factory: StoreFactory) -> None:
        store = self.require_batch(await store_factory())
        short, claimed, kept = _unique("short"), _unique("claimed"), _unique("kept")
        await store.batch(
            [
                SetOp(short, "goes", ttl=self.short_ttl),
                SetIfAbsentOp(claimed, "goes", ttl=self.short_ttl),
                SetOp(kept, "stays"),
            ]
        )
        assert await self.wait_until_expired(store, short), "batched set ignored its ttl"
        assert await self.wait_until_expired(store, claimed), "batched claim ignored its ttl"
        assert await store.get(kept) == "stays"

    async def test_batch_rejects_malformed_operations_before_running_any(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_batch(await store_factory())
        key = _unique("untouched")
        malformed: list[Any] = [
            "GET key",
            SetOp(key, 42),  # type: ignore[arg-type]
            SetOp(key, "v", ttl=-1),
            CompareAndDeleteOp(key, None),  # type: ignore[arg-type]
        ]
        for bad in malformed:
            with pytest.raises(ConfigurationError):
                await store.batch([SetOp(key, "written?"), bad])
            assert await store.get(key) is None

    async def test_batch_race_on_a_lease_has_one_winner(self, store_factory: StoreFactory) -> None:
        store = self.require_batch(await store_factory())
        lease, guarded = _unique("lease"), _unique("guarded")
        await store.set(guarded, "state")
        gate = asyncio.Event()

        async def contender(index: int) -> list[Any]:
            await gate.wait()
            return await store.batch([SetIfAbsentOp(lease, f"token {index}"), GetOp(guarded)])

        tasks = [asyncio.ensure_future(contender(i)) for i in range(self.race_tasks)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        winners = [i for i, (won, _) in enumerate(results) if won]
        assert len(winners) == 1, f"{len(winners)} winners: {winners}"
        assert all(seen == "state" for _, seen in results)
        assert await store.get(lease) == f"token {winners[0]}"

    # -- get_many ---------------------------------------------------------------------------

    async def test_get_many_keeps_order_and_reports_missing(
        self, store_factory: StoreFactory
    ) -> None:
        store = self.require_get_many(await store_factory())
        a, b, c, missing = _unique("a"), _unique("b"), _unique("c"), _unique("missing")
        await store.set(a, "A")
        await store.set(b, "B")
        await store.set(c, "C")
        assert await store.get_many([c, missing, a, b]) == ["C", None, "A", "B"]
        assert await store.get_many([b]) == ["B"]
        assert await store.get_many([missing]) == [None]
        assert await store.get_many([a, a, missing, a]) == ["A", "A", None, "A"]
        assert await store.get_many((b, c)) == ["B", "C"]

    async def test_get_many_of_nothing_is_empty(self, store_factory: StoreFactory) -> None:
        store = self.require_get_many(await store_factory())
        assert await store.get_many([]) == []

    async def test_get_many_unusual_keys(self, store_factory: StoreFactory) -> None:
        store = self.require_get_many(await store_factory())
        for index, key in enumerate(UNUSUAL_KEYS):
            await store.set(key, f"value #{index}")
        expected: list[str | None] = [f"value #{i}" for i in range(len(UNUSUAL_KEYS))]
        assert await store.get_many(list(UNUSUAL_KEYS)) == expected

    async def test_get_many_skips_expired_entries(self, store_factory: StoreFactory) -> None:
        store = self.require_get_many(await store_factory())
        kept, short, witness = _unique("kept"), _unique("short"), _unique("witness")
        await store.set(kept, "stays")
        await store.set(short, "goes", ttl=self.short_ttl)
        # get_many is the first read of the expired key, so it must do its own expiry check.
        await store.set(witness, "goes", ttl=self.short_ttl)
        assert await self.wait_until_expired(store, witness), "witness outlived its ttl"
        assert await store.get_many([short, kept]) == [None, "stays"]

    # -- isolation and lifecycle ------------------------------------------------------------

    async def test_stores_from_factory_are_isolated(self, store_factory: StoreFactory) -> None:
        first = await store_factory()
        second = await store_factory()
        key = _unique("shared-name")
        await first.set(key, "from first")
        assert await second.get(key) is None
        await second.set(key, "from second")
        assert await first.get(key) == "from first"
        assert await second.get(key) == "from second"
        await second.delete(key)
        assert await first.get(key) == "from first"
        assert await second.get(key) is None
        if isinstance(second, SupportsGetMany):
            assert await second.get_many([key]) == [None]
        if isinstance(second, SupportsSetIfAbsent):
            assert await second.set_if_absent(key, "claimed by second") is True
            assert await first.get(key) == "from first"
        if isinstance(second, SupportsCompareAndSet):
            assert await second.compare_and_set(key, "from first", "not mine") is False
            assert await second.compare_and_delete(key, "from first") is False
            assert await first.get(key) == "from first"

    async def test_aclose_is_clean_and_idempotent(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        if not isinstance(store, SupportsClose):
            pytest.skip(f"{type(store).__name__} has no aclose")
        await store.set(_unique("before-close"), "value")
        await store.aclose()
        # Factories close what they made at teardown, and user code may close twice.
        await store.aclose()

    async def test_closing_one_store_leaves_others_working(
        self, store_factory: StoreFactory
    ) -> None:
        closed = await store_factory()
        if not isinstance(closed, SupportsClose):
            pytest.skip(f"{type(closed).__name__} has no aclose")
        other = await store_factory()
        key = _unique("survivor")
        await other.set(key, "before")
        await closed.aclose()
        await other.set(key, "after")
        assert await other.get(key) == "after"

    # -- compressor end-to-end scenarios ----------------------------------------------------
    # Reserved: scenarios that drive the compressor against the store under test go here.


async def run_conformance(
    store_factory: StoreFactory,
    *,
    suite: type[StoreConformance] = StoreConformance,
    only: Sequence[str] | None = None,
) -> list[CaseResult]:
    """Run the conformance cases without pytest's runner, in the current event loop.

    Parametrized cases run once per parameter. Every store the cases make through
    ``store_factory`` is closed (when it has ``aclose``) after the case that made it.

    Args:
        store_factory: Makes a fresh, isolated store per call (see :class:`StoreFactory`).
        suite: The suite class, e.g. a subclass with tuned class attributes.
        only: Names of the cases to run (e.g. ``["test_set_then_get"]``); all when ``None``.

    Returns:
        One result per case run, in definition order; a failure's ``detail`` holds its traceback.

    Example:
        >>> results = asyncio.run(run_conformance(make_store))  # doctest: +SKIP
        >>> [r for r in results if r.outcome == "failed"]  # doctest: +SKIP
        []
    """
    instance = suite()
    results: list[CaseResult] = []
    for name, arguments in _cases(suite):
        if only is not None and name not in only:
            continue
        method: Callable[..., Awaitable[None]] = getattr(instance, name)
        label = name if not arguments else f"{name}[{arguments['_id']}]"
        made: list[Store] = []
        kwargs = {k: v for k, v in arguments.items() if k != "_id"}
        try:
            await method(_tracking(store_factory, made), **kwargs)
        except pytest.skip.Exception as skipped:
            results.append(CaseResult(label, "skipped", str(skipped)))
        except (Exception, pytest.fail.Exception):
            # A conformance failure is data for the caller, reported with its traceback.
            results.append(CaseResult(label, "failed", traceback.format_exc()))
        else:
            results.append(CaseResult(label, "passed"))
        finally:
            for store in made:
                if isinstance(store, SupportsClose):
                    await store.aclose()
    return results


def _tracking(store_factory: StoreFactory, made: list[Store]) -> StoreFactory:
    """Wrap ``store_factory`` so every store it makes is appended to ``made``."""

    async def make(**options: Any) -> Store:
        store = await store_factory(**options)
        made.append(store)
        return store

    return make


def _cases(suite: type[StoreConformance]) -> list[tuple[str, dict[str, Any]]]:
    """List ``(method name, keyword arguments)`` for each case, expanding ``parametrize``."""
    cases: list[tuple[str, dict[str, Any]]] = []
    for name in _case_names(suite):
        marks = [
            m for m in getattr(getattr(suite, name), "pytestmark", []) if m.name == "parametrize"
        ]
        if not marks:
            cases.append((name, {}))
            continue
        argname, values = marks[0].args[0], marks[0].args[1]
        ids = marks[0].kwargs.get("ids") or [repr(v) for v in values]
        cases.extend((name, {argname: v, "_id": i}) for v, i in zip(values, ids, strict=True))
    return cases


def _case_names(suite: type[StoreConformance]) -> list[str]:
    names: list[str] = []
    for klass in reversed(suite.__mro__):
        for name, value in vars(klass).items():
            if (
                name.startswith("test_")
                and inspect.iscoroutinefunction(value)
                and name not in names
            ):
                names.append(name)
    return names
