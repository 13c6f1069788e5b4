"""slimcache: cached, incremental conversation summaries kept in your own store.

This package holds the names an application needs: the front doors, their triggers, keeps,
strategies and summarizer types, results, errors, and the store it picks. The names to annotate
with or compare against (``Outcome``, ``WindowStats``, ...) are :mod:`slimcache.types`; counting
and rendering messages is :mod:`slimcache.messages`; writing or inspecting a store is
:mod:`slimcache.stores`; checking one is :mod:`slimcache.testing`.
"""

import typing as _typing
from types import ModuleType as _ModuleType

# Imported here so that its names report it as their module however slimcache was imported.
from slimcache import types as types
from slimcache._exceptions import (
    ConfigurationError,
    InvalidInput,
    MissingExtraError,
    SlimcacheError,
    StoreError,
    StoreTimeout,
    SummarizerError,
)
from slimcache._public import publish as _publish
from slimcache._version import VERSION
from slimcache.core.compressor import DEFAULT_SUMMARY_TEMPLATE, SummarizeCompressor
from slimcache.core.policy import (
    AnyOf,
    ContextWindow,
    EvictableTokens,
    Keep,
    KeepMessages,
    KeepTokens,
    KeepWithin,
    Manual,
    MessageThreshold,
    TokenThreshold,
    Trigger,
    WindowState,
)
from slimcache.core.results import CompressEvent, CompressionResult, Stats
from slimcache.core.strategies import (
    Concat,
    Custom,
    Extend,
    Hybrid,
    Replace,
    Strategy,
    Weighted,
)
from slimcache.core.summarizer import (
    DEFAULT_CONDENSE_PROMPT,
    DEFAULT_EXTEND_PROMPT,
    DEFAULT_SUMMARIZE_PROMPT,
    Prompts,
    Summarizer,
    SummaryContext,
)
from slimcache.messages import (
    Conversation,
    Message,
    TokenCounter,
    approx_tokens,
    unwrap_messages,
    wrap_messages,
)
from slimcache.recipes.cached_summarizer import CachedSummarizer, cached_summarizer
from slimcache.recipes.compaction import Compaction, ContextStatus, NewSession, ToolRefusal
from slimcache.recipes.conversation_compressor import ConversationCompressor
from slimcache.recipes.maintenance import clear_thread
from slimcache.recipes.sliding_window import SlidingWindow
from slimcache.recipes.trim import TrimCompressor, TrimResult
from slimcache.recipes.window_memory import ConversationWindowMemory, TokenWindowMemory
from slimcache.stores import MemoryStore, Store, open_store

__version__ = VERSION

__all__ = [
    "DEFAULT_CONDENSE_PROMPT",
    "DEFAULT_EXTEND_PROMPT",
    "DEFAULT_SUMMARIZE_PROMPT",
    "DEFAULT_SUMMARY_TEMPLATE",
    "AnyOf",
    "CachedSummarizer",
    "Compaction",
    "CompressEvent",
    "CompressionResult",
    "Concat",
    "ConfigurationError",
    "ContextStatus",
    "ContextWindow",
    "Conversation",
    "ConversationCompressor",
    "ConversationWindowMemory",
    "Custom",
    "EvictableTokens",
    "Extend",
    "Hybrid",
    "InvalidInput",
    "Keep",
    "KeepMessages",
    "KeepTokens",
    "KeepWithin",
    "Manual",
    "MemoryStore",
    "Message",
    "MessageThreshold",
    "MissingExtraError",
    "NewSession",
    "Prompts",
    "Replace",
    "SlidingWindow",
    "SlimcacheError",
    "Stats",
    "Store",
    "StoreError",
    "StoreTimeout",
    "Strategy",
    "SummarizeCompressor",
    "Summarizer",
    "SummarizerError",
    "SummaryContext",
    "TokenCounter",
    "TokenThreshold",
    "TokenWindowMemory",
    "ToolRefusal",
    "Trigger",
    "TrimCompressor",
    "TrimResult",
    "Weighted",
    "WindowState",
    "__version__",
    "approx_tokens",
    "cached_summarizer",
    "clear_thread",
    "open_store",
    "unwrap_messages",
    "wrap_messages",
]

_publish(__name__, globals(), __all__)

# Hidden from type checkers, which would otherwise accept any name at all as an attribute.
if not _typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Refuse a name this package does not have, naming slimcache.types when it is there."""
        message = f"module {__name__!r} has no attribute {name!r}"
        if name in types.__all__:
            message += f"; it is slimcache.types.{name}"
        raise AttributeError(message)


def __dir__() -> list[str]:
    """The public names, the loaded public subpackages and the module's own dunders."""
    names = set(__all__)
    for name, value in globals().items():
        public_module = isinstance(value, _ModuleType) and not name.startswith("_")
        if public_module or (name.startswith("__") and name.endswith("__")):
            names.add(name)
    return sorted(names)
