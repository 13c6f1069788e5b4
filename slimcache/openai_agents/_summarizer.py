"""A model the OpenAI Agents SDK can call, as a slimcache summarizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.models.multi_provider import MultiProvider
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel

from slimcache._exceptions import ConfigurationError
from slimcache.core.limit_field import MAX_TOKENS, LimitField
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import OnTruncated, Reply, usage_of
from slimcache.frameworks.caller_loop import on_caller_loop
from slimcache.frameworks.providers import provider_name
from slimcache.frameworks.summarizers import ModelSummarizer
from slimcache.messages import Message

__all__ = ["AgentsSummarizer"]


def _reply_text(output: Sequence[Any]) -> str:
    texts: list[str] = []
    for item in output:
        if getattr(item, "type", None) != "message":
            continue
        for part in getattr(item, "content", None) or ():
            text = getattr(part, "text", None)
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)


def _provider(model: Model) -> str | None:
    """The provider ``model`` reaches, in OpenTelemetry's words: ``"openai"`` for the SDK's
    OpenAI models, a LiteLLM model's prefix (``"anthropic/claude-..."``), else ``None``."""
    if isinstance(model, (OpenAIResponsesModel, OpenAIChatCompletionsModel)):
        return "openai"  # OpenAI's APIs, or a server that speaks them
    name = getattr(model, "model", None)
    # LiteLLM's model class needs LiteLLM installed: known by its name.
    if type(model).__name__ == "LitellmModel" and isinstance(name, str) and "/" in name:
        return provider_name(name.partition("/")[0])
    return None


def _reply(response: Any, max_tokens: int) -> Reply:
    """The reply in ``response``, cut when it spent every output token it was allowed.

    The SDK's ``ModelResponse`` carries no stop reason (its Responses model raises on an
    incomplete response; its Chat Completions model drops ``finish_reason``), but it carries
    the usage the API reported: a reply that spent its whole budget stopped at it.
    """
    usage = getattr(response, "usage", None)
    spent = getattr(usage, "output_tokens", None)
    text = _reply_text(response.output)
    # A model that reports no usage leaves the SDK's Usage() of no request.
    used = usage_of(usage, "input_tokens", "output_tokens") if getattr(usage, "requests", 0) else ()
    if isinstance(spent, int) and spent >= max_tokens:
        return Reply(text, True, f"used all {max_tokens} output tokens allowed", *used)
    return Reply(text, False, "stopped within its budget", *used)


class AgentsSummarizer(ModelSummarizer):
    """Makes a model the OpenAI Agents SDK can call a slimcache summarizer.

    Each call is one ``model.get_response``: the task's prompt as the system instructions and
    the previous summary and the transcript as one user message, with ``max_tokens`` set to the
    summary's budget, no tools and tracing off (an ``OpenAIChatCompletionsModel`` whose server
    refuses ``max_tokens`` with HTTP 400, as OpenAI's reasoning models do, is asked once more
    with ``max_completion_tokens``, and sent that from then on). A reply whose reported usage
    spent that whole budget was cut at it (the SDK's responses carry no stop reason): it is
    asked for again with a prompt asking for a shorter summary; see ``on_truncated``. A model
    that reports no usage is taken at its word. Inside a run
    (:class:`~slimcache.openai_agents.CachedSummarizationFilter`), the request goes out on the
    run's own event loop, where the model's HTTP client belongs.

    ``provider`` is the provider the model reaches, in OpenTelemetry's words: ``"openai"`` for
    the SDK's OpenAI models, a LiteLLM model's provider (``"anthropic"``, ``"aws.bedrock"``),
    ``None`` for other models. slimcache's telemetry records it as ``gen_ai.provider.name``.

    Args:
        model: An Agents SDK ``Model`` (``OpenAIResponsesModel``, ``OpenAIChatCompletionsModel``,
            a LiteLLM model, your own), or a model name, resolved by the SDK's ``MultiProvider``
            (``"gpt-4o-mini"``, ``"litellm/anthropic/claude-..."``).
        name: The id slimcache records with each cached summary (default:
            ``"openai-agents:<model>"``).
        on_truncated: When the reply is still cut after asking for a shorter one: ``"accept"``
            (default) keeps it with a warning; ``"raise"`` raises
            :class:`~slimcache.SummarizerError`.

    Raises:
        ConfigurationError: ``model`` is neither, or ``on_truncated`` is not valid.
    """

    def __init__(
        self, model: Model | str, *, name: str | None = None, on_truncated: OnTruncated = "accept"
    ) -> None:
        label = model if isinstance(model, str) else type(model).__name__
        if isinstance(model, str):
            try:
                model = MultiProvider().get_model(model)
            except Exception as exc:  # the SDK raises UserError for an unknown prefix
                raise ConfigurationError(f"model {label!r}: {exc}") from exc
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"model must be an Agents SDK Model or a model name, got {model!r}"
            )
        self.model = model
        super().__init__(
            name or f"openai-agents:{getattr(model, 'model', None) or label}", on_truncated
        )
        self.provider = _provider(model)
        if isinstance(model, OpenAIChatCompletionsModel):
            self.limit_field = LimitField()

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """One ``get_response``, on the run's event loop."""
        body = str(context.to_chat(messages)[1]["content"])
        settings = ModelSettings(max_tokens=context.max_tokens)
        if self.limit_field is not None and self.limit_field.name != MAX_TOKENS:
            settings = ModelSettings(extra_args={"max_completion_tokens": context.max_tokens})

        async def ask() -> Any:
            return await self.model.get_response(
                prompt,
                [{"role": "user", "content": body}],
                settings,
                [],
                None,
                [],
                ModelTracing.DISABLED,
                previous_response_id=None,
                conversation_id=None,
                prompt=None,
            )

        return _reply(await on_caller_loop(ask), context.max_tokens)

    def __repr__(self) -> str:
        return f"AgentsSummarizer({self.model!r})"
