"""Renamed modules and moved names still import under their old names, with a warning that
points at the import and names where they live now."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

import slimcache
from slimcache import _renamed

OLD_MODULES = sorted(_renamed.MODULES)
OLD_NAMES = sorted((module, name) for module, names in _renamed.NAMES.items() for name in names)


@pytest.fixture
def forget_old_modules() -> Iterator[None]:
    """Make the next import of an old name go through the import system again."""

    def forget() -> None:
        for old in OLD_MODULES:
            sys.modules.pop(old, None)
            parent, _, child = old.rpartition(".")
            if child in vars(sys.modules[parent]):
                delattr(sys.modules[parent], child)

    forget()
    yield
    forget()


@pytest.mark.usefixtures("forget_old_modules")
@pytest.mark.parametrize("old", OLD_MODULES)
def test_an_old_module_name_imports_the_new_module_with_a_warning(old: str) -> None:
    new = _renamed.MODULES[old]
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated: it is now {new}$") as w:
        module = importlib.import_module(old)
    assert w[0].filename == __file__
    assert module is importlib.import_module(new)
    assert module.__name__ == new
    # The module keeps its own spec (reloading it, pickling by reference need it).
    assert module.__spec__ is not None
    assert module.__spec__.name == new


@pytest.mark.usefixtures("forget_old_modules")
def test_the_import_statements_of_an_old_module_name_work() -> None:
    with pytest.warns(DeprecationWarning, match="slimcache.core.turns is deprecated") as w:
        import slimcache.core.turns as turns  # type: ignore[import-not-found]
    assert w[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="slimcache.core.chunks is deprecated"):
        from slimcache.core.chunks import InputBound  # type: ignore[import-not-found]
    with pytest.warns(DeprecationWarning, match="slimcache.recipes.wrap_history is deprecated"):
        from slimcache.recipes import wrap_history  # type: ignore[attr-defined]
    from slimcache.core.input_bound import InputBound as bound
    from slimcache.core.lease_wait import take_turn
    from slimcache.recipes.summarizer_ranges import WrapHistory

    assert turns.take_turn is take_turn
    assert InputBound is bound
    assert wrap_history.WrapHistory is WrapHistory


@pytest.mark.parametrize(("module", "name"), OLD_NAMES)
def test_a_moved_name_still_imports_from_its_old_module_with_a_warning(
    module: str, name: str
) -> None:
    home, new = _renamed.NAMES[module][name]
    old_module = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"^{module}\.{name} is deprecated") as w:
        value = getattr(old_module, name)
    assert w[0].filename == __file__
    assert str(w[0].message).endswith(f"it is now {home}.{new}")
    assert value is getattr(importlib.import_module(home), new)


def test_the_from_import_of_a_moved_name_warns_at_the_import() -> None:
    with pytest.warns(DeprecationWarning, match="thread_cache.StoreIO is deprecated") as w:
        from slimcache.core.thread_cache import StoreIO  # type: ignore[attr-defined]
    assert w[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="producing.Work is deprecated"):
        from slimcache.core.producing import Work  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="compaction.ToolError is deprecated"):
        from slimcache.recipes.compaction import ToolError  # type: ignore[attr-defined]
    from slimcache.core.request import Work as work
    from slimcache.core.store_io import StoreIO as store_io

    assert (StoreIO, Work, ToolError) == (store_io, work, slimcache.ToolRefusal)


def test_any_other_name_of_such_a_module_is_an_attribute_error() -> None:
    import slimcache.core.thread_cache as thread_cache

    with pytest.raises(AttributeError, match=r"'slimcache\.core\.thread_cache' has no attribute"):
        thread_cache.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_importing_slimcache_installs_the_finder_once() -> None:
    finders = [f for f in sys.meta_path if isinstance(f, type(_renamed._FINDER))]
    assert finders == [_renamed._FINDER]
    _renamed.install()
    assert sys.meta_path.count(_renamed._FINDER) == 1


def test_an_old_module_name_warns_in_a_fresh_process_and_a_new_one_does_not() -> None:
    def run(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
            capture_output=True,
            text=True,
            check=False,
        )

    old = run("import slimcache.recipes.conversation_state")
    assert old.returncode != 0
    assert "slimcache.recipes.conversation_state is deprecated" in old.stderr
    assert run("import slimcache.recipes.compressor_snapshot").returncode == 0
    unknown = run("import slimcache.core.no_such_module")
    assert "No module named 'slimcache.core.no_such_module'" in unknown.stderr


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("resolve_policies", "slimcache.core.settings.groups"),
        ("check_store", "slimcache.core.settings.checks"),
    ],
)
def test_the_settings_names_still_import_from_the_package_with_a_warning(
    name: str, home: str
) -> None:
    import slimcache.core.settings

    with pytest.warns(DeprecationWarning, match=f"it is now {home}.{name}") as caught:
        found = getattr(slimcache.core.settings, name)
    assert caught[0].filename == __file__
    assert found is getattr(importlib.import_module(home), name)
    with pytest.raises(AttributeError):
        slimcache.core.settings.nothing_by_this_name  # type: ignore[attr-defined]  # noqa: B018
