"""What every part of the conformance suite shares: the store factory, typed abilities, test
data and the helpers of :class:`ConformanceBase`."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable
from typing import Any, Protocol, cast, runtime_checkable

import pytest

from slimcache.stores.protocol import (
    Store,
    SupportsBatch,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsSetIfAbsent,
)

__all__ = [
    "INVALID_TTLS",
    "UNUSUAL_KEYS",
    "UNUSUAL_VALUES",
    "ConformanceBase",
    "StoreFactory",
    "StoreWithBatch",
    "StoreWithCompareAndSet",
    "StoreWithGetMany",
    "StoreWithSetIfAbsent",
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


class ConformanceBase:
    """The settings and helpers every part of the suite uses; a part adds its test cases.

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
