"""A bridge's names that need its framework, imported on first use: one ``__getattr__`` shape.

``slimcache.langchain``, ``slimcache.pydantic_ai`` and ``slimcache.openai_agents`` import without
their framework; a name that needs it is imported when first asked for, and a missing framework
is a :class:`~slimcache.MissingExtraError` saying what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from slimcache._exceptions import MissingExtraError
from slimcache._install import pip_install
from slimcache._public import publish

__all__ = ["lazy_exports"]


def lazy_exports(
    module: str,
    namespace: dict[str, object],
    homes: Mapping[str, str],
    *,
    packages: tuple[str, ...],
    needs: str,
    extra: str,
) -> Callable[[str], object]:
    """Make the ``__getattr__`` of a package whose names need another package (a framework):
    each is imported on first use, published as the package's own, and kept.

    Args:
        module: The package, e.g. ``"slimcache.langchain"``.
        namespace: Its globals, where an imported name is kept.
        homes: Each lazily imported name -> the private module that defines it.
        packages: The top-level names of the packages it needs, told apart from other
            ``ImportError``s.
        needs: What it needs, as the error says it (``"langchain 1.0 or later"``).
        extra: The slimcache extra that installs it; the error says how to add it to this
            install (see :func:`slimcache._install.pip_install`).

    Raises (from the returned function):
        AttributeError: The name is not one of ``homes``.
        MissingExtraError: The package it needs is not installed.
    """

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        try:
            home = importlib.import_module(homes[name])
        except ImportError as exc:
            if exc.name is None or not exc.name.startswith(packages):
                raise
            install = pip_install(extra)
            raise MissingExtraError(f"{module}.{name} needs {needs}: {install}") from None
        value = getattr(home, name)
        publish(module, {name: value}, [name])
        namespace[name] = value
        return value

    return __getattr__
