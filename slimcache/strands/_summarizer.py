"""A Strands model as a slimcache summarizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strands.event_loop.streaming import process_stream
from strands.models.bedrock import BedrockModel
from strands.models.model import Model

from slimcache._exceptions import ConfigurationError
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import OnTruncated, Reply, ReplyLimit
from slimcache.frameworks.providers import provider_name
from slimcache.frameworks.summarizers import ModelSummarizer
from slimcache.messages import Message

__all__ = ["StrandsSummarizer"]

# Strands' model classes -> the provider each reaches, known by name so that none of the
# optional clients is imported. LiteLLM's is read from its model id's prefix.
_PROVIDERS = {
    "BedrockModel": "aws.bedrock",
    "AnthropicModel": "anthropic",
    "OpenAIModel": "openai",
    "OpenAIResponsesModel": "openai",
    "GeminiModel": "gcp.gemini",
    "MistralModel": "mistral_ai",
    "OllamaModel": "ollama",
    "LlamaAPIModel": "meta",
    "WriterModel": "writer",
    "SageMakerAIModel": "aws.sagemaker",
}


def _config(model: Model) -> dict[str, Any]:
    try:
        config = model.get_config()
    except Exception:  # a model of one's own may not implement it
        return {}
    return dict(config) if isinstance(config, dict) else {}


def _provider(model: Model) -> str | None:
    kind = type(model).__name__
    if kind == "LiteLLMModel":
        model_id = _config(model).get("model_id")
        if isinstance(model_id, str) and "/" in model_id:
            return provider_name(model_id.partition("/")[0])
    return _PROVIDERS.get(kind)


class StrandsSummarizer(ModelSummarizer):
    """Makes a Strands model a slimcache summarizer.

    Each call is one ``model.stream``: the task's prompt as the system prompt, the previous
    summary and the transcript as one user message, no tools. A reply that stopped at the
    model's ``max_tokens`` (``stopReason="max_tokens"``) is asked for again with a prompt
    asking for a shorter summary; see ``on_truncated``. Strands sets the reply's limit in the
    model's config, not per request, so the summary's budget is asked for in the prompt.

    ``provider`` is the provider the model reaches in OpenTelemetry's words (``"aws.bedrock"``
    for ``BedrockModel``, ``"anthropic"``, ``"openai"``, a LiteLLM model id's prefix), ``None``
    for a model of one's own; slimcache's telemetry records it as ``gen_ai.provider.name``.

    Args:
        model: A Strands ``Model``, or a Bedrock model id (made a ``BedrockModel``, as
            ``Agent(model="...")`` does).
        name: The id slimcache records with each cached summary (default:
            ``"strands:<model id>"``).
        on_truncated: When the reply is still cut after asking for a shorter one: ``"accept"``
            (default) keeps it with a warning; ``"raise"`` raises
            :class:`~slimcache.SummarizerError`.

    Raises:
        ConfigurationError: ``model`` is neither, or ``on_truncated`` is not valid.
    """

    def __init__(
        self, model: Model | str, *, name: str | None = None, on_truncated: OnTruncated = "accept"
    ) -> None:
        if isinstance(model, str):
            model = BedrockModel(model_id=model)
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"model must be a Strands Model or a Bedrock model id, got {model!r}"
            )
        self.model = model
        model_id = _config(model).get("model_id")
        label = model_id if isinstance(model_id, str) else type(model).__name__
        super().__init__(name or f"strands:{label}", on_truncated)
        self.provider = _provider(model)

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """One ``model.stream``, read to its end."""
        body = str(context.to_chat(messages)[1]["content"])
        chunks = self.model.stream(
            [{"role": "user", "content": [{"text": body}]}], tool_specs=None, system_prompt=prompt
        )
        stop_reason: object = None
        message: Any = None
        async for event in process_stream(chunks):
            if "stop" in event:
                stop_reason, message, _, _ = event["stop"]
        texts = [
            str(block["text"]) for block in (message or {}).get("content", ()) if "text" in block
        ]
        if stop_reason == "max_tokens":
            return Reply("".join(texts), True, "stopReason='max_tokens'")
        return Reply("".join(texts), False, f"stopReason={stop_reason!r}")

    def limit(self, max_tokens: int) -> ReplyLimit:
        """The model's own ``max_tokens``, set in its config."""
        return ReplyLimit(None, "the model's max_tokens", "raise max_tokens in the model's config")

    def __repr__(self) -> str:
        return f"StrandsSummarizer({self.model!r})"
