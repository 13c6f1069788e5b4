"""Modules and names that moved inside the package, still importable under their old names.

Each old dotted name keeps working for one more release and warns (``DeprecationWarning``,
pointing at the line that imported it) where it lives now. :data:`MODULES` lists the modules
that were renamed: :func:`install`, run when ``slimcache`` is imported, puts a finder on
``sys.meta_path`` that answers ``import slimcache.core.turns`` with the module object of its new
name. :data:`NAMES` lists the names that left a module that still exists; that module serves
them through the ``__getattr__`` that :func:`served_from` makes.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Sequence
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["MODULES", "NAMES", "install", "served_from"]

MODULES: dict[str, str] = {
    "slimcache.core.blueprint": "slimcache.core.settings.compressor",
    "slimcache.core.chunks": "slimcache.core.input_bound",
    "slimcache.core.setting_checks": "slimcache.core.settings.checks",
    "slimcache.core.telemetry": "slimcache.core.recorder",
    "slimcache.core.turns": "slimcache.core.lease_wait",
    "slimcache.recipes.conversation_state": "slimcache.recipes.compressor_snapshot",
    "slimcache.recipes.wrap_history": "slimcache.recipes.summarizer_ranges",
}
"""Old module name -> new module name."""

_STORE_IO = "slimcache.core.store_io"

NAMES: dict[str, dict[str, tuple[str, str]]] = {
    "slimcache.core.producing": {"Work": ("slimcache.core.request", "Work")},
    "slimcache.core.thread_cache": {
        "StoreIO": (_STORE_IO, "StoreIO"),
        "bounds_itself": (_STORE_IO, "bounds_itself"),
        "in_background": (_STORE_IO, "in_background"),
        "stamped": (_STORE_IO, "stamped"),
        "takes_ttl": (_STORE_IO, "takes_ttl"),
    },
    "slimcache.recipes.compaction": {"ToolError": ("slimcache", "ToolRefusal")},
    "slimcache.recipes.compaction_tool": {"ToolError": ("slimcache", "ToolRefusal")},
}
"""Module that still exists -> {old name: (module it lives in now, its name there)}."""


def _in_bootstrap(filename: str) -> bool:
    """Whether a frame is one of the import system's, which ``warnings`` never counts."""
    return "importlib" in filename and "_bootstrap" in filename


def warn(message: str) -> None:
    """Issue a ``DeprecationWarning`` that points at the code that did the import.

    The frames between are this module's, the import system's (which ``warnings.warn`` skips
    on its own) and :func:`importlib.import_module`'s.
    """
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _in_bootstrap(filename):
            if filename != __file__ and filename != importlib.__file__:
                break
            level += 1
        frame = frame.f_back
    warnings.warn(message, DeprecationWarning, stacklevel=level + 1)


class _AliasLoader:
    """Loads an old module name as the module object of its new name."""

    def __init__(self, new: str) -> None:
        self._new = new
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warn(f"{spec.name} is deprecated: it is now {self._new}")
        module = importlib.import_module(self._new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system gave the module the old name's spec: give it its own back.
        module.__spec__ = self._spec


class _RenamedModuleFinder:
    """Finds the old name of a renamed module (see :data:`MODULES`)."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = MODULES.get(fullname)
        if new is None:
            return None
        # A loader by its methods (importlib.abc costs a noticeable share of import time).
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", _AliasLoader(new)))


_FINDER = _RenamedModuleFinder()


def install() -> None:
    """Put the finder of renamed modules on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def served_from(module: str) -> Callable[[str], object]:
    """Make the ``__getattr__`` of ``module``: it serves the names :data:`NAMES` lists for it.

    Args:
        module: The module's ``__name__``.

    Returns:
        A module ``__getattr__`` that warns and returns the name from where it lives now, and
        raises :class:`AttributeError` for any other name.
    """
    moved = NAMES[module]

    def __getattr__(name: str) -> object:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, new = moved[name]
        warn(f"{module}.{name} is deprecated: it is now {home}.{new}")
        return getattr(importlib.import_module(home), new)

    return __getattr__
