"""The ``pip install`` an error message names: one that works where slimcache was installed from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slimcache._bundled import BUNDLED, BundledAdapter
from slimcache._install import install_command
from slimcache.stores import pip_install

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "https://example.org/slimcache.git"


@pytest.mark.parametrize("row", BUNDLED, ids=lambda row: row.extra)
def test_from_this_checkout_an_adapter_is_installed_from_its_folder(row: BundledAdapter) -> None:
    # This test suite runs on slimcache installed from this checkout (uv sync).
    assert pip_install(row.extra) == f"pip install '{ROOT / row.folder}{row.own_extra_suffix}'"


def test_from_this_checkout_another_extra_is_the_checkout_with_it() -> None:
    assert pip_install("otel") == f"pip install '{ROOT}[otel]'"


@pytest.mark.parametrize(
    ("direct_url", "redis", "otel"),
    [
        (None, "pip install 'slimcache[redis]'", "pip install 'slimcache[otel]'"),
        (
            {"url": REPOSITORY, "vcs_info": {"vcs": "git", "commit_id": "0a1b2c"}},
            f"pip install 'slimcache-redis @ git+{REPOSITORY}@0a1b2c#subdirectory=adapters/redis'",
            f"pip install 'slimcache[otel] @ git+{REPOSITORY}@0a1b2c'",
        ),
        (  # a wheel file: where the adapters are is not known, the index form is all there is
            {"url": "file:///tmp/slimcache-0.2.0-py3-none-any.whl", "archive_info": {}},
            "pip install 'slimcache[redis]'",
            "pip install 'slimcache[otel]'",
        ),
        (  # a checkout since deleted
            {"url": "file:///nonexistent/slimcache", "dir_info": {}},
            "pip install 'slimcache[redis]'",
            "pip install 'slimcache[otel]'",
        ),
    ],
)
def test_each_kind_of_install_gets_its_command(
    direct_url: dict[str, Any] | None, redis: str, otel: str
) -> None:
    assert install_command("redis", direct_url) == redis
    assert install_command("otel", direct_url) == otel


def test_a_checkout_elsewhere_names_its_own_folders(tmp_path: Path) -> None:
    checkout = {"url": tmp_path.as_uri(), "dir_info": {"editable": False}}
    assert install_command("postgres", checkout) == (
        f"pip install '{tmp_path / 'adapters' / 'sql'}[postgres]'"
    )
