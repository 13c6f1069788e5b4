"""The package keeps its layers: no cycles, nothing upward, a current picture; and its parts
are sized by concern: a module past 600 lines says in its docstring why it holds together, none
is past 800 lines, and no function is past 80."""

from __future__ import annotations

import ast
import re
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

REASONED_MODULE_LINES = 600
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
WHY = "Why one module:"


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


def says_why_it_is_one_module(docstring: str | None) -> bool:
    """Whether a module docstring has a paragraph beginning "Why one module:" and a reason."""
    paragraphs = re.split(r"\n\s*\n", docstring or "")
    return any(
        p.strip().startswith(WHY) and p.strip().removeprefix(WHY).strip() for p in paragraphs
    )


def size_problems(name: str, source: str) -> list[str]:
    """How one module (``name``, its file) breaks the size rules, if it does."""
    problems = []
    tree = ast.parse(source)
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        problems.append(
            f"{name}: {lines} lines; no module is past {MAX_MODULE_LINES} lines: "
            "split it by concern"
        )
    elif lines > REASONED_MODULE_LINES and not says_why_it_is_one_module(ast.get_docstring(tree)):
        problems.append(
            f"{name}: {lines} lines; a module past {REASONED_MODULE_LINES} lines holds one "
            f"concern and says why it holds together in a paragraph of its docstring beginning "
            f"{WHY!r}: add one, or split it by concern"
        )
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(
                    f"{name}: {node.name} is {length} lines; no function is past "
                    f"{MAX_FUNCTION_LINES} lines"
                )
    return problems


def test_modules_are_sized_by_concern() -> None:
    paths = [*package_modules().values(), *adapter_modules()]
    assert paths
    problems = [
        problem
        for path in paths
        for problem in size_problems(str(path.relative_to(ROOT)), path.read_text())
    ]
    assert problems == []


def _module(lines: int, docstring: str = "") -> str:
    """The source of a module of ``lines`` lines, with ``docstring`` if given."""
    head = f'"""{docstring}"""\n' if docstring else ""
    body = lines - len(head.splitlines())
    return head + "x = 0\n" * body


def test_the_size_rules_catch_what_they_are_for() -> None:
    reason = "Cache I/O.\n\nWhy one module: the reads and writes share one retry loop.\n"
    assert size_problems("m.py", _module(REASONED_MODULE_LINES)) == []
    assert size_problems("m.py", _module(REASONED_MODULE_LINES + 1, reason)) == []
    assert size_problems("m.py", _module(MAX_MODULE_LINES, reason)) == []
    for unreasoned in (
        "",
        "Cache I/O.",
        "Cache I/O. Why one module: said in passing, not as a paragraph of its own.",
        "Cache I/O.\n\nWhy one module:\n",
    ):
        (problem,) = size_problems("slimcache/m.py", _module(REASONED_MODULE_LINES + 1, unreasoned))
        assert problem.startswith("slimcache/m.py: 601 lines; a module past 600 lines")
        assert "'Why one module:'" in problem
    (problem,) = size_problems("slimcache/m.py", _module(MAX_MODULE_LINES + 1, reason))
    assert problem == (
        "slimcache/m.py: 801 lines; no module is past 800 lines: split it by concern"
    )
    function = "def f() -> None:\n" + "    pass\n" * MAX_FUNCTION_LINES
    assert size_problems("m.py", function) == ["m.py: f is 81 lines; no function is past 80 lines"]
