"""The in-memory store's fixture: ``memory_store_factory`` makes :class:`~slimcache.MemoryStore` s.

Every store is its own dict, so stores from one factory are isolated without any prefix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest_asyncio

from slimcache import MemoryStore

__all__ = ["memory_store_factory"]


@pytest_asyncio.fixture
async def memory_store_factory() -> AsyncIterator[Callable[..., Awaitable[MemoryStore]]]:
    """Yield ``make(**options)`` returning a new ``MemoryStore(**options)``; close all after."""
    made: list[MemoryStore] = []

    async def make(**options: Any) -> MemoryStore:
        store = MemoryStore(**options)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()
