"""What the Agents SDK filter and session share: their settings, and the compression of items."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from agents.models.interface import Model

from slimcache.frameworks.compression import AgentCompression, CompressionOwner, summarized
from slimcache.frameworks.settings import settings_from
from slimcache.frameworks.summarizers import summarizer_for
from slimcache.openai_agents._convert import from_items, window
from slimcache.openai_agents._settings import OpenAIAgentsSettings
from slimcache.openai_agents._summarizer import AgentsSummarizer
from slimcache.stores import Store

__all__ = ["ItemCompression"]

# What model may be besides a slimcache summarizer, as an error names it.
_MODELS = "an Agents SDK Model, a model name such as 'gpt-4o-mini'"


class ItemCompression(CompressionOwner):
    """The base of the filter and the session: compresses Responses-format items of a thread,
    and shows the store and the counters."""

    _settings: OpenAIAgentsSettings

    def _start(
        self, owner: str, model: object, store: Store | str | None, options: Mapping[str, Any]
    ) -> None:
        """Take the settings ``options`` make and ``model``, and open the store, as ``owner``.

        Raises:
            ConfigurationError: ``model`` or a setting is invalid, before the store is opened.
            TypeError: A keyword that is not a setting.
        """
        settings = self._settings = settings_from(OpenAIAgentsSettings, owner, options)
        make = functools.partial(AgentsSummarizer, on_truncated=settings.on_truncated)
        summarizer = summarizer_for(model, Model, make, what=_MODELS)
        self._compression = AgentCompression(summarizer, store, settings)

    async def _compress_items(self, items: Sequence[Any], thread_id: str | None) -> list[Any]:
        """``items`` as the model should receive them: the very items, or the pinned ones, the
        summary and the items after what it stands for."""
        dicts, spans = from_items(items)
        settings = self._settings
        result = await self._compression.compress(
            dicts, thread_id, context_size=settings.context_window
        )
        done = summarized(result)
        if done is None:
            return list(items)
        return window(items, spans, done, settings.summary_placement)
