"""Pydantic AI with slimcache: cached summaries for an agent, as a capability.

:class:`CachedSummarization` keeps what an agent's model receives within bounds, with its
summaries cached in your store and shared by every worker, while the run's history keeps every
message::

    from pydantic_ai import Agent
    from slimcache.pydantic_ai import CachedSummarization

    summarize = CachedSummarization("openai:gpt-4o-mini", "redis://localhost:6379/0")
    agent = Agent("openai:gpt-4o", capabilities=[summarize])
    result = agent.run_sync("Hotels?", message_history=history, conversation_id="chat-42")

:class:`PydanticAISummarizer` makes any Pydantic AI model a slimcache summarizer.

:class:`AgentSettings` documents the settings the capability takes by keyword (those of every
agent integration); :class:`AgentOptions` types them as a dict of keyword arguments.

Needs Pydantic AI 2 (``pip install "slimcache[pydantic-ai]"``). Importing this module does not
import it; using what needs it without it raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import typing as _typing

from slimcache.frameworks.lazy import lazy_exports as _lazy_exports
from slimcache.frameworks.settings import AgentOptions as AgentOptions
from slimcache.frameworks.settings import AgentSettings as AgentSettings

if _typing.TYPE_CHECKING:
    from slimcache.pydantic_ai._capability import CachedSummarization as CachedSummarization
    from slimcache.pydantic_ai._summarizer import PydanticAISummarizer as PydanticAISummarizer

__all__ = [
    "AgentOptions",
    "AgentSettings",
    "CachedSummarization",
    "PydanticAISummarizer",
]


# Both need pydantic_ai, so they are imported on first use, not with this module.
_LAZY = {
    "CachedSummarization": "slimcache.pydantic_ai._capability",
    "PydanticAISummarizer": "slimcache.pydantic_ai._summarizer",
}

_lazy_exports(__name__, globals(), _LAZY)
