"""A LangChain chat model as a slimcache summarizer."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.core.limit_field import MAX_TOKENS, LimitField
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.core.summarizer import (
    Prompts,
    Summarizer,
    SummaryContext,
    _summarizer_executor,
    call_summarizer,
)
from slimcache.core.truncation import OnTruncated, Reply, ReplyLimit, usage_of
from slimcache.frameworks.providers import provider_name
from slimcache.frameworks.summarizers import ModelSummarizer
from slimcache.langchain._convert import from_langchain, require_langchain, to_langchain
from slimcache.messages import Message, TokenCounter
from slimcache.recipes.cached_summarizer import CachedSummarizer
from slimcache.sync import default_runner

if TYPE_CHECKING:
    from langchain_core.messages import AnyMessage
    from langchain_core.runnables import Runnable, RunnableConfig

__all__ = ["LangChainSummarizer", "as_langchain_summarizer", "as_token_counter"]


def _reply_text(reply: object) -> str:
    if isinstance(reply, str):
        return reply
    content = getattr(reply, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, Mapping) and part.get("type") == "text")
        )
    raise SummarizerError(f"the chat model returned a {type(reply).__name__}, not a message")


# How chat models say they stopped at the token budget, in ``response_metadata``:
# langchain-openai and most OpenAI-compatible ones ``finish_reason``, langchain-anthropic and
# Bedrock ``stop_reason``, Google's ``finish_reason="MAX_TOKENS"``, Ollama's ``done_reason``.
_CUT_MARKS: dict[str, tuple[str, ...]] = {
    "finish_reason": ("length", "max_tokens", "MAX_TOKENS"),
    "stop_reason": ("max_tokens",),
    "done_reason": ("length",),
}


def _stop_reason(reply: object) -> tuple[bool, str]:
    """Whether the reply was cut at the token budget, and the stop reason as the model gave it."""
    metadata = getattr(reply, "response_metadata", None)
    if not isinstance(metadata, Mapping):
        return False, "no stop reason given"
    for key, cut_values in _CUT_MARKS.items():
        value = metadata.get(key)
        if value is not None:
            return value in cut_values, f"{key}={value!r}"
    return False, "no stop reason given"


# Where chat models keep their own reply limit: ChatOpenAI's ``max_tokens`` (sent as
# ``max_completion_tokens``), ChatAnthropic's ``max_tokens``, Ollama's ``num_predict``, and the
# same keywords bound with ``.bind(...)``.
_LIMIT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")


def _own_limit(model: object) -> int | None:
    """The reply limit a chat model (or a binding of one) sends itself, when it says."""
    while model is not None:
        bound = getattr(model, "kwargs", None)
        for name in _LIMIT_FIELDS:
            value = bound.get(name) if isinstance(bound, Mapping) else None
            value = getattr(model, name, None) if value is None else value
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        model = getattr(model, "bound", None)
    return None


def _bounds_by_default(model: object) -> bool:
    """Whether the budget goes to ``model`` by default: a ``ChatOpenAI`` (or another of
    langchain-openai's chat models) with no limit of its own, in its settings or its
    ``extra_body``; also through a binding (``with_retry``)."""
    if _own_limit(model) is not None:
        return False
    while getattr(model, "bound", None) is not None:
        model = model.bound  # type: ignore[attr-defined]
    if not any(kind.__name__ == "BaseChatOpenAI" for kind in type(model).__mro__):
        return False
    extra = getattr(model, "extra_body", None)
    own = isinstance(extra, Mapping) and any(name in extra for name in _LIMIT_FIELDS)
    return not own


def check_max_tokens_kwarg(value: object) -> str | None:
    """Return ``value`` if it is ``None``, a keyword, or a keyword and a field in it.

    Raises:
        ConfigurationError: Anything else.
    """
    if value is None:
        return None
    parts = value.split(".") if isinstance(value, str) else []
    if not 1 <= len(parts) <= 2 or not all(part.isidentifier() for part in parts):
        raise ConfigurationError(
            "max_tokens_kwarg must be a keyword such as 'max_tokens', or a keyword and a field "
            f"in it such as 'extra_body.max_tokens', got {value!r}"
        )
    return str(value)


class LangChainSummarizer(ModelSummarizer):
    """Makes a LangChain chat model (or any runnable taking messages) a slimcache summarizer.

    Each call sends ``to_langchain(context.to_chat(messages))`` (a ``SystemMessage`` with the
    task's prompt and a ``HumanMessage`` with the previous summary and the transcript; a prompt
    that holds ``{messages}`` goes as one ``HumanMessage`` with them in its place) through
    ``model.ainvoke`` (or ``model.invoke``, see ``method``) and returns the reply's text.
    Retries and timeouts are the model's own (``ChatOpenAI(max_retries=...)``,
    ``.with_retry()``).

    A reply whose ``response_metadata`` says the model stopped at its token budget
    (``finish_reason="length"`` from ``ChatOpenAI`` and OpenAI-compatible models,
    ``stop_reason="max_tokens"`` from ``ChatAnthropic``, and the like) is asked for again with a
    prompt asking for a shorter summary; see ``on_truncated``. A model that reports no stop
    reason is taken at its word.

    ``provider`` is the provider the chat model reaches as LangChain tells its traces, in
    OpenTelemetry's words (``"openai"``, ``"aws.bedrock"``; ``None`` for a runnable that does
    not tell): slimcache's telemetry records it as ``gen_ai.provider.name``.

    Args:
        model: A chat model such as ``ChatOpenAI(model="gpt-4o-mini")``, or a runnable
            returning a message or a string.
        name: The id slimcache records with each cached summary. Default:
            ``"langchain:<model class>:<model name>"``.
        max_tokens_kwarg: When given (e.g. ``"max_tokens"``), the summary's token budget is
            passed to ``ainvoke`` under this keyword, which most chat models forward to their
            API. ``"extra_body.max_tokens"`` puts it in the request body as ``max_tokens``
            (merged with the model's own ``extra_body``): ``ChatOpenAI`` sends its
            ``max_tokens`` as ``max_completion_tokens``, which servers that read only
            ``max_tokens`` ignore (llama-cpp-python's, Ollama, LM Studio). By default, a
            ``ChatOpenAI`` with no limit of its own is sent the budget as
            ``"extra_body.max_tokens"``, and as ``"max_tokens"`` (its
            ``max_completion_tokens``) from the first request a server refuses ``max_tokens``
            on (HTTP 400, as OpenAI's reasoning models do), which is made once more; any other
            model is bounded by its own ``max_tokens``, if any, the prompt stating the budget.
        on_truncated: When the reply is cut at the budget (the model's own ``max_tokens``, or
            the one passed through ``max_tokens_kwarg``), the request is made once more asking
            for a shorter summary; if that reply is cut too, ``"raise"`` (default) raises
            :class:`~slimcache.SummarizerError`, so nothing is cached, and ``"accept"``
            returns the cut summary with a warning logged.
        method: ``"ainvoke"`` (default) awaits ``model.ainvoke``; ``"invoke"`` calls
            ``model.invoke`` on slimcache's summarizer threads, so the model's async client is
            never used (one that an async agent also uses on its own event loop, say).
        config: A ``RunnableConfig`` given to every call (tags, run name, callbacks).

    Raises:
        ConfigurationError: ``on_truncated`` is not ``"raise"`` or ``"accept"``, ``method``
            is not ``"ainvoke"`` or ``"invoke"``, ``config`` is not a mapping, or
            ``max_tokens_kwarg`` is not a keyword (or ``keyword.field``).
        MissingExtraError: ``langchain-core`` is not installed (on the first call).
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        *,
        name: str | None = None,
        max_tokens_kwarg: str | None = None,
        on_truncated: OnTruncated = "raise",
        method: Literal["ainvoke", "invoke"] = "ainvoke",
        config: RunnableConfig | None = None,
    ) -> None:
        if method not in ("ainvoke", "invoke"):
            raise ConfigurationError(f'method must be "ainvoke" or "invoke", got {method!r}')
        if config is not None and not isinstance(config, Mapping):
            raise ConfigurationError(f"config must be a RunnableConfig, got {config!r}")
        self.model = model
        self.method = method
        self.config = config
        model_name = getattr(model, "model_name", None) or getattr(model, "model", None)
        default = f"langchain:{type(model).__name__}"
        if isinstance(model_name, str) and model_name:
            default = f"{default}:{model_name}"
        self.max_tokens_kwarg = check_max_tokens_kwarg(max_tokens_kwarg)
        super().__init__(name or default, on_truncated)
        if self.max_tokens_kwarg is None and _bounds_by_default(model):
            self.limit_field = LimitField()
        self.provider = _provider(model)

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """One call of the model (``ainvoke``, or ``invoke`` on a summarizer thread)."""
        options = self._budget_options(context.max_tokens)
        if self.config is not None:
            options["config"] = self.config
        sent = to_langchain(dataclasses.replace(context, prompt=prompt).to_chat(messages))
        if self.method == "invoke":
            reply = await _on_summarizer_thread(self.model.invoke, sent, **options)
        else:
            reply = await self.model.ainvoke(sent, **options)
        cut, reason = _stop_reason(reply)
        usage = usage_of(reply.usage_metadata, "input_tokens", "output_tokens")
        return Reply(_reply_text(reply), cut, reason, *usage)

    def _budget_options(self, max_tokens: int) -> dict[str, Any]:
        """The keyword that carries the budget to the model, if one is set."""
        kwarg = self.max_tokens_kwarg
        if kwarg is None and self.limit_field is not None:
            kwarg = "extra_body.max_tokens" if self.limit_field.name == MAX_TOKENS else "max_tokens"
        if kwarg is None:
            return {}
        keyword, _, field = kwarg.partition(".")
        if not field:
            return {keyword: max_tokens}
        own = getattr(self.model, keyword, None)
        return {keyword: {**(own if isinstance(own, Mapping) else {}), field: max_tokens}}

    def limit(self, max_tokens: int) -> ReplyLimit:
        """What cuts a reply: the budget this summarizer sends, or the model's own limit."""
        if self.max_tokens_kwarg is not None or self.limit_field is not None:
            return ReplyLimit.budget(max_tokens)
        own = _own_limit(self.model)
        if own is not None:
            return ReplyLimit(
                own,
                f"the model's own max_tokens of {own}",
                "raise the model's max_tokens (or pass max_tokens_kwarg)",
            )
        return ReplyLimit(
            None,
            "the model's or the server's own reply limit",
            "give the model a larger max_tokens (or pass max_tokens_kwarg)",
        )

    def __repr__(self) -> str:
        return f"LangChainSummarizer({self.model!r})"


def _provider(model: object) -> str | None:
    """The provider ``model`` reaches, in OpenTelemetry's words: the ``ls_provider`` a LangChain
    chat model gives its traces (``"openai"``, ``"amazon_bedrock"``...), also through a binding
    (``with_retry``); ``None`` for a runnable that tells none."""
    while getattr(model, "bound", None) is not None:
        model = model.bound  # type: ignore[attr-defined]
    try:
        params = model._get_ls_params()  # type: ignore[attr-defined]
        return provider_name(params.get("ls_provider"))
    except Exception:  # no chat model, or one whose tracing parameters fail: it tells none
        return None


async def _on_summarizer_thread(call: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """``call(*args, **options)`` on slimcache's summarizer threads, in this task's context."""
    bound = functools.partial(contextvars.copy_context().run, call, *args, **options)
    return await asyncio.get_running_loop().run_in_executor(_summarizer_executor(), bound)


# ---------------------------------------------------------------- the other way round


def as_langchain_summarizer(
    summarizer: Summarizer | CachedSummarizer,
    *,
    max_summary_tokens: int = DEFAULTS.max_summary_tokens,
    prompts: Prompts | None = DEFAULTS.prompts,
) -> Runnable[list[AnyMessage], str]:
    """Make a slimcache summarizer LangChain's ``SummarizationMiddleware(summarizer=...)``.

    LangChain hands its summarizer the messages to summarize and expects the summary text.
    The runnable returned converts them with :func:`from_langchain` and calls ``summarizer``:

    - a slimcache summarizer ``(messages, context) -> str`` (such as
      :class:`LangChainSummarizer` or one of :mod:`slimcache.llm`) is called with a
      ``"summarize"`` :class:`~slimcache.SummaryContext` holding the thread id, the budget
      and the default prompt;
    - a :func:`~slimcache.cached_summarizer` is called with the thread id of the run
      (``configurable.thread_id``), so a summary of messages it has seen before comes from
      your store, and a longer history is summarized by extending the cached summary.

    It works with ``invoke`` and ``ainvoke``: either way the call runs on the event loop of
    :mod:`slimcache.sync`, where the store's connections stay.

    Args:
        summarizer: The slimcache summarizer, or a cached summarize function.
        max_summary_tokens: The budget a slimcache summarizer is given.
        prompts: The prompts a slimcache summarizer is given (default: slimcache's).

    Returns:
        A LangChain runnable from a list of messages to the summary text.

    Raises:
        ConfigurationError: ``summarizer`` is not callable, or the budget or prompts are
            not valid.
        MissingExtraError: ``langchain-core`` is not installed.
    """
    require_langchain()
    from langchain_core.runnables import RunnableLambda

    from slimcache.core.settings.checks import check_summarizer
    from slimcache.core.settings.compressor import check_fields

    if not isinstance(summarizer, CachedSummarizer):
        check_summarizer(summarizer)  # (messages, context); a plain function goes cached
    resolved = check_fields(max_summary_tokens=max_summary_tokens, prompts=prompts)
    budget = resolved["max_summary_tokens"]
    prompt = (resolved["prompts"] or Prompts()).render("summarize", budget)

    async def summarize(messages: list[AnyMessage], config: RunnableConfig) -> str:
        dicts = from_langchain(messages)
        thread_id = (config.get("configurable") or {}).get("thread_id")
        if isinstance(summarizer, CachedSummarizer):
            return await summarizer(dicts, thread_id=thread_id)
        context = SummaryContext(
            task="summarize",
            previous_summary=None,
            max_tokens=budget,
            prompt=prompt,
            thread_id=None if thread_id is None else str(thread_id),
            start=0,
            end=len(dicts) - 1,
        )
        return await call_summarizer(summarizer, dicts, context, timeout=None)

    def summarize_sync(messages: list[AnyMessage], config: RunnableConfig) -> str:
        return default_runner().run(summarize(messages, config))

    async def summarize_async(messages: list[AnyMessage], config: RunnableConfig) -> str:
        pending = default_runner().submit(summarize(messages, config))
        return await asyncio.wrap_future(pending)

    name = getattr(summarizer, "__name__", None) or type(summarizer).__name__
    return RunnableLambda(summarize_sync, afunc=summarize_async, name=f"slimcache:{name}")


def as_token_counter(counter: Any) -> TokenCounter:
    """Make a LangChain token counter slimcache's ``token_counter`` (``text -> tokens``).

    Args:
        counter: A LangChain model (its ``get_num_tokens(text)`` is used), or a LangChain
            message counter ``(messages) -> int`` such as
            ``langchain_core.messages.utils.count_tokens_approximately`` or a model's
            ``get_num_tokens_from_messages``: a text is counted as one human message, less
            what an empty one counts (the per-message framing, which slimcache adds itself
            as ``message_overhead``).

    Returns:
        A counter that depends on the text alone, as slimcache requires.

    Raises:
        ConfigurationError: ``counter`` is neither.
        MissingExtraError: ``langchain-core`` is not installed.
    """
    require_langchain()
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.messages import HumanMessage

    if isinstance(counter, BaseLanguageModel):
        count_text: TokenCounter = counter.get_num_tokens
        return count_text
    if not callable(counter) or inspect.isclass(counter):
        raise ConfigurationError(
            "counter must be a LangChain model or a message token counter (messages) -> int, "
            f"got {counter!r}"
        )
    framing = int(counter([HumanMessage("")]))

    def count(text: str) -> int:
        return max(0, int(counter([HumanMessage(text)])) - framing)

    count.__qualname__ = f"as_token_counter({getattr(counter, '__name__', counter)!s})"
    return count
