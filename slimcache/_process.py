"""What this process remembers between requests: every process-wide cache, listed and cleared here.

A stateless server builds its front doors per request, so what would be per-object work (checking
settings, looking up a store type's abilities, hashing a long history) is remembered by the
process instead. Each such cache is registered here, once, when its module is imported, with a
line saying what it holds; :func:`process_caches` lists them and :func:`clear_process_caches`
empties them all. Nothing here is needed for correctness: every cache is an accelerator or a
bound-sized table whose loss costs only the work of filling it again, so clearing them (between
tests, say) changes no result.

The caches, by module (see each for the rules by which it is filled and bounded):

- ``slimcache.stores.protocol``: ``abilities``, the members each type lacks of each protocol;
  ``store abilities``, what each type of store can do.
- ``slimcache.stores.entries``: ``parsed indexes``, the stored indexes parsed last.
- ``slimcache.messages.tokens``: ``approximate counts``, the default counter's tables.
- ``slimcache.core.fingerprints``: ``hashed ranges``, what was hashed into recent fingerprints.
- ``slimcache.core.store_io``: ``known entries``, the entries read per store;
  ``ttl keywords``, whether a store type's method takes ``ttl``.
- ``slimcache.core.settings.compressor``: ``compressor settings``, settings checked and derived
  per distinct set of a compressor's arguments.
- ``slimcache.core.breaker``: ``breakers``, the recent failures of each summarizer; cleared,
  every summarizer is called again at once, and its failures are counted afresh.
- ``slimcache.core.input_ratio``: ``input ratios``, how many tokens each summarizer's provider
  counts per token estimated; cleared, each is learned again (from replies that report their
  usage, or from a request refused for its length).

Five more process-wide tables are live state, not caches, and are listed here but never
cleared: emptying them would drop work in flight or let two calls in where one may run. Each
empties itself as its work ends. ``slimcache.core.store_io``'s background tasks (lease releases
and clean-ups still running) and ``slimcache.stores.toolkit``'s unwinding calls (store calls cut
at their bound, still finishing) are referenced until they finish; the window memories' locks
(``slimcache.recipes.window_memory``) and the sliding windows' turns
(``slimcache.recipes.sliding_window``) are held weakly, by the windows that use them.
``slimcache.core.background``'s ``refreshes`` (summaries extended after their request was
answered, running or queued, with the bounds on both and the counts of what became of them)
holds each refresh until it ends; it is drained by ``slimcache.background.drain`` (and
``slimcache.sync.drain``), and stopped by ``slimcache.background.cancel``, which leave the
cache as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["PerName", "ProcessCache", "clear_process_caches", "process_caches", "register"]


_C = TypeVar("_C")
_T = TypeVar("_T")


@dataclass(frozen=True)
class ProcessCache:
    """One process-wide cache.

    Attributes:
        module: The module that keeps it.
        name: Its name, as :func:`process_caches` lists it.
        holds: What it holds, in a few words.
        clear: Empties it.
    """

    module: str
    name: str
    holds: str
    clear: Callable[[], None]


_CACHES: dict[tuple[str, str], ProcessCache] = {}


class PerName(Generic[_T]):
    """A process-wide table of one object per name (a summarizer's), made on first use.

    Args:
        make: Makes the object of a name.
    """

    def __init__(self, make: Callable[[str], _T]) -> None:
        self._make = make
        self._items: dict[str, _T] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> _T:
        """The object of ``name``, made now if it has none."""
        with self._lock:
            item = self._items.get(name)
            if item is None:
                item = self._items[name] = self._make(name)
            return item

    def values(self) -> list[_T]:
        """Every object made so far."""
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        """Forget every object."""
        with self._lock:
            self._items.clear()


def register(
    module: str, name: str, holds: str, cache: _C, *, clear: Callable[[], None] | None = None
) -> _C:
    """Register ``cache`` and return it.

    Args:
        module: The module that keeps it (``__name__``).
        name: Its name within the module.
        holds: What it holds, in a few words.
        cache: The cache itself.
        clear: Empties it (default: its ``clear()`` method).
    """
    _CACHES[(module, name)] = ProcessCache(module, name, holds, clear or _clear_of(cache))
    return cache


def process_caches() -> tuple[ProcessCache, ...]:
    """Every process-wide cache registered so far (those of the modules imported)."""
    return tuple(_CACHES.values())


def clear_process_caches() -> None:
    """Empty every process-wide cache, as if the process had just started."""
    for cache in _CACHES.values():
        cache.clear()


def _clear_of(cache: Any) -> Callable[[], None]:
    clear: Callable[[], None] = cache.clear
    return clear
