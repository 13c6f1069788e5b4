"""An ADK model as a slimcache summarizer."""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.registry import LLMRegistry
from google.genai import types

from slimcache._exceptions import ConfigurationError
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import OnTruncated, Reply
from slimcache.frameworks.caller_loop import on_caller_loop
from slimcache.frameworks.providers import provider_name
from slimcache.frameworks.summarizers import ModelSummarizer
from slimcache.messages import Message

__all__ = ["ADKSummarizer"]


def _provider(model: BaseLlm) -> str | None:
    """The provider ``model`` reaches, in OpenTelemetry's words, when ADK's class says it."""
    kind = type(model).__name__
    if kind == "Gemini":
        return "gcp.gemini"
    if kind == "AnthropicLlm":
        return "anthropic"
    if kind == "LiteLlm" and "/" in model.model:
        return provider_name(model.model.partition("/")[0])
    return None


class ADKSummarizer(ModelSummarizer):
    """Makes an ADK model (a ``BaseLlm`` such as ``Gemini``, or a model name ADK's registry
    knows, such as ``"gemini-2.5-flash"``) a slimcache summarizer.

    Each call sends one request through the model's ``generate_content_async``: the task's
    prompt as the system instruction and the previous summary and the transcript as the user's
    content, with ``max_output_tokens`` set to the summary's budget. A reply that stopped at
    the budget (``finish_reason=MAX_TOKENS``) is asked for again with a prompt asking for a
    shorter summary; see ``on_truncated``. Inside an ``App``, the request goes out on the
    runner's own event loop, where the model's client belongs.

    Args:
        model: An ADK model, or a model name.
        name: The id slimcache records with each cached summary (default:
            ``"google-adk:<model name>"``).
        on_truncated: When the reply is still cut after asking for a shorter one: ``"accept"``
            (default) keeps the cut summary and logs a warning, ``"raise"`` raises
            :class:`~slimcache.SummarizerError`.

    Attributes:
        provider: The provider the model reaches, in OpenTelemetry's words (``"gcp.gemini"``
            for ``Gemini``), or ``None``; slimcache's telemetry records it as
            ``gen_ai.provider.name``.

    Raises:
        ConfigurationError: The model name is unknown, or ``on_truncated`` is not valid.
    """

    def __init__(
        self, model: BaseLlm | str, *, name: str | None = None, on_truncated: OnTruncated = "accept"
    ) -> None:
        if isinstance(model, str):
            try:
                model = LLMRegistry.new_llm(model)
            except Exception as exc:  # ADK raises ValueError for a name no class claims
                raise ConfigurationError(f"model {model!r}: {exc}") from exc
        if not isinstance(model, BaseLlm):
            raise ConfigurationError(f"model must be an ADK BaseLlm or model name, got {model!r}")
        self.model = model
        self.provider = _provider(model)
        super().__init__(name or f"google-adk:{model.model}", on_truncated)

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """One request through ``generate_content_async``, on the runner's event loop."""
        body = context.to_chat(messages)[1]["content"]
        request = LlmRequest(
            model=self.model.model,
            contents=[types.Content(role="user", parts=[types.Part(text=body)])],
            config=types.GenerateContentConfig(
                system_instruction=prompt, max_output_tokens=context.max_tokens
            ),
        )

        async def first() -> tuple[str, object]:
            async for response in self.model.generate_content_async(request, stream=False):
                parts = response.content.parts if response.content else None
                if parts:
                    text = "".join(p.text for p in parts if p.text and not p.thought)
                    return text, response.finish_reason
                if response.error_message:
                    raise RuntimeError(response.error_message)
            return "", None

        text, reason = await on_caller_loop(first)
        return Reply(text, reason == types.FinishReason.MAX_TOKENS, f"finish_reason={reason!r}")

    def __repr__(self) -> str:
        return f"ADKSummarizer({self.model.model!r})"
