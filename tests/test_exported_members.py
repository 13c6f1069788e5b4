"""The public API is one small, curated, sorted ``__all__``; names moved out of it still import,
with a warning naming their new home."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pickle
import subprocess
import sys
import traceback
import typing
import warnings
from pathlib import Path

import pytest

import slimcache
import slimcache.messages
import slimcache.stores
import slimcache.types

MOVED = sorted({**slimcache._MOVED, **slimcache._WITHDRAWN})

# Every public module, and the modules its names may report as their own.
PUBLIC_MODULES = [
    "slimcache",
    "slimcache.langchain",
    "slimcache.llm",
    "slimcache.messages",
    "slimcache.stores",
    "slimcache.sync",
    "slimcache.telemetry",
    "slimcache.testing",
    "slimcache.types",
]


def test_all_is_sorted_and_complete() -> None:
    exported = slimcache.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper() or "_" not in n, n)) or (
        exported == sorted(exported)
    )
    public = {n for n in dir(slimcache) if not n.startswith("_")} | {"__version__"}
    modules = {n for n in public if type(getattr(slimcache, n)).__name__ == "module"}
    assert set(exported) == public - modules
    for name in exported:
        assert getattr(slimcache, name) is not None


def test_the_top_level_is_small() -> None:
    assert len(slimcache.__all__) <= 60


def test_stores_all_is_sorted_and_complete() -> None:
    exported = slimcache.stores.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper() or "_" not in n, n))
    for name in exported:
        assert getattr(slimcache.stores, name) is not None


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_name_still_imports_with_a_warning_naming_its_home(name: str) -> None:
    home = {**slimcache._MOVED, **slimcache._WITHDRAWN}[name]
    with pytest.warns(DeprecationWarning, match=rf"slimcache\.{name}\b.*{home}") as caught:
        value = getattr(slimcache, name)
    assert caught[0].filename == __file__  # the warning points at the importer
    assert value is getattr(importlib.import_module(home), name)
    assert name not in slimcache.__all__
    assert name not in dir(slimcache)


def test_a_renamed_name_still_imports_with_a_warning_naming_the_new_name() -> None:
    assert slimcache._RENAMED == {"ToolError": "ToolRefusal"}
    with pytest.warns(DeprecationWarning, match=r"slimcache\.ToolError .*slimcache\.ToolRefusal"):
        value = slimcache.ToolError
    assert value is slimcache.ToolRefusal
    assert "ToolError" not in slimcache.__all__
    assert "ToolError" not in dir(slimcache)


def _type_checking_names() -> dict[str, tuple[str, str]]:
    """What the ``TYPE_CHECKING`` block of ``slimcache/__init__.py`` declares: for each name,
    the module it is imported from and its name there (``"slimcache"`` for an alias)."""
    tree = ast.parse(Path(slimcache.__file__).read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING"
    )
    declared: dict[str, tuple[str, str]] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert node.module is not None
                declared[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Assign):
            (target,) = node.targets
            assert isinstance(target, ast.Name)
            assert isinstance(node.value, ast.Name)
            declared[target.id] = ("slimcache", node.value.id)
    return declared


def test_the_names_typed_for_checkers_are_the_deprecated_names() -> None:
    expected = {name: (home, name) for name, home in slimcache._MOVED.items()}
    expected |= {name: (home, name) for name, home in slimcache._WITHDRAWN.items()}
    expected |= {old: ("slimcache", new) for old, new in slimcache._RENAMED.items()}
    assert _type_checking_names() == expected


def test_a_moved_name_warns_on_from_import() -> None:
    with pytest.warns(DeprecationWarning, match="import it from slimcache.stores"):
        from slimcache import GetOp
    assert GetOp is slimcache.stores.GetOp


def test_fingerprint_chain_is_no_longer_public() -> None:
    with pytest.warns(DeprecationWarning, match="no longer public"):
        slimcache.fingerprint_chain  # noqa: B018


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        slimcache.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ImportError):
        from slimcache import no_such_name  # type: ignore[attr-defined]  # noqa: F401


def test_dir_lists_every_public_name_and_nothing_that_warns() -> None:
    listed = dir(slimcache)
    assert listed == sorted(listed)
    assert set(slimcache.__all__) <= set(listed)
    assert {"stores", "__version__", "__doc__"} <= set(listed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in listed:
            getattr(slimcache, name)


def _exported(module: typing.Any) -> list[tuple[str, typing.Any]]:
    return [(name, getattr(module, name)) for name in module.__all__]


def _sort_key(name: str) -> tuple[bool, str]:
    return (not name.isupper() or "_" not in name, name)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_exports_a_sorted_list_of_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(set(exported)) == len(exported)
    if name != "slimcache":  # its own order is checked above
        assert exported == sorted(exported, key=_sort_key)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for exported_name in exported:
            getattr(module, exported_name)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_exported_classes_and_functions_report_a_public_module(name: str) -> None:
    module = importlib.import_module(name)
    for exported_name, value in _exported(module):
        if typing.get_origin(value) is not None:
            continue  # a type alias (Python 3.10 calls list[int] a type): it has no module
        if isinstance(value, type) or hasattr(value, "__code__"):
            assert value.__module__ in PUBLIC_MODULES, (name, exported_name, value.__module__)


def test_types_is_the_home_of_the_second_rank_names() -> None:
    moved_here = {n for n, home in slimcache._MOVED.items() if home == "slimcache.types"}
    assert moved_here <= set(slimcache.types.__all__)
    for cls in (
        slimcache.types.WindowStats,
        slimcache.types.ConversationStats,
        slimcache.types.SummarizerReport,
    ):
        assert cls.__module__ == "slimcache.types"
        assert repr(cls) == f"<class 'slimcache.types.{cls.__name__}'>"
        typing.get_type_hints(cls)
    stats = slimcache.types.WindowStats(total_messages=3)
    assert pickle.loads(pickle.dumps(stats)) == stats
    assert typing.get_args(slimcache.types.Outcome)[:2] == ("unchanged", "hit")
    assert slimcache.types.NEW_SESSION_TOOL == "new_session"


def test_messages_exports_the_message_vocabulary_and_nothing_internal() -> None:
    assert set(slimcache.messages.__all__) == {
        "Conversation",
        "Message",
        "TiktokenCounter",
        "TokenCounter",
        "approx_tokens",
        "count_message_tokens",
        "render_transcript",
        "unwrap_messages",
        "wrap_messages",
    }
    # The internal helpers the engine imports from the package stay where they were.
    assert slimcache.messages.check_messages.__module__ == "slimcache.messages.checks"
    assert slimcache.messages.render_transcript.__module__ == "slimcache.messages"
    assert slimcache.messages.approx_tokens is slimcache.approx_tokens


@pytest.mark.parametrize(("module", "home"), [(slimcache, "slimcache"), (slimcache.stores, None)])
def test_exported_classes_and_functions_name_the_public_module(
    module: typing.Any, home: str | None
) -> None:
    for name, value in _exported(module):
        if isinstance(value, type) or (callable(value) and hasattr(value, "__code__")):
            if value.__module__.startswith(("typing", "collections")):
                continue  # an alias of a typing construct has no module of its own
            expected = {"slimcache", "slimcache.stores"} if home is None else {home}
            assert value.__module__ in expected, name
    # The names of both faces report the one they are imported from.
    assert slimcache.stores.GetOp.__module__ == "slimcache.stores"
    assert slimcache.stores.run_bounded.__module__ == "slimcache.stores"
    assert slimcache.Store.__module__ == "slimcache"
    assert slimcache.approx_tokens.__module__ == "slimcache"


@pytest.mark.parametrize("module", [slimcache, slimcache.stores])
def test_type_hints_of_exported_classes_still_resolve(module: typing.Any) -> None:
    for _, value in _exported(module):
        if isinstance(value, type) or hasattr(value, "__code__"):
            typing.get_type_hints(value)


def test_reprs_and_pickles_use_the_public_names() -> None:
    keep = slimcache.KeepMessages(3)
    assert repr(keep) == "KeepMessages(messages=3)"
    assert repr(slimcache.KeepMessages) == "<class 'slimcache.KeepMessages'>"
    assert dataclasses.is_dataclass(keep)
    for value in (
        keep,
        slimcache.KeepTokens(100),
        slimcache.MessageThreshold(10),
        slimcache.stores.GetOp("k"),
        slimcache.stores.SetOp("k", "v", ttl=None),
    ):
        assert pickle.loads(pickle.dumps(value)) == value
    assert pickle.loads(pickle.dumps(slimcache.approx_tokens)) is slimcache.approx_tokens
    error = pickle.loads(pickle.dumps(slimcache.ConfigurationError("bad")))
    assert type(error) is slimcache.ConfigurationError


def test_a_traceback_names_the_public_error() -> None:
    try:
        raise slimcache.ConfigurationError("bad option")
    except slimcache.ConfigurationError as exc:
        text = "".join(traceback.format_exception(exc))
    assert "slimcache.ConfigurationError: bad option" in text


def test_importing_slimcache_warns_about_nothing() -> None:
    code = (
        "import slimcache, slimcache.stores, slimcache.adapters, slimcache.types, "
        "slimcache.messages, slimcache.llm, slimcache.sync, slimcache.testing"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
