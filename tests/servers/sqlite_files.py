"""SQLite stores for the tests, each on its own new database file under ``tmp_path``.

Fixtures:
    sqlite_store_factory: ``await make(**options)`` returns a ``SQLStore`` on a new file
        (options go to :meth:`SQLStore.from_url`); every store made is closed at teardown.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest_asyncio
from slimcache_sql import SQLStore

__all__ = ["SqliteStoreFactory", "sqlite_store_factory", "sqlite_url"]


def sqlite_url(path: Path) -> str:
    """Return the ``sqlite+aiosqlite://`` URL of a database file."""
    return f"sqlite+aiosqlite:///{path}"


class SqliteStoreFactory(Protocol):
    """The callable :func:`sqlite_store_factory` yields."""

    async def __call__(self, **options: Any) -> SQLStore:
        """Open a store on a new file; ``options`` go to ``SQLStore.from_url``."""
        ...


@pytest_asyncio.fixture
async def sqlite_store_factory(tmp_path: Path) -> AsyncIterator[SqliteStoreFactory]:
    """``await make(**options)``: a ``SQLStore`` on a fresh SQLite file under ``tmp_path``."""
    stores: list[SQLStore] = []
    numbers = itertools.count()

    async def make(**options: Any) -> SQLStore:
        path = tmp_path / f"slimcache-{next(numbers)}.db"
        store = SQLStore.from_url(sqlite_url(path), **options)
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.aclose()
