"""What the Agents SDK filter and session share: their arguments and the compression of items."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from agents.models.interface import Model

from slimcache._exceptions import ConfigurationError
from slimcache.core.results import Stats
from slimcache.core.settings.checks import check_choice, check_summarizer
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE
from slimcache.core.summarizer import OnOverBudget, Prompts, Summarizer
from slimcache.frameworks.compression import AgentCompression, OnSummarizerError, summarized
from slimcache.frameworks.sizes import ContextSize, TriggerSpec, needs_context_size
from slimcache.messages import TokenCounter, approx_tokens
from slimcache.openai_agents._convert import Placement, from_items, window
from slimcache.openai_agents._summarizer import AgentsSummarizer
from slimcache.stores import Store

__all__ = ["ItemCompression"]

logger = logging.getLogger("slimcache")


class ItemCompression:
    """Compresses Responses-format items of a thread; see the filter and the session."""

    def __init__(
        self,
        model: Model | str | Summarizer,
        store: Store | str | None,
        *,
        trigger: TriggerSpec,
        keep: ContextSize,
        token_counter: TokenCounter = approx_tokens,
        max_summary_tokens: int = 1000,
        prompts: Prompts | None = None,
        summary_template: str = DEFAULT_SUMMARY_TEMPLATE,
        summary_placement: Placement = "system",
        namespace: str = "",
        ttl: float | None = None,
        context_window: int | None = None,
        on_summarizer_error: OnSummarizerError = "degrade",
        refresh: Literal["inline", "background"] = "inline",
        ceiling: ContextSize | None = None,
        on_store_error: Literal["raise", "bypass"] = "raise",
        on_over_budget: OnOverBudget = "cut",
    ) -> None:
        check_choice("summary_placement", summary_placement, ("system", "user"))
        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or context_window < 1
        ):
            raise ConfigurationError(
                f"context_window must be a positive number of tokens, got {context_window!r}"
            )
        if context_window is None and needs_context_size(trigger, keep):
            raise ConfigurationError(
                "a fraction in trigger or keep needs the model's context size: pass "
                "context_window=, or use ('tokens', n) or ('messages', n)"
            )
        self.compression = AgentCompression(
            _summarizer(model),
            store,
            trigger=trigger,
            keep=keep,
            on_summarizer_error=on_summarizer_error,
            refresh=refresh,
            ceiling=ceiling,
            settings={
                "token_counter": token_counter,
                "max_summary_tokens": max_summary_tokens,
                "prompts": prompts,
                "summary_template": summary_template,
                "summary_role": "system",
                "namespace": namespace,
                "ttl": ttl,
                "on_store_error": on_store_error,
                "on_over_budget": on_over_budget,
            },
        )
        self.placement: Placement = summary_placement
        self.context_window = context_window

    @property
    def stats(self) -> Stats:
        """The counters: requests, cache hits, summarizer calls, tokens saved."""
        return self.compression.stats

    async def compress(self, items: Sequence[Any], thread_id: str | None) -> list[Any]:
        """``items`` as the model should receive them: the very items, or the pinned ones, the
        summary and the items after what it stands for."""
        dicts, spans = from_items(items)
        result = await self.compression.compress(dicts, thread_id, context_size=self.context_window)
        done = summarized(result)
        return list(items) if done is None else window(items, spans, done, self.placement)


def _summarizer(model: object) -> Summarizer:
    if isinstance(model, (Model, str)):
        return AgentsSummarizer(model)
    if not callable(model):
        raise ConfigurationError(
            "model must be an Agents SDK Model, a model name such as 'gpt-4o-mini', or a "
            f"slimcache summarizer (messages, context) -> str; got {model!r}"
        )
    check_summarizer(model)
    return model
