"""A Pydantic AI model as a slimcache summarizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, UserPromptPart
from pydantic_ai.models import Model, infer_model

from slimcache._exceptions import ConfigurationError
from slimcache.core.limit_field import MAX_TOKENS, LimitField
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import OnTruncated, Reply, usage_of
from slimcache.frameworks.caller_loop import on_caller_loop
from slimcache.frameworks.summarizers import ModelSummarizer
from slimcache.messages import Message

__all__ = ["PydanticAISummarizer"]


def _sends_max_completion_tokens(model: Model) -> bool:
    """Whether ``model`` sends its ``max_tokens`` setting as ``max_completion_tokens``: an
    ``OpenAIChatModel`` whose profile says so, with no limit in its own settings."""
    if not any(kind.__name__ == "OpenAIChatModel" for kind in type(model).__mro__):
        return False
    if not model.profile.get("openai_chat_supports_max_completion_tokens", True):
        return False
    own: Any = model.settings or {}
    extra = own.get("extra_body")
    limited = isinstance(extra, dict) and any(
        name in extra for name in ("max_tokens", "max_completion_tokens")
    )
    return "max_tokens" not in own and not limited


class PydanticAISummarizer(ModelSummarizer):
    """Makes a Pydantic AI model (or a model name such as ``"openai:gpt-4o-mini"``) a slimcache
    summarizer.

    Each call sends one request through ``pydantic_ai.direct.model_request``: a system prompt
    with the task's prompt and a user prompt with the previous summary and the transcript, with
    ``max_tokens`` set to the summary's budget. An ``OpenAIChatModel`` sends that setting as
    ``max_completion_tokens``, which llama.cpp's server ignores: to one whose settings set no
    limit of their own, the budget goes as ``max_tokens`` in the request body, and as the
    ``max_tokens`` setting from the first request a server refuses ``max_tokens`` on (HTTP
    400, as OpenAI's reasoning models do), which is made once more. A reply that stopped at
    the budget (``finish_reason="length"``) is asked for again with a prompt asking for a
    shorter summary; see ``on_truncated``.

    Inside an agent (:class:`~slimcache.pydantic_ai.CachedSummarization`), the request goes out
    on the agent's own event loop, where the model's HTTP client belongs.

    Args:
        model: A Pydantic AI ``Model``, or a model name as ``Agent`` takes it.
        name: The id slimcache records with each cached summary (default:
            ``"pydantic-ai:<model name>"``).
        on_truncated: When the reply is still cut after asking for a shorter one: ``"accept"``
            (default) keeps the cut summary and logs a warning, ``"raise"`` raises
            :class:`~slimcache.SummarizerError`.

    Raises:
        ConfigurationError: The model name is unknown, or ``on_truncated`` is not valid.
    """

    def __init__(
        self, model: Model | str, *, name: str | None = None, on_truncated: OnTruncated = "accept"
    ) -> None:
        if isinstance(model, str):
            try:
                model = infer_model(model)
            except Exception as exc:  # pydantic_ai raises UserError, ValueError, ImportError...
                raise ConfigurationError(f"model {model!r}: {exc}") from exc
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"model must be a Pydantic AI Model or model name, got {model!r}"
            )
        self.model = model
        super().__init__(name or f"pydantic-ai:{model.model_name}", on_truncated)
        if _sends_max_completion_tokens(model):
            self.limit_field = LimitField()

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """One request through ``model_request``, on the agent's event loop."""
        body = context.to_chat(messages)[1]["content"]
        request = ModelRequest(parts=[SystemPromptPart(prompt), UserPromptPart(body)])
        settings: Any = {"max_tokens": context.max_tokens}
        if self.limit_field is not None and self.limit_field.name == MAX_TOKENS:
            own = (self.model.settings or {}).get("extra_body")
            extra = {**(own if isinstance(own, dict) else {}), "max_tokens": context.max_tokens}
            settings = {"extra_body": extra}
        reply: ModelResponse = await on_caller_loop(
            lambda: model_request(self.model, [request], model_settings=settings)
        )
        reason = getattr(reply, "finish_reason", None)
        usage = usage_of(reply.usage, "input_tokens", "output_tokens")
        return Reply(reply.text or "", reason == "length", f"finish_reason={reason!r}", *usage)

    def __repr__(self) -> str:
        return f"PydanticAISummarizer({self.model!r})"
