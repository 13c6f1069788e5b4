"""``CachedSummarization``: cached summaries for a Pydantic AI agent, as a capability.

Imported on first use by :mod:`slimcache.pydantic_ai`, as it subclasses Pydantic AI's
``AbstractCapability``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext

from slimcache._exceptions import ConfigurationError
from slimcache.core.results import Stats
from slimcache.core.settings.checks import check_choice, check_summarizer
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE
from slimcache.core.summarizer import OnOverBudget, Prompts, Summarizer
from slimcache.core.truncation import OnTruncated, check_on_truncated
from slimcache.frameworks.compression import AgentCompression, OnSummarizerError, summarized
from slimcache.frameworks.sizes import ContextSize, TriggerSpec
from slimcache.messages import TokenCounter, approx_tokens
from slimcache.pydantic_ai._convert import Placement, from_pydantic_ai, window
from slimcache.pydantic_ai._summarizer import PydanticAISummarizer
from slimcache.stores import Store

__all__ = ["CachedSummarization"]

logger = logging.getLogger("slimcache")

ThreadId = str | Callable[[RunContext[Any]], "str | None"] | None


class CachedSummarization(AbstractCapability[Any]):
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
        trigger: When to summarize: ``("messages", n)`` when the verbatim messages reach ``n``,
            ``("tokens", n)`` when all the messages sent do, ``("fraction", f)`` of the model's
            context window; a dict of sizes that must all be reached, or a list of which any
            one suffices.
        keep: How much stays verbatim once summarized: ``("messages", n)``, ``("tokens", n)``
            or ``("fraction", f)``; below a trigger of the same unit.
        thread_id: The thread the summaries are kept under: a string, or a function of the
            ``RunContext``; by default the run's ``conversation_id``.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        max_summary_tokens: The summary's token budget.
        prompts: The prompts the summarizer gets (default: slimcache's).
        summary_template: The summary's text as the model sees it; ``{summary}``,
            ``{start}``, ``{end}`` and ``{count}`` are filled in.
        summary_placement: ``"system"`` (default): a system prompt part after the agent's own;
            ``"user"``: a user prompt part.
        namespace: Namespace of every store key.
        ttl: Seconds cached summaries live (``None``: until deleted); it slides on hits.
        on_summarizer_error: ``"degrade"`` (default): when the summarizer fails, the model gets
            the last cached summary and the messages since (all messages when none is cached),
            with a warning; ``"uncompressed"``: all messages; ``"raise"``.
        refresh: ``"inline"`` (default): a call the trigger fires on waits for its summary.
            ``"background"``: the model gets the cached summary and everything after it at
            once while that stays within ``ceiling``, and the summary is extended behind the
            call (see the guide "Refresh summaries in the background").
        ceiling: With ``refresh="background"``, how much the compressed input may hold, in the
            sizes of ``trigger`` (``("messages", 80)``, ``("tokens", 6000)``, ...).
        on_store_error: ``"raise"`` (default) or ``"bypass"`` the cache.
        on_truncated: When ``model`` is a Pydantic AI model or a model name: a reply still cut
            at the budget after asking for a shorter one is kept with a warning (``"accept"``,
            default; ``stats.truncated_accepted`` counts it) or is a summarizer failure
            (``"raise"``). A slimcache summarizer given as ``model`` has its own.
        on_over_budget: A summary still over ``max_summary_tokens`` after the condense call is
            ``"cut"`` (default) to the budget at a sentence or word boundary, counted in
            ``stats.cut_over_budget`` and logged, or is a summarizer failure (``"raise"``; see
            ``on_summarizer_error``).

    A message count counts the messages as slimcache sees them: one per part of a request (a
    system prompt, a user prompt, a tool return) and one per response.

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        MissingExtraError: ``pydantic-ai`` is not installed (on import).
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
        on_summarizer_error: OnSummarizerError = "degrade",
        refresh: Literal["inline", "background"] = "inline",
        ceiling: ContextSize | None = None,
        on_store_error: Literal["raise", "bypass"] = "raise",
        on_truncated: OnTruncated = "accept",
        on_over_budget: OnOverBudget = "cut",
    ) -> None:
        check_choice("summary_placement", summary_placement, ("system", "user"))
        if thread_id is not None and not isinstance(thread_id, str) and not callable(thread_id):
            raise ConfigurationError(
                f"thread_id must be a string or a function of the RunContext, got {thread_id!r}"
            )
        self._model = model if isinstance(model, Model) else None
        self._compression = AgentCompression(
            _summarizer(model, check_on_truncated(on_truncated)),
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
        self._thread_id = thread_id
        self._placement: Placement = summary_placement
        self._warned_no_thread = False

    # ------------------------------------------------------------------ public

    @property
    def store(self) -> Store:
        """The store the summaries are kept in."""
        return self._compression.store

    @property
    def stats(self) -> Stats:
        """The counters: requests, cache hits, summarizer calls, tokens saved."""
        return self._compression.stats

    def close(self) -> None:
        """Close the store when it was given as a URL."""
        self._compression.close()

    async def aclose(self) -> None:
        """:meth:`close`, from async code."""
        await self._compression.aclose()

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
        result = await self._compression.compress(dicts, self._thread_of(ctx), context_size=size)
        done = summarized(result)
        return messages if done is None else window(messages, sources, done, self._placement)

    # ------------------------------------------------------------------ internals

    def _thread_of(self, ctx: RunContext[Any]) -> str | None:
        given = self._thread_id
        found = given(ctx) if callable(given) else given
        if found is None:
            found = getattr(ctx, "conversation_id", None)
        if found is None and not self._warned_no_thread:
            self._warned_no_thread = True
            logger.warning(
                "CachedSummarization: the run has no conversation_id and no thread_id was "
                "given, so nothing is cached and every request summarizes again"
            )
        return None if found is None else str(found)

    def __repr__(self) -> str:
        return f"CachedSummarization(store={self.store!r})"


def _summarizer(model: object, on_truncated: OnTruncated) -> Summarizer:
    if isinstance(model, (Model, str)):
        return PydanticAISummarizer(model, on_truncated=on_truncated)
    if not callable(model):
        raise ConfigurationError(
            "model must be a Pydantic AI model, a model name such as 'openai:gpt-4o-mini', or "
            f"a slimcache summarizer (messages, context) -> str; got {model!r}"
        )
    check_summarizer(model)
    return model


def _context_window(model: object) -> int | None:
    size = getattr(model, "context_window", None)
    if size is None:
        profile = getattr(model, "profile", None)
        size = profile.get("context_window") if isinstance(profile, Mapping) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None
