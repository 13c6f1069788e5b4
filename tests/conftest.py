"""The core's test wiring: ``store_factory`` and its narrower kin, parametrized over stores.

The servers and the ``<kind>_store_factory`` fixtures come from :mod:`tests.servers.fixtures`
(registered by the root ``conftest.py``). Servers start lazily: ``store_factory[redis]`` asks for
``redis_store_factory`` only when a test with that parameter runs, so ``pytest -k memory`` never
starts a database.
"""

from __future__ import annotations

import pytest

from slimcache.testing import StoreFactory

STORE_NAMES = ["memory", "sqlite", "postgres", "redis", "s3"]


# The stores the features built on the core (window memory, sliding window, compaction,
# cached_summarizer) are tested on: in-process, a real Redis and a real SQLite file.
CORE_STORE_NAMES = ["memory", "redis", "sqlite"]


@pytest.fixture(params=CORE_STORE_NAMES)
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """``await make_store()``: a fresh store on memory, a real Redis or a real SQLite file."""
    return _factory_of(request)


# The stores the window memories' edge cases are tested on: every bundled kind but S3, whose
# round trips to the emulator make tests of hundreds of calls slow.
WINDOW_STORE_NAMES = ["memory", "redis", "sqlite", "postgres"]


@pytest.fixture(params=WINDOW_STORE_NAMES)
def make_window_store(request: pytest.FixtureRequest) -> StoreFactory:
    """``await make_window_store()``: a fresh store on memory, Redis, SQLite or PostgreSQL."""
    return _factory_of(request)


@pytest.fixture(params=STORE_NAMES)
def store_factory(request: pytest.FixtureRequest) -> StoreFactory:
    """Resolve ``<name>_store_factory`` for the current parameter."""
    return _factory_of(request)


def _factory_of(request: pytest.FixtureRequest) -> StoreFactory:
    """The ``<name>_store_factory`` fixture of the current parameter."""
    factory: StoreFactory = request.getfixturevalue(f"{request.param}_store_factory")
    return factory
