"""SQLite files for the tests: the URL of a database file.

Its stores: ``sqlite_store_factory`` (:mod:`tests.servers.store_factories`), each on a new
file under ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["sqlite_url"]


def sqlite_url(path: Path) -> str:
    """Return the ``sqlite+aiosqlite://`` URL of a database file."""
    return f"sqlite+aiosqlite:///{path}"
