"""The provider a framework's model reaches, in OpenTelemetry's words.

slimcache's telemetry sets ``gen_ai.provider.name`` on each summarizer call from the
summarizer's ``provider``. The framework summarizers learn their model's provider in the
framework's own words (LangChain's ``ls_provider``, LiteLLM's model prefix);
:func:`provider_name` puts those in the words of OpenTelemetry's generative AI conventions
(``"aws.bedrock"``, ``"gcp.vertex_ai"``, ``"mistral_ai"``...), and leaves any other name as
the framework gave it (``"ollama"``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["provider_name"]

# The frameworks' names of a provider -> OpenTelemetry's well-known gen_ai.provider.name.
_OTEL_NAMES: Final = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "amazon_bedrock": "aws.bedrock",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "google_vertexai": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "google_genai": "gcp.gen_ai",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "cohere": "cohere",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
}


def provider_name(name: object) -> str | None:
    """``name`` (a framework's name of a provider) in OpenTelemetry's words, or ``None`` when
    it is no name (not a string, or empty)."""
    if not isinstance(name, str) or not name.strip():
        return None
    name = name.strip().lower()
    return _OTEL_NAMES.get(name, name)
