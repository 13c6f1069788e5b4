"""LangChain's ``SummarizationMiddleware`` keywords, read for ``CachedSummarizationMiddleware``.

Porting from LangChain's middleware is a rename: ``summary_prompt`` (with ``{messages}``),
``trim_tokens_to_summarize``, a message-list ``token_counter`` such as
``count_tokens_approximately``, ``summarizer`` (a chat model or model string, or a function or
runnable of the messages) and the deprecated ``max_tokens_before_summary`` and
``messages_to_keep`` (with LangChain's warnings) all keep their meaning. The summary call is
retried as LangChain retries it, unless the chat model's client retries it already.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, Union, cast

from langchain.chat_models import init_chat_model
from langchain_core.exceptions import ModelError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.constants import TAG_NOSTREAM

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.core.limit_field import refuses_max_tokens
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.core.summarizer import (
    DEFAULT_CONDENSE_PROMPT,
    MESSAGES_PLACEHOLDER,
    Prompts,
    Summarizer,
    SummaryContext,
    summarizer_name,
)
from slimcache.core.truncation import OnTruncated
from slimcache.frameworks.settings import DEFAULT_KEEP, DEFAULT_TRIGGER
from slimcache.frameworks.sizes import ContextSize, TriggerSpec
from slimcache.frameworks.summarizers import summarizer_for
from slimcache.langchain._convert import to_langchain
from slimcache.langchain._summarizer import LangChainSummarizer, as_token_counter
from slimcache.messages import Message, TokenCounter

__all__ = [
    "InputBound",
    "compressor_keywords",
    "input_bound",
    "prompts_for",
    "read_deprecated",
    "summary_writer",
    "text_counter",
]

InputBound = Union[int, Literal["auto"], None]  # noqa: UP007
"""``trim_tokens_to_summarize``: tokens one summarizer call may receive."""

# LangChain's middleware sends the summary request once and retries it twice on any error but
# one a model marks as not worth retrying, waiting with exponential back-off and jitter.
_ATTEMPTS = 3

# Where chat models keep the SDK client that retries their requests: langchain-openai's
# ``root_client`` (an ``openai.OpenAI``), langchain-anthropic's ``_client`` (an
# ``anthropic.Anthropic``); both clients retry twice by default.
_CLIENTS = ("root_client", "_client")

# How the run's graph sees a summary call: not streamed, named.
_CONFIG: Any = {"tags": [TAG_NOSTREAM], "run_name": "slimcache_summary"}


def read_deprecated(
    trigger: TriggerSpec | None, keep: ContextSize, options: dict[str, Any]
) -> tuple[TriggerSpec | None, ContextSize]:
    """``trigger`` and ``keep`` with LangChain's deprecated keywords taken out of ``options``
    and applied, as it applies them (each with its ``DeprecationWarning``):
    ``max_tokens_before_summary=n`` is ``trigger=("tokens", n)`` unless a trigger is given,
    ``messages_to_keep=n`` is ``keep=("messages", n)`` unless another keep is given."""
    if "max_tokens_before_summary" in options:
        value = options.pop("max_tokens_before_summary")
        warnings.warn(
            "max_tokens_before_summary is deprecated. Use trigger=('tokens', value) instead.",
            DeprecationWarning,
            stacklevel=3,
        )
        if trigger is DEFAULT_TRIGGER and value is not None:
            trigger = ("tokens", value)
    if "messages_to_keep" in options:
        value = options.pop("messages_to_keep")
        warnings.warn(
            "messages_to_keep is deprecated. Use keep=('messages', value) instead.",
            DeprecationWarning,
            stacklevel=3,
        )
        if keep == DEFAULT_KEEP:
            keep = cast("ContextSize", ("messages", value))
    return trigger, keep


def compressor_keywords(
    options: dict[str, Any],
    token_counter: object,
    summary_prompt: str | None,
    trim_tokens_to_summarize: object,
) -> dict[str, Any]:
    """``options`` with LangChain's keywords read as the compressor's: ``token_counter`` as a
    text counter (see :func:`text_counter`), ``summary_prompt`` as ``prompts`` (see
    :func:`prompts_for`) and ``trim_tokens_to_summarize`` as ``max_input_tokens``.

    Raises:
        ConfigurationError: One is invalid, or given beside the compressor's keyword it is.
    """
    read = {**options, "token_counter": text_counter(token_counter)}
    read["prompts"] = prompts_for(summary_prompt, options.get("prompts"))
    if "max_input_tokens" not in options:
        read["max_input_tokens"] = input_bound(trim_tokens_to_summarize)
    elif trim_tokens_to_summarize != DEFAULTS.max_input_tokens:
        raise ConfigurationError("give trim_tokens_to_summarize or max_input_tokens, not both")
    return read


def input_bound(trim_tokens_to_summarize: object) -> InputBound:
    """``trim_tokens_to_summarize``, checked: the compressor's ``max_input_tokens``.

    Raises:
        ConfigurationError: It is not a positive integer, ``"auto"`` or ``None``.
    """
    value = trim_tokens_to_summarize
    if value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            'trim_tokens_to_summarize must be a positive number of tokens, "auto" or None, '
            f"got {value!r}"
        )
    return value


def text_counter(counter: object) -> TokenCounter:
    """slimcache's counter (``text -> tokens``) for a ``token_counter`` of either kind.

    LangChain's counters take a message list (``count_tokens_approximately``, a model's
    ``get_num_tokens_from_messages``): one whose first parameter is ``messages`` is read
    through :func:`~slimcache.langchain.as_token_counter`. Any other is a text counter.

    Raises:
        ConfigurationError: ``counter`` is not callable.
    """
    if not callable(counter) or inspect.isclass(counter):
        raise ConfigurationError(
            "token_counter must count a text's tokens, (text) -> int, or a message list's, as "
            f"LangChain's count_tokens_approximately does; got {counter!r}"
        )
    if counter is count_tokens_approximately or _first_parameter(counter) == "messages":
        return as_token_counter(counter)
    text: TokenCounter = counter
    return text


def _first_parameter(function: Callable[..., Any]) -> str | None:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    return parameters[0].name if parameters else None


def prompts_for(summary_prompt: str | None, prompts: Prompts | None) -> Prompts | None:
    """The prompts for LangChain's ``summary_prompt``: it summarizes and extends (a previous
    summary is among the messages it is given, as in LangChain's middleware); condensing an
    over-long summary keeps slimcache's prompt.

    The prompt is formatted as LangChain formats it (``{messages}`` is the one placeholder,
    ``{{`` and ``}}`` are braces) when the middleware is made.

    Raises:
        ConfigurationError: Both are given, or the prompt is not a string that holds
            ``{messages}`` and formats with it alone.
    """
    if summary_prompt is None:
        return prompts
    if prompts is not None:
        raise ConfigurationError("give summary_prompt or prompts, not both")
    if not isinstance(summary_prompt, str):
        raise ConfigurationError(f"summary_prompt must be a string, got {summary_prompt!r}")
    try:
        text = summary_prompt.format(messages=MESSAGES_PLACEHOLDER)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigurationError(
            "summary_prompt is formatted as LangChain formats it, with {messages} its only "
            f"placeholder (write other braces as {{{{ and }}}}): {type(exc).__name__}: {exc}"
        ) from None
    if MESSAGES_PLACEHOLDER not in text:
        raise ConfigurationError(
            "summary_prompt must hold {messages}, where the conversation to summarize goes"
        )
    return Prompts(summarize=text, extend=text, condense=DEFAULT_CONDENSE_PROMPT)


def summary_writer(
    model: object,
    summarizer: object,
    chat_model: BaseChatModel | None,
    on_truncated: OnTruncated,
    max_tokens_kwarg: str | None,
) -> Summarizer:
    """What writes the summaries: ``summarizer`` when given (as LangChain reads it), else
    ``model`` (a chat model, a model string or a slimcache summarizer).

    Raises:
        ConfigurationError: Either is not what it may be.
    """
    if summarizer is None:
        return summarizer_for(
            chat_model or model,
            BaseChatModel,
            lambda chat: _chat_summarizer(chat, on_truncated, max_tokens_kwarg),
            what="a chat model, a model string such as 'openai:gpt-4o-mini'",
        )
    if chat_model is None:
        raise ConfigurationError(
            "with summarizer=, model is the chat model whose context window is managed (a chat "
            "model or a model string); give a slimcache summarizer as model, without summarizer="
        )
    if isinstance(summarizer, str):
        try:
            summarizer = init_chat_model(summarizer)
        except (ValueError, ImportError) as exc:
            raise ConfigurationError(f"summarizer {summarizer!r}: {exc}") from exc
    if isinstance(summarizer, BaseChatModel):
        return _chat_summarizer(summarizer, on_truncated, max_tokens_kwarg)
    if isinstance(summarizer, Runnable) or callable(summarizer):
        return MessagesSummarizer(summarizer)
    raise ConfigurationError(
        "summarizer must be a chat model, a model string, a Runnable or a function of the "
        f"messages to summarize; got {summarizer!r}"
    )


def _retryable(error: BaseException) -> bool:
    """Whether LangChain would try the summary call again after ``error``."""
    if not isinstance(error, Exception) or refuses_max_tokens(error):
        return False  # a refused max_tokens is sent again at once as max_completion_tokens
    return error.is_retryable if isinstance(error, ModelError) else True


def _client_retries(chat_model: BaseChatModel) -> bool:
    """Whether the SDK client of ``chat_model`` retries a failed request itself: a
    ``ChatOpenAI`` or ``ChatAnthropic`` (or another model keeping its client where they do)
    whose client has ``max_retries`` above 0, as it has by default."""
    for field in _CLIENTS:
        try:
            client = getattr(chat_model, field, None)
        except Exception:  # a client that cannot be made here: it makes no request either
            continue
        retries = getattr(client, "max_retries", None)
        if isinstance(retries, int) and not isinstance(retries, bool):
            return retries > 0
    return False


def _chat_summarizer(
    chat_model: BaseChatModel, on_truncated: OnTruncated, max_tokens_kwarg: str | None
) -> LangChainSummarizer:
    """A chat model as the summarizer: through its sync ``invoke`` (see the middleware),
    not streamed, tried up to three times as LangChain's middleware tries it.

    One layer retries: a model whose client retries itself (see :func:`_client_retries`) is
    called as it is, since LangChain's tries on top of the client's would send each failed
    summary nine requests; any other is wrapped in ``with_retry``."""
    name = LangChainSummarizer(chat_model).name  # the id of the model, not of its retrying
    retrying: Runnable[Any, Any] = chat_model
    if not _client_retries(chat_model):
        retrying = chat_model.with_retry(
            retry_if_exception_type=_retryable, stop_after_attempt=_ATTEMPTS
        )
    return LangChainSummarizer(
        retrying,
        name=name,
        method="invoke",
        config=_CONFIG,
        on_truncated=on_truncated,
        max_tokens_kwarg=max_tokens_kwarg,
    )


class MessagesSummarizer:
    """LangChain's ``summarizer=`` function or runnable (messages -> summary text) as a
    slimcache summarizer.

    It is given the messages as LangChain messages; a previous summary to extend (or an
    over-long one to condense) comes first, as a human message, as LangChain's middleware
    hands its own summary back to its summarizer. A sync function runs on a thread.

    Args:
        summarizer: The function or runnable.
    """

    def __init__(self, summarizer: Any) -> None:
        self.runnable: Runnable[Any, Any] = (
            summarizer if isinstance(summarizer, Runnable) else RunnableLambda(summarizer)
        )
        self.__qualname__ = f"langchain-summarizer:{summarizer_name(summarizer)}"

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """The summary the function or runnable writes of ``messages``."""
        sent = to_langchain(messages)
        if context.previous_summary is not None:
            previous = "Here is a summary of the conversation to date:\n\n"
            sent.insert(0, HumanMessage(previous + context.previous_summary))
        summary = await self.runnable.ainvoke(sent, config=_CONFIG)
        if not isinstance(summary, str) or not summary.strip():
            raise SummarizerError(
                f"{self.__qualname__} returned {summary!r}, not the summary's text"
            )
        return summary
