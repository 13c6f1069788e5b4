"""Strands Agents with slimcache: a conversation manager whose summaries are cached in your store.

:class:`CachedSummarizingConversationManager` replaces Strands'
``SummarizingConversationManager`` (the same ``summary_ratio`` and
``preserve_recent_messages``): the summary it puts in ``agent.messages`` comes from your store,
so every agent on the same session, in any process, is served it without a summarizer call::

    from strands import Agent
    from strands.session import FileSessionManager
    from slimcache.strands import CachedSummarizingConversationManager

    manager = CachedSummarizingConversationManager(
        "us.amazon.nova-lite-v1:0", "redis://localhost:6379/0"
    )
    agent = Agent(
        conversation_manager=manager, session_manager=FileSessionManager(session_id="chat-42")
    )

:class:`StrandsSummarizer` makes any Strands model a slimcache summarizer.

:class:`StrandsSettings` documents the settings the manager takes by keyword;
:class:`StrandsOptions` types them as a dict of keyword arguments.

Needs Strands Agents (``pip install "slimcache[strands]"``). Importing this module does not
import it; using what needs it without it raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import typing as _typing

from slimcache._public import publish as _publish
from slimcache.frameworks.lazy import lazy_exports as _lazy_exports
from slimcache.strands._settings import StrandsOptions as StrandsOptions
from slimcache.strands._settings import StrandsSettings as StrandsSettings

if _typing.TYPE_CHECKING:
    from slimcache.strands._manager import (
        CachedSummarizingConversationManager as CachedSummarizingConversationManager,
    )
    from slimcache.strands._summarizer import StrandsSummarizer as StrandsSummarizer

__all__ = [
    "CachedSummarizingConversationManager",
    "StrandsOptions",
    "StrandsSettings",
    "StrandsSummarizer",
]

_publish(__name__, globals(), ["StrandsOptions", "StrandsSettings"])

# Each needs the strands package, so they are imported on first use, not with this module.
_LAZY = {
    "CachedSummarizingConversationManager": "slimcache.strands._manager",
    "StrandsSummarizer": "slimcache.strands._summarizer",
}

_lazy_exports(__name__, globals(), _LAZY)
