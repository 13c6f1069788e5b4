"""The ``pip install`` an error message names: one that works where slimcache was installed from."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import pytest

from slimcache._install import ADAPTERS, install_command
from slimcache.stores import pip_install

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "https://example.org/slimcache.git"


def _distribution_name(folder: Path) -> str:
    found = re.search(r'^name = "([^"]+)"$', (folder / "pyproject.toml").read_text(), re.M)
    assert found is not None
    return found.group(1)


def test_the_adapter_table_matches_the_root_extras_and_the_workspace() -> None:
    requires = importlib.metadata.requires("slimcache") or []
    for extra, (name, folder, own) in ADAPTERS.items():
        assert f"{name}{own}; extra == '{extra}'" in requires
        assert _distribution_name(ROOT / folder) == name


@pytest.mark.parametrize("extra", sorted(ADAPTERS))
def test_from_this_checkout_an_adapter_is_installed_from_its_folder(extra: str) -> None:
    # This test suite runs on slimcache installed from this checkout (uv sync).
    command = pip_install(extra)
    name, folder, own = ADAPTERS[extra]
    assert command == f"pip install '{ROOT / folder}{own}'"
    assert _distribution_name(ROOT / folder) == name


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
