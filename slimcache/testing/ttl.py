"""Expiry: ``set(..., ttl=...)``, which every store has."""

from __future__ import annotations

from typing import cast

import pytest

from slimcache._exceptions import ConfigurationError
from slimcache.stores.protocol import (
    SupportsCompareAndSet,
    SupportsSetIfAbsent,
)
from slimcache.testing.base import (
    INVALID_TTLS,
    ConformanceBase,
    StoreFactory,
    _unique,
)

__all__ = ["TTLConformance"]


@pytest.mark.asyncio
class TTLConformance(ConformanceBase):
    """Cases of expiry: entries with a TTL go away, others stay, and a bad TTL is refused."""

    async def test_entry_with_ttl_is_readable_before_expiry(
        self, store_factory: StoreFactory
    ) -> None:
        store = await store_factory()
        key = _unique("long-lived")
        await store.set(key, "value", ttl=3600)
        assert await store.get(key) == "value"

    async def test_expiry_clock_when_declared_is_store_or_writer(
        self, store_factory: StoreFactory
    ) -> None:
        # Any other value counts as the writer's clock: a misspelt "store" would silently lose
        # what the declaration was meant to give (see SupportsOwnExpiry).
        store = await store_factory()
        declared = getattr(store, "expiry_clock", None)
        assert declared in (None, "store", "writer"), (
            f"expiry_clock must be 'store' or 'writer', got {declared!r}"
        )

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
