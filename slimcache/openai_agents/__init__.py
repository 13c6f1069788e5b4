"""The OpenAI Agents SDK with slimcache: cached summaries of what a run's model receives.

:class:`CachedSummarizationFilter` goes in ``RunConfig(call_model_input_filter=...)`` and
compresses the model's input items (the session and your list stay as they are);
:class:`CachedSummarySession` wraps any ``Session`` so that a run reads the cached summary and
the recent items::

    from agents import Agent, RunConfig, Runner
    from slimcache.openai_agents import CachedSummarizationFilter

    summarize = CachedSummarizationFilter(
        "gpt-4o-mini", "redis://localhost:6379/0", thread_id="chat-42"
    )
    run_config = RunConfig(call_model_input_filter=summarize)
    result = Runner.run_sync(agent, history, run_config=run_config)

:class:`AgentsSummarizer` makes any model the SDK can call a slimcache summarizer.

:class:`OpenAIAgentsSettings` documents the settings the filter and the session take by keyword
(those of every agent integration, :class:`AgentSettings`, and ``context_window``);
:class:`OpenAIAgentsOptions` and :class:`AgentOptions` type them as a dict of keyword arguments.

Needs the Agents SDK (``pip install "slimcache[openai-agents]"``). Importing this module does
not import it; using what needs it without it raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import typing as _typing

from slimcache._public import publish as _publish
from slimcache.frameworks.lazy import lazy_exports as _lazy_exports
from slimcache.frameworks.settings import AgentOptions as AgentOptions
from slimcache.frameworks.settings import AgentSettings as AgentSettings
from slimcache.openai_agents._settings import OpenAIAgentsOptions as OpenAIAgentsOptions
from slimcache.openai_agents._settings import OpenAIAgentsSettings as OpenAIAgentsSettings

if _typing.TYPE_CHECKING:
    from slimcache.openai_agents._filter import (
        CachedSummarizationFilter as CachedSummarizationFilter,
    )
    from slimcache.openai_agents._session import CachedSummarySession as CachedSummarySession
    from slimcache.openai_agents._summarizer import AgentsSummarizer as AgentsSummarizer

__all__ = [
    "AgentOptions",
    "AgentSettings",
    "AgentsSummarizer",
    "CachedSummarizationFilter",
    "CachedSummarySession",
    "OpenAIAgentsOptions",
    "OpenAIAgentsSettings",
]

# The settings need no Agents SDK; AgentSettings keeps its own module, as both bridges export it.
_publish(__name__, globals(), ["OpenAIAgentsOptions", "OpenAIAgentsSettings"])

# Each needs the agents package, so they are imported on first use, not with this module.
_LAZY = {
    "AgentsSummarizer": "slimcache.openai_agents._summarizer",
    "CachedSummarizationFilter": "slimcache.openai_agents._filter",
    "CachedSummarySession": "slimcache.openai_agents._session",
}

_lazy_exports(__name__, globals(), _LAZY)
