"""``CachedSummarizationFilter``: cached summaries for an Agents SDK run's model input."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData

from slimcache._exceptions import ConfigurationError
from slimcache.core.results import Stats
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE
from slimcache.core.summarizer import OnOverBudget, Prompts, Summarizer
from slimcache.frameworks.compression import OnSummarizerError
from slimcache.frameworks.sizes import ContextSize, TriggerSpec
from slimcache.messages import TokenCounter, approx_tokens
from slimcache.openai_agents._compressing import ItemCompression
from slimcache.openai_agents._convert import Placement
from slimcache.stores import Store

__all__ = ["CachedSummarizationFilter"]

logger = logging.getLogger("slimcache")

ThreadId = str | Callable[[CallModelData[Any]], "str | None"] | None


class CachedSummarizationFilter:
    """Summarizes what an Agents SDK run's model receives, with the summaries cached in your
    store.

    Give it as ``RunConfig(call_model_input_filter=...)``. Before each model call, once
    ``trigger`` is reached, the older input items are sent as one summary message and the last
    ``keep`` stay verbatim: a ``function_call`` and its ``function_call_output`` are never
    parted, and a ``reasoning`` item stays with the call it precedes. Only the model's input is
    compressed: the session and the list you passed are left as they are. The summaries live in
    ``store`` under ``thread_id``, so every worker serves and extends the same ones (a history
    that has not grown past the trigger makes no summarizer call).

    Args:
        model: What writes the summaries: an Agents SDK ``Model``, a model name the SDK resolves
            (``"gpt-4o-mini"``), or a slimcache summarizer ``(messages, context) -> str``.
        store: A store, a store URL (opened here and closed by :meth:`close`), or ``None`` for
            one in this process.
        trigger: When to summarize: ``("messages", n)`` when the verbatim messages reach ``n``,
            ``("tokens", n)`` when all the input does, ``("fraction", f)`` of
            ``context_window``; a dict of sizes that must all be reached, or a list of which any
            one suffices.
        keep: How much stays verbatim: ``("messages", n)``, ``("tokens", n)`` or
            ``("fraction", f)``; below a trigger of the same unit.
        thread_id: The thread the summaries are kept under: a string, or a function of the
            ``CallModelData`` (its ``context`` holds your run context). Without one nothing is
            cached.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        max_summary_tokens: The summary's token budget.
        prompts: The prompts the summarizer gets (default: slimcache's).
        summary_template: The summary's text as the model sees it.
        summary_placement: The role of the summary message: ``"system"`` (default) or
            ``"user"``.
        namespace: Namespace of every store key.
        ttl: Seconds cached summaries live (``None``: until deleted); it slides on hits.
        context_window: The model's context window in tokens, for fractions.
        on_summarizer_error: ``"degrade"`` (default): when the summarizer fails, the model gets
            the last cached summary and the items since (every item when none is cached), with
            a warning; ``"uncompressed"``: every item; ``"raise"``.
        refresh: ``"inline"`` (default): a call the trigger fires on waits for its summary.
            ``"background"``: the model gets the cached summary and everything after it at
            once while that stays within ``ceiling``, and the summary is extended behind the
            call (see the guide "Refresh summaries in the background").
        ceiling: With ``refresh="background"``, how much the compressed input may hold, in the
            sizes of ``trigger`` (``("messages", 80)``, ``("tokens", 6000)``, ...).
        on_store_error: ``"raise"`` (default) or ``"bypass"`` the cache.
        on_over_budget: A summary still over ``max_summary_tokens`` after the condense call is
            ``"cut"`` (default) to the budget at a sentence or word boundary, counted in
            ``stats.cut_over_budget`` and logged, or is a summarizer failure (``"raise"``; see
            ``on_summarizer_error``).

    A message count counts the messages as slimcache sees them: one per user, system or
    developer message and per tool output, and one per model turn (its messages, calls and
    reasoning together).

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        MissingExtraError: ``openai-agents`` is not installed (on import).
    """

    def __init__(
        self,
        model: Model | str | Summarizer,
        store: Store | str | None = None,
        *,
        trigger: TriggerSpec = ("messages", 50),
        keep: ContextSize = ("messages", 20),
        thread_id: ThreadId = None,
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
        if thread_id is not None and not isinstance(thread_id, str) and not callable(thread_id):
            raise ConfigurationError(
                f"thread_id must be a string or a function of the CallModelData, got {thread_id!r}"
            )
        self._items = ItemCompression(
            model,
            store,
            trigger=trigger,
            keep=keep,
            token_counter=token_counter,
            max_summary_tokens=max_summary_tokens,
            prompts=prompts,
            summary_template=summary_template,
            summary_placement=summary_placement,
            namespace=namespace,
            ttl=ttl,
            context_window=context_window,
            on_summarizer_error=on_summarizer_error,
            refresh=refresh,
            ceiling=ceiling,
            on_store_error=on_store_error,
            on_over_budget=on_over_budget,
        )
        self._thread_id = thread_id
        self._warned_no_thread = False

    @property
    def store(self) -> Store:
        """The store the summaries are kept in."""
        return self._items.compression.store

    @property
    def stats(self) -> Stats:
        """The counters: requests, cache hits, summarizer calls, tokens saved."""
        return self._items.stats

    def close(self) -> None:
        """Close the store when it was given as a URL."""
        self._items.compression.close()

    async def aclose(self) -> None:
        """:meth:`close`, from async code."""
        await self._items.compression.aclose()

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The model input with the older items summarized (from the cache when it can).

        Raises:
            InvalidInput: An item breaks a rule slimcache checks.
            StoreError: The store failed (with ``on_store_error="raise"``).
            SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        """
        given = data.model_data
        items = await self._items.compress(given.input, self._thread_of(data))
        return ModelInputData(input=items, instructions=given.instructions)

    def _thread_of(self, data: CallModelData[Any]) -> str | None:
        given = self._thread_id
        found = given(data) if callable(given) else given
        if found is None and not self._warned_no_thread:
            self._warned_no_thread = True
            logger.warning(
                "CachedSummarizationFilter: no thread_id, so nothing is cached and every model "
                "call summarizes again"
            )
        return None if found is None else str(found)
