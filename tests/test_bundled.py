"""The table of bundled adapters and the ``pyproject.toml`` files agree.

``pyproject.toml`` cannot import the table, so the root's extras, workspace and type-checked
folders, and each adapter's own entry points and package, are read here and held to it.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from slimcache._bundled import BUNDLED, BundledAdapter, bundled_adapter
from slimcache.stores.registry import ENTRY_POINT_GROUP

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself needs tomli before Python 3.11
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parent.parent


def _pyproject(folder: Path) -> dict[str, Any]:
    with (folder / "pyproject.toml").open("rb") as file:
        found: dict[str, Any] = tomllib.load(file)
    return found


ROOT_PROJECT = _pyproject(ROOT)


def _distributions() -> Iterator[tuple[str, list[BundledAdapter]]]:
    """Each bundled distribution, with the rows (extras) that install it."""
    for distribution in dict.fromkeys(row.distribution for row in BUNDLED):
        yield distribution, [row for row in BUNDLED if row.distribution == distribution]


def test_the_table_has_one_row_per_extra_and_scheme() -> None:
    extras = [row.extra for row in BUNDLED]
    schemes = [scheme for row in BUNDLED for scheme in (*row.schemes, *row.driverless)]
    assert len(extras) == len(set(extras))
    assert len(schemes) == len(set(schemes))
    assert all(row.schemes for row in BUNDLED)
    assert all(bundled_adapter(row.extra) is row for row in BUNDLED)
    assert bundled_adapter("otel") is None


def test_each_row_is_an_extra_of_slimcache() -> None:
    extras = ROOT_PROJECT["project"]["optional-dependencies"]
    for row in BUNDLED:
        assert extras.get(row.extra) == [row.requirement], (
            f"pyproject.toml: the {row.extra} extra is not [{row.requirement!r}] as "
            "slimcache/_bundled.py says"
        )
    # The metadata of the installed slimcache, built from that file, says the same.
    requires = importlib.metadata.requires("slimcache") or []
    for row in BUNDLED:
        assert f"{row.requirement}; extra == '{row.extra}'" in requires


def test_the_all_extra_installs_every_row() -> None:
    listed: dict[str, set[str]] = {}
    for line in ROOT_PROJECT["project"]["optional-dependencies"]["all"]:
        requirement = Requirement(line)
        listed.setdefault(requirement.name, set()).update(requirement.extras)
    for row in BUNDLED:
        assert row.distribution in listed, f"pyproject.toml: all lacks {row.distribution}"
        if row.own_extra:
            assert row.own_extra in listed[row.distribution], (
                f"pyproject.toml: all lacks {row.distribution}[{row.own_extra}]"
            )


def test_each_adapter_folder_is_a_row_and_a_workspace_member() -> None:
    uv = ROOT_PROJECT["tool"]["uv"]
    on_disk = {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("adapters/*/pyproject.toml")}
    assert on_disk == {row.folder for row in BUNDLED}
    for row in BUNDLED:
        assert any(fnmatch(row.folder, member) for member in uv["workspace"]["members"]), (
            f"pyproject.toml: {row.folder} is no member of the workspace"
        )
        assert uv["sources"].get(row.distribution) == {"workspace": True}, (
            f"pyproject.toml: {row.distribution} is not taken from the workspace"
        )


def test_each_adapter_package_is_type_checked() -> None:
    mypy = ROOT_PROJECT["tool"]["mypy"]
    for row in BUNDLED:
        assert f"{row.folder}/{row.module}" in mypy["files"]
        assert f"{row.folder}/tests" in mypy["files"]
        assert row.folder in mypy["mypy_path"].split(":")


@pytest.mark.parametrize(("distribution", "rows"), list(_distributions()))
def test_each_adapter_registers_the_schemes_of_its_rows(
    distribution: str, rows: list[BundledAdapter]
) -> None:
    (folder,) = {row.folder for row in rows}
    (module,) = {row.module for row in rows}
    project = _pyproject(ROOT / folder)
    where = f"{folder}/pyproject.toml"
    assert project["project"]["name"] == distribution, where
    registered = project["project"]["entry-points"][ENTRY_POINT_GROUP]
    expected = {scheme: row.entry_point for row in rows for scheme in row.schemes}
    assert registered == expected, f"{where}: the {ENTRY_POINT_GROUP} entry points"
    own_extras = project["project"].get("optional-dependencies", {})
    for row in rows:
        assert not row.own_extra or row.own_extra in own_extras, (
            f"{where} has no extra {row.own_extra}"
        )
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [module], where
    assert (ROOT / folder / module / "__init__.py").is_file()


def test_the_sql_adapter_names_the_rows_extras() -> None:
    # The SQL store names the extra of a driver it cannot import, from its own table.
    from slimcache_sql._url import _DRIVERS

    rows = [row for row in BUNDLED if row.module == "slimcache_sql"]
    assert {scheme: row.extra for row in rows for scheme in row.schemes} == _DRIVERS
