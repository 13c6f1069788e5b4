"""The shipped conformance suite, as a package of one part per ability."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import slimcache.testing
from slimcache import MemoryStore
from slimcache.stores import Store
from slimcache.testing import (
    BasicConformance,
    BatchConformance,
    CompareAndSetConformance,
    ConformanceBase,
    GetManyConformance,
    LifecycleConformance,
    SetIfAbsentConformance,
    StoreConformance,
    TTLConformance,
    run_conformance,
)

PARTS = (
    BasicConformance,
    TTLConformance,
    SetIfAbsentConformance,
    CompareAndSetConformance,
    BatchConformance,
    GetManyConformance,
    LifecycleConformance,
)


def test_importing_without_pytest_says_what_is_missing() -> None:
    code = (
        "import sys\n"
        "sys.modules['pytest'] = None  # as if it were not installed\n"
        "import slimcache, slimcache.stores\n"
        "try:\n"
        "    import slimcache.testing\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    print('imported')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "slimcache.testing needs pytest: pip install pytest" in result.stdout


def test_the_suite_is_every_part_and_each_part_its_own_cases() -> None:
    names: list[set[str]] = []
    for part in PARTS:
        assert issubclass(StoreConformance, part)
        assert issubclass(part, ConformanceBase)
        own = {n for n in vars(part) if n.startswith("test_")}
        assert own, part
        names.append(own)
    every = set().union(*names)
    assert sum(map(len, names)) == len(every)  # no case in two parts
    assert every == {n for n in dir(StoreConformance) if n.startswith("test_")}


async def _memory_store(**options: Any) -> Store:
    return MemoryStore(**options)


async def test_the_cases_run_part_by_part_in_order() -> None:
    results = await run_conformance(
        _memory_store,
        only=[
            "test_set_then_get",
            "test_batch_ttls_are_honoured",
            "test_get_many_of_nothing_is_empty",
        ],
    )
    assert [r.name for r in results] == [
        "test_set_then_get",
        "test_batch_ttls_are_honoured",
        "test_get_many_of_nothing_is_empty",
    ]
    assert {r.outcome for r in results} == {"passed"}


async def test_a_part_runs_alone() -> None:
    results = await run_conformance(_memory_store, suite=GetManyConformance)
    assert results
    assert all(r.name.startswith("test_get_many") for r in results)
    assert all(r.outcome == "passed" for r in results), [r.detail for r in results]


def test_the_public_names_report_the_package() -> None:
    assert StoreConformance.__module__ == "slimcache.testing"
    assert slimcache.testing.run_conformance.__module__ == "slimcache.testing"
