"""A bridge's names that need its framework, imported on first use: one ``__getattr__`` shape,
and the ``__dir__`` that lists them.

``slimcache.langchain``, ``slimcache.pydantic_ai``, ``slimcache.openai_agents``,
``slimcache.strands``, ``slimcache.llama_index`` and ``slimcache.google_adk`` import without their
framework; a name that needs it is imported when first asked for, and a missing framework is a
:class:`~slimcache.MissingExtraError` saying what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from slimcache._exceptions import MissingExtraError
from slimcache._install import pip_install
from slimcache._public import publish

__all__ = ["lazy_exports"]

# Each bridge: the top-level names of the packages it needs, told apart from other
# ImportErrors; what it needs, as the error says it; the slimcache extra that installs it.
_NEEDS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "slimcache.langchain": (("langchain", "langgraph"), "langchain 1.0 or later", "langchain"),
    "slimcache.pydantic_ai": (("pydantic_ai",), "Pydantic AI 2", "pydantic-ai"),
    "slimcache.openai_agents": (("agents", "openai"), "the OpenAI Agents SDK", "openai-agents"),
    "slimcache.strands": (("strands",), "Strands Agents 1.62 or later", "strands"),
    "slimcache.llama_index": (("llama_index",), "llama-index-core 0.14", "llama-index"),
    "slimcache.google_adk": (
        ("google",),
        "google-adk 2 (on Python 3.11 or later)",
        "google-adk",
    ),
}


def lazy_exports(module: str, namespace: dict[str, object], homes: Mapping[str, str]) -> None:
    """Give a bridge, whose names need its framework, its ``__getattr__``, by which each is
    imported on first use, published as the bridge's own, and kept; and its ``__dir__``, which
    lists them beside what it holds.

    Args:
        module: The bridge, e.g. ``"slimcache.langchain"``.
        namespace: Its globals, where an imported name is kept.
        homes: Each lazily imported name -> the private module that defines it.

    Raises (from ``__getattr__``):
        AttributeError: The name is not one of ``homes``.
        MissingExtraError: The framework is not installed; the error says what it needs and
            how to add it to this install (see :func:`slimcache._install.pip_install`).
    """
    packages, needs, extra = _NEEDS[module]

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

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    # Set here, not written in the package: a type checker reads the package's own imports.
    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
