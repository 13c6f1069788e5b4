"""The names you annotate with or compare against, beside the front doors that use them.

:mod:`slimcache` holds what an application needs to run; this module holds the rest of the
vocabulary of the front doors' signatures and results, for type annotations and comparisons:

- what a call did and what a front door counted: :data:`Outcome` (``result.outcome ==
  "hit"``), :class:`WindowStats`, :class:`ConversationStats`, :class:`SummarizerReport`;
- what a failed summarizer call was: :class:`InputTooLong`, the
  :class:`~slimcache.SummarizerError` of a request the model refused for its length;
- the shapes of the functions you pass in: :data:`PlainSummarizer` and :data:`ExtendFunction`
  (:func:`~slimcache.cached_summarizer`), :data:`MergeFunction` (:class:`~slimcache.Custom`),
  :data:`CompactStartHook` and :data:`CompactEndHook` (:class:`~slimcache.SlidingWindow`);
- the literal choices: :data:`StrategyName`, :data:`Task` (``context.task``),
  :data:`CompactionMode`, :data:`ToolApi`;
- the ``new_session`` tool's name and its default first message: :data:`NEW_SESSION_TOOL`,
  :data:`DEFAULT_SESSION_TEMPLATE`.

::

    from slimcache.types import Outcome, WindowStats
"""

from slimcache._public import publish as _publish
from slimcache.core.input_ratio import InputTooLong
from slimcache.core.results import Outcome
from slimcache.core.strategies import MergeFunction, StrategyName
from slimcache.core.summarizer import SummarizerReport, Task
from slimcache.recipes.cached_summarizer import ExtendFunction, PlainSummarizer
from slimcache.recipes.compaction import (
    DEFAULT_SESSION_TEMPLATE,
    NEW_SESSION_TOOL,
    CompactionMode,
    ToolApi,
)
from slimcache.recipes.conversation_compressor import ConversationStats
from slimcache.recipes.sliding_window import CompactEndHook, CompactStartHook, WindowStats

__all__ = [
    "DEFAULT_SESSION_TEMPLATE",
    "NEW_SESSION_TOOL",
    "CompactEndHook",
    "CompactStartHook",
    "CompactionMode",
    "ConversationStats",
    "ExtendFunction",
    "InputTooLong",
    "MergeFunction",
    "Outcome",
    "PlainSummarizer",
    "StrategyName",
    "SummarizerReport",
    "Task",
    "ToolApi",
    "WindowStats",
]

_publish(__name__, globals(), __all__)
