"""The summarizer a ``slimcache bench --summarizer`` value names, and the check of its endpoint.

``offline`` is the benchmark's deterministic summarizer (no model, no network). ``openai:MODEL``
is :class:`slimcache.llm.OpenAISummarizer`, for any OpenAI-compatible server (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``), and ``anthropic:MODEL`` is :class:`slimcache.llm.AnthropicSummarizer`
(``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``): the library's own clients, with the SDK's
retries and timeouts and the handling of replies cut by the budget. The summary's budget,
``--summary-tokens``, reaches the model as ``max_tokens`` through the compressor.

The benchmark lives beside :mod:`slimcache.llm`, not above it, so the command line, which sits
above both, is where the two meet.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from slimcache._exceptions import ConfigurationError, MissingExtraError, SummarizerError
from slimcache._install import pip_install
from slimcache.bench.summarizers import OfflineSummarizer
from slimcache.core.truncation import OnTruncated
from slimcache.llm import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AnthropicSummarizer,
    OpenAISummarizer,
)

__all__ = [
    "SUMMARIZER_CHOICES",
    "BenchModelSummarizer",
    "ModelOptions",
    "check_endpoint",
    "close_summarizer",
    "make_summarizer",
]

SUMMARIZER_CHOICES = "'offline', 'openai:MODEL' or 'anthropic:MODEL'"
"""What ``--summarizer`` takes, for messages."""

BenchModelSummarizer = OfflineSummarizer | OpenAISummarizer | AnthropicSummarizer
"""A summarizer ``--summarizer`` can name."""


@dataclass(frozen=True)
class ModelOptions:
    """How a real model is called (the ``slimcache.llm`` summarizers check the values).

    Attributes:
        temperature: Sent with every request (``None``: the server's default).
        timeout: Seconds one attempt may take.
        max_retries: Retries of a transient failure (429, 5xx, a dropped connection, a timeout).
        on_truncated: What a reply cut at the budget twice does: ``"accept"`` (the default
            here: the replay goes on, and the table counts the cut summaries kept) or
            ``"raise"`` (the mode stops there).
    """

    temperature: float | None = 0.0
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    on_truncated: OnTruncated = "accept"


def make_summarizer(spec: str, options: ModelOptions | None = None) -> BenchModelSummarizer:
    """Build the summarizer a ``--summarizer`` value names.

    Args:
        spec: ``offline``, ``openai:MODEL`` or ``anthropic:MODEL``.
        options: How a real model is called (defaults when ``None``).

    Raises:
        ConfigurationError: An unknown value, no model name, no API key, or a bad option.
        MissingExtraError: The model's SDK is not installed; names the ``pip install``.
    """
    if spec == "offline":
        return OfflineSummarizer()
    provider, colon, model = spec.partition(":")
    if provider not in ("openai", "anthropic") or not colon:
        raise ConfigurationError(f"summarizer must be {SUMMARIZER_CHOICES}, got {spec!r}")
    if not model.strip():
        raise ConfigurationError(f"summarizer '{provider}:MODEL' needs a model name")
    options = options or ModelOptions()
    try:
        if provider == "openai":
            return OpenAISummarizer(
                model,
                max_retries=options.max_retries,
                timeout=options.timeout,
                temperature=options.temperature,
                on_truncated=options.on_truncated,
            )
        if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            raise ConfigurationError(
                "--summarizer anthropic:MODEL needs the ANTHROPIC_API_KEY environment variable"
            )
        extra = None if options.temperature is None else {"temperature": options.temperature}
        return AnthropicSummarizer(
            model,
            max_retries=options.max_retries,
            timeout=options.timeout,
            extra_body=extra,
            on_truncated=options.on_truncated,
        )
    except MissingExtraError:
        raise MissingExtraError(
            f"--summarizer {provider}:MODEL needs the {provider} package: "
            f"{pip_install(f'bench,{provider}')}"
        ) from None


async def check_endpoint(summarizer: BenchModelSummarizer) -> None:
    """One cheap request (list the models), so a dead endpoint or a bad key fails at once.

    It goes through the summarizer's own client, so it has the client's timeout and retries.

    Raises:
        SummarizerError: The endpoint did not answer, or refused the request; the message
            names the URL.
    """
    if isinstance(summarizer, OpenAISummarizer):
        import openai

        try:
            await summarizer.client.models.list()
        except openai.APIError as exc:
            raise SummarizerError(_failure(exc)) from exc
    elif isinstance(summarizer, AnthropicSummarizer):
        import anthropic

        try:
            await summarizer.client.models.list()
        except anthropic.APIError as exc:
            raise SummarizerError(_failure(exc)) from exc


def _failure(exc: Exception) -> str:
    request = getattr(exc, "request", None)
    url = getattr(request, "url", "the endpoint")
    status = getattr(exc, "status_code", None)
    answer = f"answered HTTP {status}" if status is not None else "did not answer"
    return f"{url} {answer}: {exc}"


async def close_summarizer(summarizer: BenchModelSummarizer) -> None:
    """Close the HTTP client a real model's summarizer built."""
    if isinstance(summarizer, (OpenAISummarizer, AnthropicSummarizer)):
        await summarizer.aclose()
