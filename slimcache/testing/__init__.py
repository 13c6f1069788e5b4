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
subclass can tune the class attributes (``short_ttl``, ``expiry_wait``, ``race_tasks``,
``large_value_size``), for instance to give a store with a coarse expiry sweep more time.

The suite is made of one part per ability, each a class of its own that can be run alone:
:class:`BasicConformance` (``get``, ``set``, ``delete``), :class:`TTLConformance`,
:class:`SetIfAbsentConformance`, :class:`CompareAndSetConformance` (with
``compare_and_delete``), :class:`BatchConformance`, :class:`GetManyConformance` and
:class:`LifecycleConformance` (isolation and ``aclose``). A store with only some abilities may
subclass just those parts (always :class:`BasicConformance`) instead of
:class:`StoreConformance`.

Without pytest's runner, :func:`run_conformance` runs the same cases in the current event loop
and returns one :class:`CaseResult` per case.

What the process remembers between requests (settings checked, store abilities, entries read,
fingerprints hashed) is listed by :func:`process_caches` and emptied by
:func:`clear_process_caches`, for tests that must start from a process with nothing remembered.
"""

# The suite is made of pytest test classes: without pytest there is nothing to run it with.
try:
    import pytest  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "slimcache.testing needs pytest: pip install pytest (and pytest-asyncio to run the suite)"
    ) from exc

from slimcache._process import ProcessCache, clear_process_caches, process_caches
from slimcache._public import publish as _publish
from slimcache.testing.base import (
    INVALID_TTLS,
    UNUSUAL_KEYS,
    UNUSUAL_VALUES,
    ConformanceBase,
    StoreFactory,
    StoreWithBatch,
    StoreWithCompareAndSet,
    StoreWithGetMany,
    StoreWithSetIfAbsent,
)
from slimcache.testing.basic import BasicConformance
from slimcache.testing.batch import BatchConformance
from slimcache.testing.compare_and_set import CompareAndSetConformance
from slimcache.testing.get_many import GetManyConformance
from slimcache.testing.lifecycle import LifecycleConformance
from slimcache.testing.runner import CaseResult, run_conformance
from slimcache.testing.set_if_absent import SetIfAbsentConformance
from slimcache.testing.suite import StoreConformance
from slimcache.testing.ttl import TTLConformance

__all__ = [
    "INVALID_TTLS",
    "UNUSUAL_KEYS",
    "UNUSUAL_VALUES",
    "BasicConformance",
    "BatchConformance",
    "CaseResult",
    "CompareAndSetConformance",
    "ConformanceBase",
    "GetManyConformance",
    "LifecycleConformance",
    "ProcessCache",
    "SetIfAbsentConformance",
    "StoreConformance",
    "StoreFactory",
    "StoreWithBatch",
    "StoreWithCompareAndSet",
    "StoreWithGetMany",
    "StoreWithSetIfAbsent",
    "TTLConformance",
    "clear_process_caches",
    "process_caches",
    "run_conformance",
]

_publish(__name__, globals(), __all__)
