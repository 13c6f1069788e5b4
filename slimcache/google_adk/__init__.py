"""Google's Agent Development Kit with slimcache: the compaction summaries of an ``App``, cached.

:class:`CachedEventsSummarizer` is the summarizer of ADK's event compaction: each summary it
hands ADK comes from your store when any worker made it before, and is made once when several
runners compact one session at the same time, while the session keeps every event::

    from google.adk.apps.app import App, EventsCompactionConfig
    from slimcache.google_adk import CachedEventsSummarizer

    summarizer = CachedEventsSummarizer("gemini-2.5-flash", "redis://localhost:6379/0")
    app = App(
        name="assistant",
        root_agent=agent,
        plugins=[summarizer.plugin],
        events_compaction_config=EventsCompactionConfig(
            summarizer=summarizer, compaction_interval=4, overlap_size=1
        ),
    )

:class:`ADKSummarizer` makes any ADK model (a ``BaseLlm``) a slimcache summarizer.

Needs google-adk 2, which needs Python 3.11 or later (``pip install "slimcache[google-adk]"``).
Importing this module does not import it; using what needs it without it raises
:class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import typing as _typing

from slimcache.frameworks.lazy import lazy_exports as _lazy_exports
from slimcache.frameworks.settings import AgentOptions as AgentOptions
from slimcache.frameworks.settings import AgentSettings as AgentSettings

if _typing.TYPE_CHECKING:
    from slimcache.google_adk._events import CachedEventsSummarizer as CachedEventsSummarizer
    from slimcache.google_adk._summarizer import ADKSummarizer as ADKSummarizer

__all__ = [
    "ADKSummarizer",
    "AgentOptions",
    "AgentSettings",
    "CachedEventsSummarizer",
]


# Both need google.adk, so they are imported on first use, not with this module.
_LAZY = {
    "ADKSummarizer": "slimcache.google_adk._summarizer",
    "CachedEventsSummarizer": "slimcache.google_adk._events",
}

_lazy_exports(__name__, globals(), _LAZY)
