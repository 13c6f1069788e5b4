"""The public API is one small, curated, sorted ``__all__``, and each public module exports a
sorted list of names that report a public module."""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import subprocess
import sys
import traceback
import typing
import warnings

import pytest

import slimcache
import slimcache.messages
import slimcache.stores
import slimcache.types

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
        "import slimcache, slimcache.stores, slimcache.types, "
        "slimcache.messages, slimcache.llm, slimcache.sync, slimcache.testing"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
