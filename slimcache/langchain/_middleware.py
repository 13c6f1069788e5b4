"""``CachedSummarizationMiddleware``: cached summaries for a ``create_agent`` agent.

Imported on first use by :mod:`slimcache.langchain`, as it subclasses LangChain's
``AgentMiddleware``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.config import get_config

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.core.compressor import SummarizeCompressor
from slimcache.core.policy import Manual, Trigger
from slimcache.core.results import CompressionResult, Stats
from slimcache.core.settings.checks import check_choice
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE
from slimcache.core.summarizer import OnOverBudget, Prompts, Summarizer
from slimcache.core.truncation import OnTruncated, check_on_truncated
from slimcache.frameworks.compression import OnSummarizerError
from slimcache.frameworks.sizes import (
    ContextSize,
    TriggerSpec,
    ceiling_policy,
    keep_policy,
    needs_context_size,
    trigger_policy,
)
from slimcache.frameworks.stores import StoreHandle
from slimcache.frameworks.threads import ThreadIds
from slimcache.langchain._convert import from_langchain
from slimcache.langchain._porting import (
    DEFAULT_KEEP,
    DEFAULT_TRIGGER,
    InputBound,
    input_bound,
    prompts_for,
    read_deprecated,
    summary_writer,
    text_counter,
)
from slimcache.langchain._summarizer import check_max_tokens_kwarg
from slimcache.messages import TokenCounter, approx_tokens
from slimcache.stores import MemoryStore, Store
from slimcache.sync import default_runner

__all__ = ["CachedSummarizationMiddleware"]

logger = logging.getLogger("slimcache")

Placement = Literal["system", "human"]


# Validates the settings of a middleware whose context size is known only at its first call.
_PROBE_CONTEXT_SIZE = 1_000_000


class CachedSummarizationMiddleware(AgentMiddleware):
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
        max_summary_tokens: The summary's token budget.
        prompts: The prompts the summarizer gets (default: slimcache's).
        summary_template: The summary's text as the model sees it; ``{summary}``,
            ``{start}``, ``{end}`` and ``{count}`` are filled in.
        summary_placement: ``"system"`` (default): appended to the system prompt, or the
            system message when the agent has none; ``"human"``: a human message before the
            verbatim messages.
        namespace: Namespace of every store key.
        ttl: Seconds cached summaries live (``None``: until deleted). The TTL slides: a cache
            hit more than half the TTL after the thread's index was written gives the index and
            the summary served a fresh TTL (one batch), so a thread in use does not expire and
            one left alone expires ``ttl`` seconds after its last write or refresh.
        on_summarizer_error: When the summarizer fails (an HTTP error, a timeout, a reply cut
            twice under ``on_truncated="raise"``), the agent keeps running by default:
            ``"degrade"`` (default) sends the model the newest cached summary that still
            matches the history and the messages after it (the messages as they are when
            nothing is cached), with a warning logged, and the next call tries again;
            ``"uncompressed"`` sends the messages as they are; ``"raise"`` raises
            :class:`~slimcache.SummarizerError` out of the agent. ``stats.summarizer_errors``
            counts the failures.
        on_store_error: ``"raise"`` (default) or ``"bypass"`` the cache.
        on_truncated: When ``model`` is a chat model or a model string: a reply cut at the
            model's limit is asked for once more, shorter; if that one is cut too,
            ``"accept"`` (default) keeps it with a warning logged (``stats.truncated_accepted``
            counts it), and ``"raise"`` makes it a summarizer failure (see
            ``on_summarizer_error``). A slimcache summarizer given as ``model`` has its own.
        on_over_budget: A summary still over ``max_summary_tokens`` after the condense call is
            ``"cut"`` (default) to the budget at a sentence or word boundary, counted in
            ``stats.cut_over_budget`` and logged, or is a summarizer failure (``"raise"``;
            see ``on_summarizer_error``).
        max_tokens_kwarg: When ``model`` is a chat model or a model string, the keyword that
            passes ``max_summary_tokens`` to each summarizing call as the reply's limit
            (``"max_tokens"``; ``"extra_body.max_tokens"`` for ``ChatOpenAI`` on servers that
            read only ``max_tokens``); see :class:`~slimcache.langchain.LangChainSummarizer`.
            By default the model's own ``max_tokens`` applies.
        refresh: ``"inline"`` (default): a model call the trigger fires on waits for the
            summary. ``"background"``: while the messages sent stay below ``ceiling``, the model
            is called at once with the summary the store has (or none yet) and every message
            after it, and the summary is extended in the background, on slimcache's event loop
            (:func:`slimcache.sync.drain` waits for it; see :mod:`slimcache.background`).
        ceiling: With ``refresh="background"`` (and required then): the size, as ``trigger``
            counts it, at which a model call waits for the summary after all:
            ``("messages", n)``, ``("tokens", n)`` or ``("fraction", f)``; above a trigger of
            the same unit.

    LangChain's deprecated ``max_tokens_before_summary`` and ``messages_to_keep`` work too, with
    its ``DeprecationWarning``. A chat model's summary call is tried up to three times, as
    LangChain's middleware tries it.

    A fraction is of the context window in the profile of the agent's model
    (``model.profile["max_input_tokens"]``), else of ``model``'s, read at the first call.

    Raises:
        ConfigurationError: For any invalid argument.
        MissingExtraError: ``langchain`` 1.0 or later is not installed (on import).
    """

    def __init__(
        self,
        model: str | BaseChatModel | Summarizer,
        store: Store | str | None = None,
        *,
        trigger: TriggerSpec | None = DEFAULT_TRIGGER,
        keep: ContextSize = DEFAULT_KEEP,
        token_counter: TokenCounter | Callable[..., int] = approx_tokens,
        summary_prompt: str | None = None,
        trim_tokens_to_summarize: InputBound = "auto",
        summarizer: str | BaseChatModel | Runnable[Any, str] | Callable[..., Any] | None = None,
        max_summary_tokens: int = 1000,
        prompts: Prompts | None = None,
        summary_template: str = DEFAULT_SUMMARY_TEMPLATE,
        summary_placement: Placement = "system",
        namespace: str = "",
        ttl: float | None = None,
        on_summarizer_error: OnSummarizerError = "degrade",
        on_store_error: Literal["raise", "bypass"] = "raise",
        on_truncated: OnTruncated = "accept",
        on_over_budget: OnOverBudget = "cut",
        max_tokens_kwarg: str | None = None,
        refresh: Literal["inline", "background"] = "inline",
        ceiling: ContextSize | None = None,
        **deprecated: Any,
    ) -> None:
        super().__init__()
        trigger, keep = read_deprecated(trigger, keep, deprecated)
        _check_refresh(refresh, ceiling)
        _check_choices(summary_placement, on_summarizer_error)
        self._chat_model = _chat_model(model)
        writer = summary_writer(
            model,
            summarizer,
            self._chat_model,
            check_on_truncated(on_truncated),
            check_max_tokens_kwarg(max_tokens_kwarg),
        )
        self._degrade = on_summarizer_error == "degrade"
        self._trigger_spec = trigger
        self._keep_spec = keep
        self._placement: Placement = summary_placement
        self._options: dict[str, Any] = {
            "token_counter": text_counter(token_counter),
            "max_input_tokens": input_bound(trim_tokens_to_summarize),
            "max_summary_tokens": max_summary_tokens,
            "prompts": prompts_for(summary_prompt, prompts),
            "summary_template": summary_template,
            "namespace": namespace,
            "ttl": ttl,
            # "degrade" is the middleware's own: its compressor raises, and it serves the rest.
            "on_summarizer_error": "raise" if self._degrade else on_summarizer_error,
            "on_store_error": on_store_error,
            "on_over_budget": on_over_budget,
        }
        self._summarizer = writer
        self._refresh, self._ceiling_spec = refresh, ceiling
        # (A malformed ceiling is refused by the probe below, naming the ceiling.)
        ceiling_fraction = isinstance(ceiling, tuple) and ceiling[:1] == ("fraction",)
        self._needs_size = ceiling_fraction or needs_context_size(trigger or keep, keep)
        self._handle = StoreHandle(MemoryStore(), owned=False)  # replaced once all are checked
        self._lock = threading.Lock()
        self._compressor: SummarizeCompressor | None = None
        self._fallback: SummarizeCompressor | None = None
        self._threads: ThreadIds[ModelRequest] = ThreadIds(
            None,
            owner="CachedSummarizationMiddleware",
            context="ModelRequest",
            carried=_thread_id,
            missing="the run has no configurable.thread_id",
        )
        # Every argument is checked now, also when the context size is known only later; the
        # store last, so that one opened from a URL is never left unclosed by an error.
        probe = _named_for_langchain(self._build, _PROBE_CONTEXT_SIZE if self._needs_size else None)
        self._handle = StoreHandle.of(store)
        if not self._needs_size:
            self._compressor = self._build(None)
            self._fallback = self._build(None, fallback=True)
        del probe

    # ------------------------------------------------------------------ public

    @property
    def store(self) -> Store:
        """The store the summaries are kept in."""
        return self._handle.store

    @property
    def stats(self) -> Stats:
        """The compressor's counters: requests, cache hits, summarizer calls, tokens saved.

        What was served after a summarizer failure (``on_summarizer_error="degrade"``) is
        counted in, its requests once.
        """
        compressor, fallback = self._compressor, self._fallback
        if compressor is None or fallback is None:
            return Stats()
        main, served = compressor.stats, fallback.stats
        summed = {
            field.name: getattr(main, field.name) + getattr(served, field.name)
            for field in dataclasses.fields(Stats)
        }
        return Stats(**{**summed, "requests": main.requests})

    def close(self) -> None:
        """Close the store when this middleware opened it from a URL; a store passed in stays
        open. One left open is closed at exit, on the loop its connections belong to."""
        self._handle.close()

    async def aclose(self) -> None:
        """:meth:`close`, from async code."""
        await self._handle.aclose()

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Compress the request's messages (from the cache when it can), then call the model."""
        pair, messages, thread_id = self._prepare(request)
        result = default_runner().run(self._compress(pair, messages, thread_id))
        return handler(self._with_summary(request, result))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Compress the request's messages (from the cache when it can), then call the model."""
        pair, messages, thread_id = self._prepare(request)
        pending = default_runner().submit(self._compress(pair, messages, thread_id))
        result = await asyncio.wrap_future(pending)
        return await handler(self._with_summary(request, result))

    # ------------------------------------------------------------------ internals

    def _build(self, context_size: int | None, *, fallback: bool = False) -> SummarizeCompressor:
        """The compressor; ``fallback``: the same one, but it never summarizes, and so serves
        the newest cached summary that matches the history (or the messages as they are)."""
        spec = self._ceiling_spec
        trigger: Trigger = Manual()  # no trigger: never summarize, as LangChain's middleware
        if self._trigger_spec is not None:
            trigger = trigger_policy(self._trigger_spec, context_size)
        keep = keep_policy(self._keep_spec, trigger, context_size)
        return SummarizeCompressor(
            self._summarizer,
            self._handle.store,
            trigger=Manual() if fallback else trigger,
            keep=keep,
            summary_role="system",
            refresh=self._refresh,
            ceiling=None if spec is None else ceiling_policy(spec, trigger, context_size),
            **self._options,
        )

    async def _compress(
        self,
        pair: tuple[SummarizeCompressor, SummarizeCompressor],
        messages: list[dict[str, Any]],
        thread_id: str | None,
    ) -> CompressionResult:
        """Compress; on a summarizer failure, serve what the cache has (``"degrade"``)."""
        compressor, fallback = pair
        try:
            return await compressor.compress_detailed(messages, thread_id=thread_id)
        except SummarizerError as exc:
            if not self._degrade:
                raise
            logger.warning(
                "CachedSummarizationMiddleware: the summarizer failed, so the model gets the "
                "newest cached summary and the messages after it: %s",
                exc,
            )
            return await fallback.compress_detailed(messages, thread_id=thread_id)

    def _compressors_for(
        self, agent_model: object
    ) -> tuple[SummarizeCompressor, SummarizeCompressor]:
        """The compressor and its fallback, built at the first call when a fraction needs the
        model's context size."""
        with self._lock:
            if self._compressor is None or self._fallback is None:
                size = _context_size(agent_model) or _context_size(self._chat_model)
                if size is None:
                    raise ConfigurationError(
                        "a fraction in trigger or keep needs the model's context size, and "
                        "neither the agent's model nor this middleware's has a profile with "
                        "max_input_tokens: use token counts, or give the chat model "
                        'profile={"max_input_tokens": ...}'
                    )
                self._fallback = self._build(size, fallback=True)
                self._compressor = self._build(size)
            return self._compressor, self._fallback

    def _prepare(
        self, request: ModelRequest
    ) -> tuple[tuple[SummarizeCompressor, SummarizeCompressor], list[dict[str, Any]], str | None]:
        pair = self._compressors_for(request.model)
        thread_id = self._threads.of(request)
        return pair, from_langchain(request.messages), thread_id

    def _with_summary(
        self,
        request: ModelRequest,
        result: CompressionResult,
    ) -> ModelRequest:
        if result.summary_range is None:
            return request
        originals: list[AnyMessage] = list(request.messages)
        end = result.summary_range[1]
        pinned = len(result.messages) - 1 - (len(originals) - end - 1)
        text = str(result.messages[pinned]["content"])
        kept = originals[:pinned] + originals[end + 1 :]
        if self._placement == "human":
            summary = HumanMessage(text, additional_kwargs={"lc_source": "summarization"})
            return request.override(messages=[*originals[:pinned], summary, *kept[pinned:]])
        return request.override(system_message=_merged(request.system_message, text), messages=kept)


