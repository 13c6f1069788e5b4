"""A LlamaIndex LLM as a slimcache summarizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.core.llms import LLM

from slimcache._exceptions import ConfigurationError
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import OnTruncated, Reply, ReplyLimit
from slimcache.frameworks.caller_loop import on_caller_loop
from slimcache.frameworks.providers import provider_name
from slimcache.frameworks.summarizers import ModelSummarizer
from slimcache.messages import Message

__all__ = ["LlamaIndexSummarizer"]

# The stop reasons of a reply cut at its limit, as the providers' raw responses give them.
_CUT = {"length", "max_tokens", "MAX_TOKENS"}


def _stop_reason(response: ChatResponse) -> object:
    """The stop reason in the provider's raw response, where it gives one."""
    raw: Any = response.raw
    if raw is None:
        return None

    def get(name: str) -> Any:
        return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)

    choices = get("choices")
    if choices:
        first = choices[0]
        return (
            first.get("finish_reason")
            if isinstance(first, dict)
            else getattr(first, "finish_reason", None)
        )
    return get("stop_reason") or get("finish_reason")


def _provider(llm: LLM) -> str | None:
    """The provider ``llm`` reaches, in OpenTelemetry's words, from its class name's package
    (``llama_index.llms.openai`` -> ``"openai"``); ``None`` for LlamaIndex's own test models."""
    module = type(llm).__module__
    if not module.startswith("llama_index.llms."):
        return None
    return provider_name(module.split(".")[2].replace("_", ""))


class LlamaIndexSummarizer(ModelSummarizer):
    """Makes a LlamaIndex LLM a slimcache summarizer.

    Each call is one ``llm.achat``: the task's prompt as the system message and the previous
    summary and the transcript as one user message. LlamaIndex sets an LLM's output limit when
    the LLM is built (``max_tokens=`` of ``OpenAI``, ``Anthropic``...), not per request, so the
    summary's budget is asked for in the prompt; a reply the provider says stopped at its limit
    (``finish_reason="length"``, ``stop_reason="max_tokens"``) is asked for again, shorter (see
    ``on_truncated``). Inside an agent, the request goes out on the agent's own event loop.

    ``provider`` is the provider the LLM reaches, in OpenTelemetry's words (from the LLM's
    package: ``llama_index.llms.openai`` gives ``"openai"``), ``None`` for other LLMs.

    Args:
        llm: A LlamaIndex ``LLM`` (``OpenAI``, ``Anthropic``, ``Ollama``, ``MockLLM``...).
        name: The id slimcache records with each cached summary (default:
            ``"llama-index:<model name>"``).
        on_truncated: When the reply is still cut after asking for a shorter one: ``"accept"``
            (default) keeps it with a warning; ``"raise"`` raises
            :class:`~slimcache.SummarizerError`.

    Raises:
        ConfigurationError: ``llm`` is not a LlamaIndex LLM, or ``on_truncated`` is not valid.
    """

    def __init__(
        self, llm: LLM, *, name: str | None = None, on_truncated: OnTruncated = "accept"
    ) -> None:
        if not isinstance(llm, LLM):
            raise ConfigurationError(f"llm must be a LlamaIndex LLM, got {llm!r}")
        self.llm = llm
        model = getattr(llm.metadata, "model_name", None) or type(llm).__name__
        super().__init__(name or f"llama-index:{model}", on_truncated)
        self.provider = _provider(llm)

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """One ``achat``, on the agent's event loop."""
        body = str(context.to_chat(messages)[1]["content"])
        chat = [ChatMessage(role="system", content=prompt), ChatMessage(role="user", content=body)]
        response: ChatResponse = await on_caller_loop(lambda: self.llm.achat(chat))
        reason = _stop_reason(response)
        text = response.message.content or ""
        return Reply(text, reason in _CUT, f"stop reason {reason!r}")

    def limit(self, max_tokens: int) -> ReplyLimit:
        """The LLM's own output limit, set when it was built."""
        return ReplyLimit(None, "the LLM's max_tokens", "raise the LLM's max_tokens")

    def __repr__(self) -> str:
        return f"LlamaIndexSummarizer({self.llm!r})"
