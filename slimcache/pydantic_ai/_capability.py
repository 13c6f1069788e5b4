"""``CachedSummarization``: cached summaries for a Pydantic AI agent, as a capability.

Imported on first use by :mod:`slimcache.pydantic_ai`, as it subclasses Pydantic AI's
``AbstractCapability``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext

from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.compression import AgentCompression, CompressionOwner, summarized
from slimcache.frameworks.settings import (
    AgentOptions,
    AgentSettings,
    SettingsSignature,
    settings_from,
)
from slimcache.frameworks.summarizers import summarizer_for
from slimcache.frameworks.threads import ThreadIds
from slimcache.pydantic_ai._convert import from_pydantic_ai, window
from slimcache.pydantic_ai._summarizer import PydanticAISummarizer
from slimcache.stores import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedSummarization"]


ThreadId = str | Callable[[RunContext[Any]], "str | None"] | None

# What model may be besides a slimcache summarizer, as an error names it.
_MODELS = "a Pydantic AI model, a model name such as 'openai:gpt-4o-mini'"


class CachedSummarization(CompressionOwner, AbstractCapability[Any]):
    """Summarizes what a Pydantic AI agent's model receives, with the summaries cached in your
    store.

    Add it to an agent (``Agent(model, capabilities=[CachedSummarization(...)])``). Before each
    model request, once ``trigger`` is reached, the older messages are sent as one summary and
    the last ``keep`` stay verbatim; a tool call and its return are never parted. Only the
    request is compressed: the run's history (``result.all_messages()``) keeps every message.
    The summaries live in ``store`` under the run's ``conversation_id``, so every worker and
    every later run serves the same ones (a request whose history has not grown past the trigger
    makes no summarizer call) and a longer history extends the cached summary with only the new
    messages.

    The same object is also a plain history processor ``(ctx, messages) -> messages``: it can
    be given where one is expected, such as ``ProcessHistory(summarize)``, which also rewrites
    the run's history.

    ``run_sync``, ``run`` and ``run_stream`` all work: the store and the compressor run on the
    event loop of :mod:`slimcache.sync`, and a Pydantic AI model summarizes on the agent's own.

    Args:
        model: What writes the summaries: a Pydantic AI model, a model name
            (``"openai:gpt-4o-mini"``), or a slimcache summarizer ``(messages, context) -> str``.
        store: A store, a store URL (opened here and closed by :meth:`close`), or ``None`` for
            one in this process.
        thread_id: The thread the summaries are kept under: a string, or a function of the
            ``RunContext``; by default the run's ``conversation_id``.
        **options: The settings, by keyword (``trigger=("messages", 50)``,
            ``namespace="app"``, ``lease_ttl=3.0``, ...): those every agent integration takes,
            documented in :class:`~slimcache.pydantic_ai.AgentSettings`, and every setting of
            :class:`~slimcache.SummarizeCompressor` it passes on, with the compressor's meaning
            and default. A fraction in ``trigger``, ``keep`` or ``ceiling`` is of the model's
            context window, as the model gives it.

    A message count counts the messages as slimcache sees them: one per part of a request (a
    system prompt, a user prompt, a tool return) and one per response.

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
        MissingExtraError: ``pydantic-ai`` is not installed (on import).
    """

    def __init__(
        self,
        model: Model | str | Summarizer,
        store: Store | str | None = None,
        *,
        thread_id: ThreadId = None,
        **options: Unpack[AgentOptions],
    ) -> None:
        settings = settings_from(AgentSettings, "CachedSummarization", options)
        self._model = model if isinstance(model, Model) else None
        self._settings = settings
        make = functools.partial(PydanticAISummarizer, on_truncated=settings.on_truncated)
        summarizer = summarizer_for(model, Model, make, what=_MODELS)
        self._compression = AgentCompression(summarizer, store, settings)
        self._threads: ThreadIds[RunContext[Any]] = ThreadIds(
            thread_id,
            owner="CachedSummarization",
            context="RunContext",
            carried=_conversation_id,
            missing="the run has no conversation_id and no thread_id was given",
            call="request",
        )

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(AgentSettings)

    # ------------------------------------------------------------------ public

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Compress the messages of this request (from the cache when it can); the run's
        history is left as it is."""
        request_context.messages = await self.compress(
            ctx, list(request_context.messages), request_context.model
        )
        return request_context

    async def __call__(
        self, ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        """The history processor: ``messages`` compressed (see :meth:`compress`)."""
        return await self.compress(ctx, messages, ctx.model)

    async def compress(
        self, ctx: RunContext[Any], messages: list[ModelMessage], model: object = None
    ) -> list[ModelMessage]:
        """``messages`` as the model should receive them: unchanged, or the summary and the
        messages after it.

        Args:
            ctx: The run's context (for the thread id).
            messages: The history to send.
            model: The model about to be called (its context window serves fractions).

        Raises:
            InvalidInput: A message breaks a rule slimcache checks.
            StoreError: The store failed (with ``on_store_error="raise"``).
            SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        """
        dicts, sources = from_pydantic_ai(messages)
        size = None
        if self._compression.needs_context_size:
            size = _context_window(model) or _context_window(self._model)
        result = await self._compression.compress(dicts, self._threads.of(ctx), context_size=size)
        done = summarized(result)
        return (
            messages
            if done is None
            else window(messages, sources, done, self._settings.summary_placement)
        )

    # ------------------------------------------------------------------ internals

    def __repr__(self) -> str:
        return f"CachedSummarization(store={self.store!r})"


def _conversation_id(ctx: RunContext[Any]) -> object:
    return getattr(ctx, "conversation_id", None)


def _context_window(model: object) -> int | None:
    size = getattr(model, "context_window", None)
    if size is None:
        profile = getattr(model, "profile", None)
        size = profile.get("context_window") if isinstance(profile, Mapping) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None