def _named_for_langchain(
    build: Callable[[int | None], SummarizeCompressor], context_size: int | None
) -> SummarizeCompressor:
    """``build(context_size)``, its errors naming the keywords as LangChain's middleware names
    them (``trim_tokens_to_summarize``, the compressor's ``max_input_tokens``)."""
    try:
        return build(context_size)
    except ConfigurationError as exc:
        message = str(exc)
        if not message.startswith("max_input_tokens"):
            raise
        renamed = "trim_tokens_to_summarize" + message[len("max_input_tokens") :]
        raise ConfigurationError(renamed) from None


def _check_choices(summary_placement: object, on_summarizer_error: object) -> None:
    """Each is one of its words.

    Raises:
        ConfigurationError: Naming the argument at fault.
    """
    check_choice("summary_placement", summary_placement, ("system", "human"))
    if on_summarizer_error not in ("degrade", "uncompressed", "raise"):
        raise ConfigurationError(
            "on_summarizer_error must be 'degrade', 'uncompressed' or 'raise', "
            f"got {on_summarizer_error!r}"
        )


def _check_refresh(refresh: object, ceiling: object) -> None:
    """``refresh`` is one of its two words, and ``ceiling`` is given with ``"background"`` only.

    Raises:
        ConfigurationError: Naming the argument at fault.
    """
    if refresh not in ("inline", "background"):
        raise ConfigurationError(f'refresh must be "inline" or "background", got {refresh!r}')
    if refresh == "background" and ceiling is None:
        raise ConfigurationError(
            'refresh="background" needs a ceiling, the size at which a model call waits for '
            'the summary after all: ceiling=("messages", 80), say'
        )
    if refresh == "inline" and ceiling is not None:
        raise ConfigurationError('ceiling applies only with refresh="background"')


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
