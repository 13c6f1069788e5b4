"""SQLite files for the tests: the URL of a database file, and a file another connection holds.

Its stores: ``sqlite_store_factory`` (:mod:`tests.servers.store_factories`), each on a new
file under ``tmp_path``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["held_file", "sqlite_url"]


def sqlite_url(path: Path) -> str:
    """Return the ``sqlite+aiosqlite://`` URL of a database file."""
    return f"sqlite+aiosqlite:///{path}"


@contextmanager
def held_file(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold ``path`` (a new file) in an exclusive transaction, as another process would.

    Yields the holding connection: ``holder.execute("COMMIT")`` lets go of the file early.
    Whatever is still held is rolled back at the end.
    """
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE other (x INTEGER)")
        yield holder
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
