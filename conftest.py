"""What every test tree of the repository shares: the core's (``tests/``) and each adapter's
(``adapters/<name>/tests/``), all run by one ``uv run pytest`` from here.

The real servers and the store factories are one pytest plugin, :mod:`tests.servers.fixtures`,
registered here so that every tree sees the same session-wide servers. The adapters' test
folders are not packages: pytest imports their modules by file name, so each test module there
needs a name no other one has (``test_redis.py``, ``test_sql.py``, ...). Every test starts
from a process that remembers nothing (:func:`slimcache.testing.clear_process_caches`).
"""

from __future__ import annotations

import pytest

from slimcache.testing import clear_process_caches

pytest_plugins = ["tests.servers.fixtures"]


@pytest.fixture(autouse=True)
def nothing_remembered() -> None:
    """Every test starts from a process that remembers nothing of the tests before it."""
    clear_process_caches()
