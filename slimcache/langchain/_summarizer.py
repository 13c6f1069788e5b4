"""A LangChain chat model as a slimcache summarizer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slimcache._exceptions import SummarizerError
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import (
    OnTruncated,
    Reply,
    check_on_truncated,
    summarize_within_budget,
)
from slimcache.langchain._convert import to_langchain
from slimcache.messages import Message

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable

__all__ = ["LangChainSummarizer"]


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


class LangChainSummarizer:
    """Makes a LangChain chat model (or any runnable taking messages) a slimcache summarizer.

    Each call sends ``to_langchain(context.to_chat(messages))`` (a ``SystemMessage`` with the
    task's prompt and a ``HumanMessage`` with the previous summary and the transcript) through
    ``model.ainvoke`` and returns the reply's text. Retries and timeouts are the model's own
    (``ChatOpenAI(max_retries=...)``, ``.with_retry()``).

    A reply whose ``response_metadata`` says the model stopped at its token budget
    (``finish_reason="length"`` from ``ChatOpenAI`` and OpenAI-compatible models,
    ``stop_reason="max_tokens"`` from ``ChatAnthropic``, and the like) is asked for again with a
    prompt asking for a shorter summary; see ``on_truncated``. A model that reports no stop
    reason is taken at its word.

    Args:
        model: A chat model such as ``ChatOpenAI(model="gpt-4o-mini")``, or a runnable
            returning a message or a string.
        name: The id slimcache records with each cached summary. Default:
            ``"langchain:<model class>:<model name>"``.
        max_tokens_kwarg: When given (e.g. ``"max_tokens"``), the summary's token budget is
            passed to ``ainvoke`` under this keyword, which most chat models forward to their
            API. By default only the prompt states the budget.
        on_truncated: When the reply is cut at the budget (the model's own ``max_tokens``, or
            the one passed through ``max_tokens_kwarg``), the request is made once more asking
            for a shorter summary; if that reply is cut too, ``"raise"`` (default) raises
            :class:`~slimcache.SummarizerError`, so nothing is cached, and ``"accept"``
            returns the cut summary with a warning logged.

    Raises:
        ConfigurationError: ``on_truncated`` is not ``"raise"`` or ``"accept"``.
        MissingExtraError: ``langchain-core`` is not installed (on the first call).
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        *,
        name: str | None = None,
        max_tokens_kwarg: str | None = None,
        on_truncated: OnTruncated = "raise",
    ) -> None:
        self.model = model
        model_name = getattr(model, "model_name", None) or getattr(model, "model", None)
        default = f"langchain:{type(model).__name__}"
        if isinstance(model_name, str) and model_name:
            default = f"{default}:{model_name}"
        self.name = name or default
        # slimcache records "<module>.<__qualname__>" with each summary; see slimcache.llm.
        self.__qualname__ = self.name
        self.max_tokens_kwarg = max_tokens_kwarg
        self.on_truncated = check_on_truncated(on_truncated)

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` as ``context`` asks; see :class:`slimcache.SummaryContext`.

        Raises:
            SummarizerError: The reply has no text, or it is cut at the budget even when asked
                for a shorter summary (with ``on_truncated="raise"``).
        """
        chat = context.to_chat(messages)
        options: dict[str, Any] = {}
        if self.max_tokens_kwarg:
            options[self.max_tokens_kwarg] = context.max_tokens

        async def complete(prompt: str) -> Reply:
            sent = to_langchain([{"role": "system", "content": prompt}, *chat[1:]])
            reply = await self.model.ainvoke(sent, **options)
            cut, reason = _stop_reason(reply)
            return Reply(_reply_text(reply), cut, reason)

        return await summarize_within_budget(
            complete, context, on_truncated=self.on_truncated, name=self.name
        )

    def __repr__(self) -> str:
        return f"LangChainSummarizer({self.model!r})"
