"""The store a framework integration is given: a store, a URL it opens and owns, or none.

The one rule of every front door (:mod:`slimcache.core.store_argument`): a store object stays
the caller's (to use and to close); a URL is opened with :func:`~slimcache.open_store` by the
front door, which owns the store and closes it in its ``close()`` / ``aclose()``; ``None`` is a
:class:`~slimcache.MemoryStore` of the front door's own. Here the store is closed on slimcache's
event loop, where a framework's integration runs its compressions; one the application never
closes is closed there at exit, before the loop goes (:meth:`~slimcache.sync.Runner.close_with`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from slimcache.core.store_argument import open_store_argument
from slimcache.stores import Store
from slimcache.sync import default_runner

__all__ = ["StoreHandle"]


@dataclass
class StoreHandle:
    """A front door's store, and whether the front door opened it (and so closes it).

    Attributes:
        store: The store.
        owned: Whether it was opened here from a URL.
    """

    store: Store
    owned: bool
    _closed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def of(cls, store: Store | str | None) -> StoreHandle:
        """Check ``store`` and open it when it is a URL.

        Raises:
            ConfigurationError: ``store`` is not a store or a valid store URL.
            MissingExtraError: The URL's adapter is not installed.
        """
        opened, owned = open_store_argument(store)
        if owned:
            default_runner().close_with(opened)
        return cls(opened, owned=owned)

    async def aclose(self) -> None:
        """Close the store if it was opened here (once); it closes on slimcache's event loop,
        where its connections are."""
        close = getattr(self.store, "aclose", None)
        if not self.owned or self._closed or close is None:
            return
        self._closed = True
        default_runner().forget(self.store)
        await asyncio.wrap_future(default_runner().submit(close()))

    def close(self) -> None:
        """:meth:`aclose`, from code that does not await."""
        close = getattr(self.store, "aclose", None)
        if not self.owned or self._closed or close is None:
            return
        self._closed = True
        default_runner().forget(self.store)
        default_runner().run(close())
