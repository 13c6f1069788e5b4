"""``conforms``: a store's abilities, looked up once per type, answer as ``isinstance`` does;
``expires_by_itself``: whose clock times a store's expiry."""

from __future__ import annotations

import types
from typing import Any

import pytest

from slimcache import MemoryStore, SummarizeCompressor
from slimcache.stores import (
    Store,
    SupportsBatch,
    SupportsClose,
    SupportsCompareAndSet,
    SupportsGetMany,
    SupportsOwnExpiry,
    SupportsSetIfAbsent,
    expires_by_itself,
)
from slimcache.stores.protocol import conforms
from tests.fakes import CountingStore, RecordingSummarizer, chat

ABILITIES = [
    Store,
    SupportsSetIfAbsent,
    SupportsGetMany,
    SupportsCompareAndSet,
    SupportsBatch,
    SupportsClose,
]


async def _get(key: str) -> str | None:
    return None


async def _set(key: str, value: str, *, ttl: float | None = None) -> None:
    return None


class Forwarding:
    """Finds its methods through ``__getattr__``, as a proxy does."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Partial:
    """A store type some of whose instances get ``get_many`` as an attribute of their own."""

    get = staticmethod(_get)
    set = staticmethod(_set)
    delete = staticmethod(_get)


def _subjects() -> list[Any]:
    given = Partial()
    given.get_many = _get  # type: ignore[attr-defined]
    return [
        MemoryStore(),
        CountingStore(),
        types.SimpleNamespace(get=_get, set=_set, delete=_get),
        types.SimpleNamespace(get=_get, set=None, delete=_get),
        Partial(),
        given,
        Forwarding(MemoryStore()),
        Forwarding(CountingStore()),
        object(),
        "redis://localhost",
    ]


@pytest.mark.parametrize("ability", ABILITIES, ids=lambda a: a.__name__)
def test_conforms_answers_as_isinstance(ability: type) -> None:
    for _ in range(2):  # once to look the type up, once from what was looked up
        for subject in _subjects():
            assert conforms(subject, ability) == isinstance(subject, ability), subject


async def test_a_store_given_its_methods_per_instance_is_used_by_what_it_has() -> None:
    # The same type with and without get_many: each compressor uses what its store has.
    plain, given = Partial(), Partial()
    reads: list[list[str]] = []

    async def get_many(keys: list[str]) -> list[str | None]:
        reads.append(list(keys))
        return [None] * len(keys)

    given.get_many = get_many  # type: ignore[attr-defined]
    for store in (plain, given):
        compressor = SummarizeCompressor(RecordingSummarizer(), store, lock_wait=0)  # type: ignore[arg-type]
        await compressor.compress(chat(30), thread_id="t")
    # The index and the range read again before summarizing: one get_many, by the store that
    # has it; the other store of the same type was read key by key.
    assert reads == [["thread_t:index", "thread_t:summary:1-20"]]


class Declares:
    """A store type stating whose clock times its expiry (``expiry_clock``)."""

    def __init__(self, clock: Any) -> None:
        self.expiry_clock = clock


class BrokenDeclaration:
    @property
    def expiry_clock(self) -> str:
        raise RuntimeError("not connected")


def test_a_store_expires_by_itself_only_when_it_says_so_plainly() -> None:
    from slimcache_redis import RedisStore
    from slimcache_s3 import S3Store
    from slimcache_sql import SQLStore

    assert expires_by_itself(MemoryStore())
    assert (RedisStore.expiry_clock, SQLStore.expiry_clock) == ("store", "store")
    assert S3Store.expiry_clock == "writer"
    assert expires_by_itself(Declares("store"))
    assert isinstance(Declares("store"), SupportsOwnExpiry)
    # A user's store that does not say, or says anything else, counts as the writer's clock.
    for subject in (
        CountingStore(),
        Declares("writer"),
        Declares("STORE"),
        Declares(True),
        Declares(None),
        BrokenDeclaration(),
        object(),
    ):
        assert not expires_by_itself(subject), subject
