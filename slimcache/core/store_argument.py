"""A front door's ``store`` argument: a store, a store URL, or nothing; and who closes it.

One rule for every front door: a store you pass stays yours, and the front door never closes
it; a store the front door makes (from a URL, with :func:`~slimcache.open_store`, or the
:class:`~slimcache.MemoryStore` it makes when given none) is the front door's, and its
``aclose()`` (or leaving ``async with``) closes it.
"""

from __future__ import annotations

from slimcache.core.settings.checks import check_store
from slimcache.stores.memory import MemoryStore
from slimcache.stores.protocol import Store, SupportsClose
from slimcache.stores.registry import open_store

__all__ = ["close_owned_store", "open_store_argument"]


def open_store_argument(store: Store | str | None, *, optional: bool = True) -> tuple[Store, bool]:
    """Check a front door's ``store`` argument; return its store and whether the door owns it.

    Call it once every other argument is checked, so that a store opened from a URL is not
    left unclosed by a later error.

    Args:
        store: A store (returned as it is, not owned), a store URL (opened with
            :func:`~slimcache.open_store`, owned) or ``None`` (a new
            :class:`~slimcache.MemoryStore`, owned).
        optional: Whether ``None`` is allowed.

    Returns:
        The store, and whether the front door owns it (and so closes it).

    Raises:
        ConfigurationError: ``store`` is not a store, ``None`` is not allowed, or the URL has
            no scheme or an unknown one.
        MissingExtraError: The adapter for the URL's scheme is not installed.
    """
    if isinstance(store, str):
        return open_store(store), True
    check_store(store, optional=optional)
    if store is None:
        return MemoryStore(), True
    return store, False


async def close_owned_store(store: Store, owned: bool) -> None:
    """Close ``store`` if the front door owns it and it can be closed (``aclose``).

    Args:
        store: The front door's store.
        owned: What :func:`open_store_argument` said.
    """
    if owned and isinstance(store, SupportsClose):
        await store.aclose()
