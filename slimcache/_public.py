"""How a package presents the names it exports: as its own, not its private module's.

``slimcache.KeepMessages`` then reports ``slimcache`` as its module, so reprs, tracebacks
(``slimcache.ConfigurationError: ...``), pickles and documentation name the place users import
it from, and moving code between private modules changes none of them.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterable, Mapping
from types import FunctionType


def publish(module: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Set ``__module__`` to ``module`` on each class and function in ``names``.

    Only objects defined inside slimcache under the very name they are exported as are
    touched: pickle finds an object again by module and qualified name, so an alias or a
    nested class must keep its own. Constants and type aliases have no module to set.

    Args:
        module: The public module, e.g. ``"slimcache"``.
        namespace: That module's globals.
        names: The names it exports.
    """
    for name in names:
        obj = namespace[name]
        if not isinstance(obj, (type, FunctionType)):
            continue
        if obj.__qualname__ != name or not obj.__module__.startswith("slimcache."):
            continue
        if isinstance(obj, type) and not _resolve_annotations(obj):
            continue
        obj.__module__ = module


def _resolve_annotations(cls: type) -> bool:
    """Replace ``cls``'s own string annotations with the objects they name.

    ``typing.get_type_hints`` evaluates a class's string annotations in the module
    ``cls.__module__`` names; once that is the public package, names only the defining module
    imports would no longer resolve. Resolved here, while they still do, they need no module.

    Returns:
        Whether the class's annotations no longer depend on its module (else it keeps it).
    """
    own = inspect.get_annotations(cls)
    if not any(isinstance(value, str) for value in own.values()):
        return True
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # an annotation that never resolved: leave the class as it is
        return False
    cls.__annotations__ = {key: hints.get(key, value) for key, value in own.items()}
    return True
