"""``CachedSummarizationFilter``: cached summaries for an Agents SDK run's model input."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData

from slimcache.core.results import Stats
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.settings import SettingsSignature, settings_from
from slimcache.frameworks.threads import ThreadIds
from slimcache.openai_agents._compressing import ItemCompression
from slimcache.openai_agents._settings import OpenAIAgentsOptions, OpenAIAgentsSettings
from slimcache.stores import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedSummarizationFilter"]


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
        thread_id: The thread the summaries are kept under: a string, or a function of the
            ``CallModelData`` (its ``context`` holds your run context). Without one nothing is
            cached.
        **options: The settings, by keyword (``trigger=("messages", 50)``,
            ``namespace="app"``, ...), each documented with its default in
            :class:`~slimcache.openai_agents.OpenAIAgentsSettings`: those every agent
            integration takes, and ``context_window``, which a fraction in ``trigger``,
            ``keep`` or ``ceiling`` needs.

    A message count counts the messages as slimcache sees them: one per user, system or
    developer message and per tool output, and one per model turn (its messages, calls and
    reasoning together).

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
        MissingExtraError: ``openai-agents`` is not installed (on import).
    """

    def __init__(
        self,
        model: Model | str | Summarizer,
        store: Store | str | None = None,
        *,
        thread_id: ThreadId = None,
        **options: Unpack[OpenAIAgentsOptions],
    ) -> None:
        settings = settings_from(OpenAIAgentsSettings, "CachedSummarizationFilter", options)
        self._items = ItemCompression(model, store, settings)
        self._threads: ThreadIds[CallModelData[Any]] = ThreadIds(
            thread_id, owner="CachedSummarizationFilter", context="CallModelData"
        )

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(OpenAIAgentsSettings)

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
        items = await self._items.compress(given.input, self._threads.of(data))
        return ModelInputData(input=items, instructions=given.instructions)
