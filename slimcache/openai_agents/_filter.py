"""``CachedSummarizationFilter``: cached summaries for an Agents SDK run's model input."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData

from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.settings import SettingsSignature
from slimcache.frameworks.threads import ThreadIds
from slimcache.openai_agents._compressing import ItemCompression
from slimcache.openai_agents._settings import OpenAIAgentsOptions, OpenAIAgentsSettings
from slimcache.stores import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedSummarizationFilter"]


ThreadId = str | Callable[[CallModelData[Any]], "str | None"] | None


class CachedSummarizationFilter(ItemCompression):
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
            ``namespace="app"``, ``lease_ttl=3.0``, ...): those documented in
            :class:`~slimcache.openai_agents.OpenAIAgentsSettings` (every agent integration's,
            and ``context_window``, which a fraction in ``trigger``, ``keep`` or ``ceiling``
            needs), and every setting of :class:`~slimcache.SummarizeCompressor` it passes
            on, with the compressor's meaning and default.

    A message count counts the messages as slimcache sees them: one per user, system or
    developer message and per tool output, and one per model turn (its messages, calls and
    reasoning together).

    Raises:
        ConfigurationError: For any invalid argument (a fraction without ``context_window``
            among them), before the store is opened.
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
        self._start("CachedSummarizationFilter", model, store, options)
        self._threads: ThreadIds[CallModelData[Any]] = ThreadIds(
            thread_id, owner="CachedSummarizationFilter", context="CallModelData"
        )

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(OpenAIAgentsSettings)

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The model input with the older items summarized (from the cache when it can).

        Raises:
            InvalidInput: An item breaks a rule slimcache checks.
            StoreError: The store failed (with ``on_store_error="raise"``).
            SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        """
        given = data.model_data
        items = await self._compress_items(given.input, self._threads.of(data))
        return ModelInputData(input=items, instructions=given.instructions)
