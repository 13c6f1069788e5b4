"""Choosing a store by URL through the ``slimcache.stores`` entry-point group.

An adapter distribution registers one entry point per URL scheme, whose value is a callable
``factory(url, **options) -> Store`` (usually a ``from_url`` classmethod). A third party can
publish its own adapter the same way::

    [project.entry-points."slimcache.stores"]
    myscheme = "my_package:MyStore.from_url"
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from slimcache._exceptions import ConfigurationError, MissingExtraError
from slimcache._store import MemoryStore, Store

__all__ = ["ENTRY_POINT_GROUP", "open_store", "store_schemes"]

ENTRY_POINT_GROUP = "slimcache.stores"

# Schemes served by the adapters that ship with slimcache, and the extra that installs each.
_KNOWN_EXTRAS: dict[str, str] = {
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "sqlite+aiosqlite": "sql",
    "postgresql+asyncpg": "postgres",
    "s3": "s3",
}

# Common spellings that name a database but not the async driver slimcache needs.
_DRIVERLESS: dict[str, str] = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def _scheme_of(url: str) -> str:
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a string, got {type(url).__name__}")
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        raise ConfigurationError(f"store URL {url!r} has no scheme (expected e.g. 'redis://...')")
    return scheme.lower()


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def store_schemes() -> list[str]:
    """Return the URL schemes the installed adapters can open, sorted."""
    return sorted(set(_entry_points()) | {"memory"})


def open_store(url: str, **options: Any) -> Store:
    """Open the store a URL names.

    Args:
        url: ``memory://``, ``redis://host:6379/0``, ``rediss://...``, ``unix:///path.sock``,
            ``sqlite+aiosqlite:///path.db``, ``postgresql+asyncpg://user@host/db``,
            ``s3://bucket/prefix?endpoint_url=...``, or a scheme a third-party adapter registers.
        **options: Passed to the adapter's factory (timeouts, pool size, prefix, ...).

    Returns:
        A store; close it with ``await store.aclose()`` (or ``async with``) when it has one.

    Raises:
        ConfigurationError: The URL has no scheme or an unknown one.
        MissingExtraError: The adapter for the scheme is not installed; the message names the
            ``pip install`` to run.
    """
    scheme = _scheme_of(url)
    found = _entry_points().get(scheme)
    if found is None:
        if scheme == "memory":
            return MemoryStore.from_url(url, **options)
        if scheme in _KNOWN_EXTRAS:
            extra = _KNOWN_EXTRAS[scheme]
            raise MissingExtraError(
                f"the {scheme}:// store is not installed; run: pip install 'slimcache[{extra}]'"
            )
        if scheme in _DRIVERLESS:
            raise ConfigurationError(
                f"store URL scheme {scheme!r} names no async driver; "
                f"use {_DRIVERLESS[scheme]}:// instead"
            )
        known = ", ".join(f"{s}://" for s in sorted(set(_KNOWN_EXTRAS) | set(store_schemes())))
        raise ConfigurationError(f"unknown store URL scheme {scheme!r}; known schemes: {known}")
    try:
        factory: Callable[..., Store] = found.load()
    except ImportError as exc:
        hint = (
            f"pip install 'slimcache[{_KNOWN_EXTRAS[scheme]}]'"
            if scheme in _KNOWN_EXTRAS
            else f"pip install the package providing {found.value}"
        )
        raise MissingExtraError(
            f"the {scheme}:// store could not be imported ({exc}); run: {hint}"
        ) from None
    return factory(url, **options)
