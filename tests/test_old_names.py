"""Names no release ever held are not served: the modules and names that moved before the first
release import only from where they live, and importing slimcache adds no finder of its own."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import slimcache

# Where modules lived before they took their names.
OLD_MODULES = [
    "slimcache.adapters",
    "slimcache.core.blueprint",
    "slimcache.core.chunks",
    "slimcache.core.setting_checks",
    "slimcache.core.telemetry",
    "slimcache.core.turns",
    "slimcache.recipes.conversation_state",
    "slimcache.recipes.wrap_history",
]

# Names that left a module that is still there.
OLD_NAMES = [
    ("slimcache", "GetOp"),
    ("slimcache", "Outcome"),
    ("slimcache", "ToolError"),
    ("slimcache", "count_message_tokens"),
    ("slimcache", "fingerprint_chain"),
    ("slimcache.core.producing", "Work"),
    ("slimcache.core.settings", "Timeouts"),
    ("slimcache.core.settings", "check_store"),
    ("slimcache.core.thread_cache", "StoreIO"),
    ("slimcache.recipes.compaction", "ToolError"),
    ("slimcache.recipes.compaction_tool", "ToolError"),
]


@pytest.mark.parametrize("old", OLD_MODULES)
def test_an_old_module_path_does_not_import(old: str) -> None:
    with pytest.raises(ModuleNotFoundError, match=rf"^No module named '{re.escape(old)}'$"):
        importlib.import_module(old)


@pytest.mark.parametrize(("module", "name"), OLD_NAMES)
def test_an_old_name_does_not_import_from_its_old_module(module: str, name: str) -> None:
    with pytest.raises(ImportError, match=rf"^cannot import name '{name}' from '{module}'"):
        exec(f"from {module} import {name}", {})
    assert not hasattr(importlib.import_module(module), name)


def test_a_name_of_slimcache_types_asked_of_slimcache_is_refused_naming_its_home() -> None:
    with pytest.raises(AttributeError, match=r"'Outcome'; it is slimcache\.types\.Outcome$"):
        slimcache.Outcome  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match=r"^module 'slimcache' has no attribute 'GetOp'$"):
        slimcache.GetOp  # type: ignore[attr-defined]  # noqa: B018


def test_the_rename_layer_is_gone() -> None:
    package = Path(slimcache.__file__).parent
    assert not (package / "_renamed.py").exists()
    assert importlib.util.find_spec("slimcache._renamed") is None


def test_importing_slimcache_adds_nothing_to_the_import_system() -> None:
    code = (
        "import sys\n"
        "before = list(sys.meta_path)\n"
        "import slimcache, slimcache.core.settings, slimcache.stores, slimcache.types\n"
        "print([repr(finder) for finder in sys.meta_path if finder not in before])\n"
        "print(len(sys.meta_path) - len(before))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n") == ["[]", "0", ""]
