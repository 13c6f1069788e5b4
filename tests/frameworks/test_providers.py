"""A framework's name of a provider, in OpenTelemetry's words."""

from __future__ import annotations

import pytest

from slimcache.frameworks.providers import provider_name


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("openai", "openai"),
        ("amazon_bedrock", "aws.bedrock"),  # LangChain's ChatBedrock
        ("bedrock", "aws.bedrock"),  # LiteLLM's prefix
        ("google_vertexai", "gcp.vertex_ai"),
        ("Mistral", "mistral_ai"),
        ("azure", "azure.ai.openai"),
        ("ollama", "ollama"),  # no well-known name: as given
        ("", None),
        (None, None),
    ],
)
def test_provider_names(given: object, expected: str | None) -> None:
    assert provider_name(given) == expected


def test_a_langchain_model_tells_its_provider_through_langsmiths_parameters() -> None:
    from langchain_openai import AzureChatOpenAI
    from pydantic import SecretStr

    from slimcache.langchain import LangChainSummarizer

    azure = AzureChatOpenAI(
        azure_endpoint="http://127.0.0.1:9",
        api_version="2024-06-01",
        api_key=SecretStr("k"),
        model="m",
    )
    assert LangChainSummarizer(azure).provider == "azure.ai.openai"
    assert LangChainSummarizer(azure.with_retry()).provider == "azure.ai.openai"
