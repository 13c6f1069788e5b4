"""The package keeps its layers: no cycles, nothing upward, a current picture, small parts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scripts.layers import (
    LAYERS,
    PACKAGE,
    ROOT,
    cycles,
    documented_block,
    import_graph,
    package_modules,
    rendered_block,
    unit_of,
    upward_imports,
)

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_every_module_is_on_a_layer() -> None:
    for module in package_modules():
        unit_of(module)  # raises LookupError naming the module otherwise
    units = [unit for layer in LAYERS for unit in layer.units]
    assert len(units) == len(set(units))


def test_the_import_graph_has_no_cycles() -> None:
    assert cycles(import_graph()) == []


def test_nothing_imports_upward_or_sideways() -> None:
    assert upward_imports(import_graph()) == []


def test_the_rules_catch_what_they_are_for() -> None:
    graph = {
        "slimcache.core.plan": {"slimcache.recipes.trim"},
        "slimcache.recipes.trim": {"slimcache.core.plan"},
        "slimcache.llm": {"slimcache.bench.engine"},
    }
    assert cycles(graph) == [["slimcache.core.plan", "slimcache.recipes.trim"]]
    assert upward_imports(graph) == [
        "slimcache.core.plan imports slimcache.recipes.trim (front doors)",
        "slimcache.llm imports slimcache.bench.engine (front doors)",
    ]
    with pytest.raises(LookupError, match=r"slimcache\.newcomer"):
        unit_of("slimcache.newcomer")


def test_the_picture_in_the_docs_is_current() -> None:
    assert documented_block() == rendered_block(import_graph()), (
        "docs/layers.md is stale: run python scripts/layers.py --write"
    )


def adapter_modules() -> list[Path]:
    """Every module of the adapters' packages (their tests are not part of them)."""
    return sorted((ROOT / "adapters").glob("*/slimcache_*/**/*.py"))


def test_adapters_use_only_the_public_face() -> None:
    public = {PACKAGE, f"{PACKAGE}.stores", f"{PACKAGE}.testing"}
    for path in adapter_modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module == PACKAGE or module.startswith(PACKAGE + "."):
                    assert module in public, f"{path.relative_to(ROOT)} imports {module}"


def test_no_module_or_function_is_too_long() -> None:
    too_long = []
    modules = {**package_modules(), **{str(p.relative_to(ROOT)): p for p in adapter_modules()}}
    for module, path in modules.items():
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{module}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{module}.{node.name}: {length} lines")
    assert too_long == []
