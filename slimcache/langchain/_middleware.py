"""``CachedSummarizationMiddleware``: cached summaries for a ``create_agent`` agent.

Imported on first use by :mod:`slimcache.langchain`, as it subclasses LangChain's
``AgentMiddleware``. It is built on the framework kit, as the other integrations are: its
settings are an :class:`~slimcache.frameworks.settings.AgentSettings`, and an
:class:`~slimcache.frameworks.compression.AgentCompression` compresses each model call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.config import get_config

from slimcache._exceptions import ConfigurationError
from slimcache.core.results import CompressionResult
from slimcache.core.settings.checks import check_choice
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.compression import AgentCompression, CompressionOwner, summarized
from slimcache.frameworks.settings import (
    DEFAULT_KEEP,
    DEFAULT_TRIGGER,
    AgentSettings,
    SettingsSignature,
    settings_from,
)
from slimcache.frameworks.sizes import ContextSize, TriggerSpec
from slimcache.frameworks.threads import ThreadIds
from slimcache.langchain._convert import from_langchain
from slimcache.langchain._porting import (
    InputBound,
    compressor_keywords,
    read_deprecated,
    summary_writer,
)
from slimcache.langchain._summarizer import check_max_tokens_kwarg
from slimcache.messages import TokenCounter
from slimcache.stores import Store

__all__ = ["CachedSummarizationMiddleware"]

Placement = Literal["system", "human"]


class CachedSummarizationMiddleware(CompressionOwner, AgentMiddleware):
    """Summarizes what an agent's model sees, with the summaries cached in your store.

    Shaped like LangChain's ``SummarizationMiddleware``, with three differences that come from
    the cache: the summaries live in ``store`` under the run's thread id
    (``configurable.thread_id``), so every worker and every later run serves and extends the
    same ones; only the model's request is compressed (the graph's state keeps every
    message, so nothing is lost and an edit of an old message is seen); and a longer history
    extends the cached summary with only the new messages rather than summarizing anew.

    The summary goes where every provider accepts it: merged into the agent's system prompt
    (one leading system message), or as a leading human message, as LangChain's middleware
    puts it (``summary_placement="human"``), which leaves the system prompt as it is for
    providers that cache it.

    Both ``invoke`` and ``ainvoke`` work, on the same instance: either way the store and the
    summarizer run on the event loop of :mod:`slimcache.sync`, where the store's connections
    stay, and a chat model summarizes through its sync ``invoke`` on slimcache's summarizer
    threads, so an async agent's own event loop and HTTP clients are never shared.

    Args:
        model: What writes the summaries: a chat model, a model string as ``init_chat_model``
            takes it (``"openai:gpt-4o-mini"``), or a slimcache summarizer
            ``(messages, context) -> str`` (from :mod:`slimcache.llm`, say; an async one runs
            on slimcache's event loop, so give it a client of its own).
        store: A store, a store URL (``"redis://localhost:6379/0"``, opened with
            :func:`~slimcache.open_store` and closed by :meth:`close`), or ``None`` for one in
            this process. A store passed in stays open.
        trigger: When to summarize: ``("messages", n)`` when the verbatim messages reach
            ``n``; ``("tokens", n)`` when all the messages sent do (the leading system
            messages in the state, the summary and the verbatim messages; the system prompt is
            not counted, as in LangChain); ``("fraction", f)`` when they reach that fraction
            of the model's context window; a dict of those that must all be reached; or a
            list of sizes and dicts of which any one suffices. ``None`` never summarizes, as
            in LangChain's middleware.
        keep: How much stays verbatim once summarized: ``("messages", n)``, ``("tokens", n)``
            or ``("fraction", f)``. An assistant message is never parted from its tool
            results. It must be below a trigger of the same unit.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``), or a message list's
            as LangChain's counters do (``count_tokens_approximately``; any function whose
            first parameter is ``messages``), read through
            :func:`~slimcache.langchain.as_token_counter`.
        summary_prompt: LangChain's: a prompt with ``{messages}``, formatted as LangChain
            formats it and sent as one human message with the messages (and the previous
            summary, when extending) in its place. Instead of ``prompts``.
        trim_tokens_to_summarize: The most tokens one summarizer call is sent (the
            compressor's ``max_input_tokens``): the rest is folded in by further calls.
            ``"auto"`` (default): four times ``max_summary_tokens``, at least 6,000; ``None``:
            no bound.
        summarizer: LangChain's: a chat model or model string that writes the summaries in
            place of ``model`` (which then only tells the context window), or a function or
            ``Runnable`` from the messages to the summary text, given the previous summary
            first when extending.
        summary_placement: ``"system"`` (default): appended to the system prompt, or the
            system message when the agent has none; ``"human"``: a human message before the
            verbatim messages.
        max_tokens_kwarg: When ``model`` is a chat model or a model string, the keyword that
            passes ``max_summary_tokens`` to each summarizing call as the reply's limit
            (``"max_tokens"``; ``"extra_body.max_tokens"`` for ``ChatOpenAI`` on servers that
            read only ``max_tokens``); see :class:`~slimcache.langchain.LangChainSummarizer`.
            By default a ``ChatOpenAI`` with no limit of its own is sent the budget as
            ``max_tokens`` (``max_completion_tokens`` where the server refuses that), and any
            other model's own ``max_tokens`` applies.
        **options: The settings every agent integration takes, by keyword, documented with
            their defaults in :class:`~slimcache.frameworks.settings.AgentSettings`:
            ``on_summarizer_error`` (``"degrade"``, the default: when the summarizer fails, an
            HTTP error, a timeout, a reply cut twice under ``on_truncated="raise"``, the model
            gets the newest cached summary that still matches the history and the messages
            after it, with a warning, and the next call tries again; ``"uncompressed"``;
            ``"raise"`` out of the agent), ``on_truncated`` (a chat model's reply cut at its
            limit is asked for once more, shorter, then kept with a warning, ``"accept"``, or
            is a failure, ``"raise"``) and ``ceiling``; and every setting of
            :class:`~slimcache.SummarizeCompressor` it passes on, by the compressor's keyword,
            with its meaning and default (``max_summary_tokens``, ``prompts``, ``namespace``,
            ``ttl``, ``strategy``, ``lock_wait``, ``lease_ttl``, ``store_timeout``,
            ``refresh``, ...). With ``refresh="background"`` and a ``ceiling`` in the sizes of
            ``trigger``, a model call is made at once with the summary the store has and
            every message after it while they stay below the ceiling, and the summary is
            extended behind it on slimcache's event loop (:func:`slimcache.sync.drain` waits
            for it). ``stats`` counts what was served after a failure, its requests once.

    LangChain's deprecated ``max_tokens_before_summary`` and ``messages_to_keep`` work too, with
    its ``DeprecationWarning``. A chat model's summary call is tried up to three times, as
    LangChain's middleware tries it, unless its client retries it already (a ``ChatOpenAI`` or
    ``ChatAnthropic`` with ``max_retries`` above 0, as by default): then the client's tries are
    the only ones.

    A fraction is of the context window in the profile of the agent's model
    (``model.profile["max_input_tokens"]``), else of ``model``'s, read at each call.

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
        MissingExtraError: ``langchain`` 1.0 or later is not installed (on import).
    """

    def __init__(
        self,
        model: str | BaseChatModel | Summarizer,
        store: Store | str | None = None,
        *,
        trigger: TriggerSpec | None = DEFAULT_TRIGGER,
        keep: ContextSize = DEFAULT_KEEP,
        token_counter: TokenCounter | Callable[..., int] = DEFAULTS.token_counter,
        summary_prompt: str | None = None,
        trim_tokens_to_summarize: InputBound = DEFAULTS.max_input_tokens,
        summarizer: str | BaseChatModel | Runnable[Any, str] | Callable[..., Any] | None = None,
        summary_placement: Placement = "system",
        max_tokens_kwarg: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        trigger, keep = read_deprecated(trigger, keep, options)
        check_choice("summary_placement", summary_placement, ("system", "human"))
        self._placement: Placement = summary_placement
        keywords = compressor_keywords(
            options, token_counter, summary_prompt, trim_tokens_to_summarize
        )
        settings = settings_from(
            AgentSettings,
            "CachedSummarizationMiddleware",
            {**keywords, "trigger": trigger, "keep": keep},
        )
        self._chat_model = _chat_model(model)
        writer = summary_writer(
            model,
            summarizer,
            self._chat_model,
            settings.on_truncated,
            check_max_tokens_kwarg(max_tokens_kwarg),
        )
        # Every argument is checked before the store is opened, LangChain's by their names.
        self._compression = _named_for_langchain(
            lambda: AgentCompression(writer, store, settings), "max_input_tokens" not in options
        )
        self._threads: ThreadIds[ModelRequest] = ThreadIds(
            None,
            owner="CachedSummarizationMiddleware",
            context="ModelRequest",
            carried=_thread_id,
            missing="the run has no configurable.thread_id",
        )

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(AgentSettings)

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Compress the request's messages (from the cache when it can), then call the model."""
        messages, thread_id, size = self._prepare(request)
        result = self._compression.compress_blocking(messages, thread_id, context_size=size)
        return handler(self._with_summary(request, result))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Compress the request's messages (from the cache when it can), then call the model."""
        messages, thread_id, size = self._prepare(request)
        result = await self._compression.compress(messages, thread_id, context_size=size)
        return await handler(self._with_summary(request, result))

    # ------------------------------------------------------------------ internals

    def _prepare(
        self, request: ModelRequest
    ) -> tuple[Callable[[], list[dict[str, Any]]], str | None, int | None]:
        """The request's messages (converted by the kit, which passes the request as it came
        when they break a rule), its thread, and the model's context size for fractions."""
        size = None
        if self._compression.needs_context_size:
            size = _context_size(request.model) or _context_size(self._chat_model)
            if size is None:
                raise ConfigurationError(
                    "a fraction in trigger or keep needs the model's context size, and "
                    "neither the agent's model nor this middleware's has a profile with "
                    "max_input_tokens: use token counts, or give the chat model "
                    'profile={"max_input_tokens": ...}'
                )
        given = request.messages
        return (lambda: from_langchain(given)), self._threads.of(request), size

    def _with_summary(self, request: ModelRequest, result: CompressionResult) -> ModelRequest:
        done = summarized(result)
        if done is None:
            return request
        originals: list[AnyMessage] = list(request.messages)
        pinned = originals[: done.pinned]
        kept = pinned + originals[done.end + 1 :]
        if self._placement == "human":
            summary = HumanMessage(done.text, additional_kwargs={"lc_source": "summarization"})
            return request.override(messages=[*pinned, summary, *kept[done.pinned :]])
        merged = _merged(request.system_message, done.text)
        return request.override(system_message=merged, messages=kept)


