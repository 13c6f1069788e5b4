"""slimcache: cached, incremental conversation summaries kept in your own store."""

from slimcache._exceptions import (
    ConfigurationError,
    InvalidInput,
    MissingExtraError,
    SlimcacheError,
    StoreError,
    SummarizerError,
)
from slimcache._registry import open_store
from slimcache._store import (
    MemoryStore,
    Store,
    SupportsClose,
    SupportsGetMany,
    SupportsSetIfAbsent,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "InvalidInput",
    "MemoryStore",
    "MissingExtraError",
    "SlimcacheError",
    "Store",
    "StoreError",
    "SummarizerError",
    "SupportsClose",
    "SupportsGetMany",
    "SupportsSetIfAbsent",
    "__version__",
    "open_store",
]
