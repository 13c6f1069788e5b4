"""What the Agents SDK filter and session share: the compression of items, by their settings."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from agents.models.interface import Model

from slimcache._exceptions import ConfigurationError
from slimcache.core.results import Stats
from slimcache.core.settings.checks import check_summarizer
from slimcache.core.summarizer import Summarizer
from slimcache.core.truncation import OnTruncated
from slimcache.frameworks.compression import AgentCompression, summarized
from slimcache.openai_agents._convert import from_items, window
from slimcache.openai_agents._settings import OpenAIAgentsSettings
from slimcache.openai_agents._summarizer import AgentsSummarizer
from slimcache.stores import Store

__all__ = ["ItemCompression"]

logger = logging.getLogger("slimcache")


class ItemCompression:
    """Compresses Responses-format items of a thread; see the filter and the session.

    Args:
        model: What writes the summaries (see the filter).
        store: A store, a store URL, or ``None``.
        settings: The filter's or the session's settings, which it keeps and reads.

    Raises:
        ConfigurationError: ``model`` or a setting is invalid, before the store is opened.
    """

    def __init__(
        self,
        model: Model | str | Summarizer,
        store: Store | str | None,
        settings: OpenAIAgentsSettings,
    ) -> None:
        self.settings = settings
        self.compression = AgentCompression(
            _summarizer(model, settings.on_truncated), store, settings
        )

    @property
    def stats(self) -> Stats:
        """The counters: requests, cache hits, summarizer calls, tokens saved."""
        return self.compression.stats

    async def compress(self, items: Sequence[Any], thread_id: str | None) -> list[Any]:
        """``items`` as the model should receive them: the very items, or the pinned ones, the
        summary and the items after what it stands for."""
        dicts, spans = from_items(items)
        settings = self.settings
        result = await self.compression.compress(
            dicts, thread_id, context_size=settings.context_window
        )
        done = summarized(result)
        if done is None:
            return list(items)
        return window(items, spans, done, settings.summary_placement)


def _summarizer(model: object, on_truncated: OnTruncated) -> Summarizer:
    if isinstance(model, (Model, str)):
        return AgentsSummarizer(model, on_truncated=on_truncated)
    if not callable(model):
        raise ConfigurationError(
            "model must be an Agents SDK Model, a model name such as 'gpt-4o-mini', or a "
            f"slimcache summarizer (messages, context) -> str; got {model!r}"
        )
    check_summarizer(model)
    return model