def _named_for_langchain(build: Callable[[], AgentCompression], renamed: bool) -> AgentCompression:
    """``build()``, its errors naming ``max_input_tokens`` as LangChain's middleware names it
    (``trim_tokens_to_summarize``) when ``renamed``."""
    try:
        return build()
    except ConfigurationError as exc:
        message = str(exc)
        if not renamed or not message.startswith("max_input_tokens"):
            raise
        raise ConfigurationError(
            "trim_tokens_to_summarize" + message[len("max_input_tokens") :]
        ) from None


def _chat_model(model: object) -> BaseChatModel | None:
    """The chat model ``model`` names or is, or ``None`` for a slimcache summarizer."""
    if isinstance(model, str):
        try:
            return init_chat_model(model)
        except (ValueError, ImportError) as exc:
            raise ConfigurationError(f"model {model!r}: {exc}") from exc
    return model if isinstance(model, BaseChatModel) else None


def _context_size(model: object) -> int | None:
    profile = getattr(model, "profile", None)
    size = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def _thread_id(request: ModelRequest) -> str | None:
    """The run's ``configurable.thread_id``."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a run, or Python 3.10 in async code: ask the runtime
        configurable = {}
    found = configurable.get("thread_id")
    if found is None:
        info = getattr(getattr(request, "runtime", None), "execution_info", None)
        found = getattr(info, "thread_id", None)
    return None if found is None else str(found)


def _merged(system: SystemMessage | None, summary: str) -> SystemMessage:
    """The agent's system message with the summary after it, or the summary alone."""
    if system is None:
        return SystemMessage(summary)
    content = system.content
    if isinstance(content, str):
        merged: Any = f"{content}\n\n{summary}" if content else summary
    else:
        merged = [*content, {"type": "text", "text": summary}]
    return system.model_copy(update={"content": merged})
