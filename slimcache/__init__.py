"""slimcache: cached, incremental conversation summaries kept in your own store.

This package holds the names an application needs: the front doors, their triggers, keeps,
strategies and summarizer types, results, errors, and the store it picks. The names to annotate
with or compare against (``Outcome``, ``WindowStats``, ...) are :mod:`slimcache.types`; counting
and rendering messages is :mod:`slimcache.messages`; writing or inspecting a store is
:mod:`slimcache.stores`; checking one is :mod:`slimcache.testing`.
"""

import importlib as _importlib
import typing as _typing
import warnings as _warnings
from types import ModuleType as _ModuleType

from slimcache import _renamed

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

if _typing.TYPE_CHECKING:
    # The deprecated names, typed for checkers; at run time __getattr__ serves them. The
    # names and modules here are those of _MOVED, _RENAMED and _WITHDRAWN below (a test
    # holds them to it).
    from slimcache.messages import count_message_tokens as count_message_tokens
    from slimcache.messages import render_transcript as render_transcript
    from slimcache.stores import CompareAndDeleteOp as CompareAndDeleteOp
    from slimcache.stores import CompareAndSetOp as CompareAndSetOp
    from slimcache.stores import DeleteOp as DeleteOp
    from slimcache.stores import GetOp as GetOp
    from slimcache.stores import RangeRef as RangeRef
    from slimcache.stores import SetIfAbsentOp as SetIfAbsentOp
    from slimcache.stores import SetOp as SetOp
    from slimcache.stores import StoreOp as StoreOp
    from slimcache.stores import SummaryEntry as SummaryEntry
    from slimcache.stores import SupportsBatch as SupportsBatch
    from slimcache.stores import SupportsCallTimeout as SupportsCallTimeout
    from slimcache.stores import SupportsClose as SupportsClose
    from slimcache.stores import SupportsCompareAndSet as SupportsCompareAndSet
    from slimcache.stores import SupportsGetMany as SupportsGetMany
    from slimcache.stores import SupportsSetIfAbsent as SupportsSetIfAbsent
    from slimcache.stores import ThreadIndex as ThreadIndex
    from slimcache.stores import ThreadKeys as ThreadKeys
    from slimcache.stores import encode_thread_id as encode_thread_id
    from slimcache.stores.keys import fingerprint_chain as fingerprint_chain
    from slimcache.types import DEFAULT_SESSION_TEMPLATE as DEFAULT_SESSION_TEMPLATE
    from slimcache.types import NEW_SESSION_TOOL as NEW_SESSION_TOOL
    from slimcache.types import CompactionMode as CompactionMode
    from slimcache.types import ConversationStats as ConversationStats
    from slimcache.types import ExtendFunction as ExtendFunction
    from slimcache.types import MergeFunction as MergeFunction
    from slimcache.types import Outcome as Outcome
    from slimcache.types import PlainSummarizer as PlainSummarizer
    from slimcache.types import StrategyName as StrategyName
    from slimcache.types import WindowStats as WindowStats

    ToolError = ToolRefusal

__version__ = "0.2.0"

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
_renamed.install()

_STORES = "slimcache.stores"
_MESSAGES = "slimcache.messages"
_TYPES = "slimcache.types"

# Names this package exported before 0.3, served for one more release with a warning: the
# module each one now comes from.
_MOVED: dict[str, str] = {
    "CompactionMode": _TYPES,
    "CompareAndDeleteOp": _STORES,
    "CompareAndSetOp": _STORES,
    "ConversationStats": _TYPES,
    "DEFAULT_SESSION_TEMPLATE": _TYPES,
    "DeleteOp": _STORES,
    "ExtendFunction": _TYPES,
    "GetOp": _STORES,
    "MergeFunction": _TYPES,
    "NEW_SESSION_TOOL": _TYPES,
    "Outcome": _TYPES,
    "PlainSummarizer": _TYPES,
    "RangeRef": _STORES,
    "SetIfAbsentOp": _STORES,
    "SetOp": _STORES,
    "StoreOp": _STORES,
    "StrategyName": _TYPES,
    "SummaryEntry": _STORES,
    "SupportsBatch": _STORES,
    "SupportsCallTimeout": _STORES,
    "SupportsClose": _STORES,
    "SupportsCompareAndSet": _STORES,
    "SupportsGetMany": _STORES,
    "SupportsSetIfAbsent": _STORES,
    "ThreadIndex": _STORES,
    "ThreadKeys": _STORES,
    "WindowStats": _TYPES,
    "count_message_tokens": _MESSAGES,
    "encode_thread_id": _STORES,
    "render_transcript": _MESSAGES,
}

# Names renamed in 0.3, served under the old name for one more release with a warning.
_RENAMED: dict[str, str] = {"ToolError": "ToolRefusal"}

# Deprecated with no public replacement: the legacy key fingerprint, now internal.
_WITHDRAWN: dict[str, str] = {"fingerprint_chain": "slimcache.stores.keys"}


# Hidden from type checkers, which would otherwise accept any name at all as an attribute;
# they see the deprecated names through the imports above instead.
if not _typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Serve a name moved out of this package, warning where it lives now."""
        if name in _MOVED:
            home = _MOVED[name]
            message = f"slimcache.{name} is deprecated: import it from {home}"
        elif name in _RENAMED:
            home = __name__
            message = f"slimcache.{name} is deprecated: it is now slimcache.{_RENAMED[name]}"
            name = _RENAMED[name]
        elif name in _WITHDRAWN:
            home = _WITHDRAWN[name]
            message = (
                f"slimcache.{name} is deprecated and no longer public; "
                f"it remains, internal and subject to change, at {home}.{name}"
            )
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        _warnings.warn(message, DeprecationWarning, stacklevel=2)
        return getattr(_importlib.import_module(home), name)


def __dir__() -> list[str]:
    """The public names and the loaded public subpackages: never a deprecated name."""
    names = set(__all__)
    for name, value in globals().items():
        public_module = isinstance(value, _ModuleType) and not name.startswith("_")
        if public_module or (name.startswith("__") and name.endswith("__")):
            names.add(name)
    return sorted(names)
