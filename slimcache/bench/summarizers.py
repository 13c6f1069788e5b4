"""The benchmark's summarizers: a deterministic offline one and a standard-library HTTP client.

:class:`HTTPChatSummarizer` speaks to any OpenAI-compatible chat-completions endpoint with
``urllib`` alone, so the benchmark runs without the ``openai`` extra; the library's own client
is :class:`slimcache.llm.OpenAISummarizer`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.core.summarizer import SummaryContext
from slimcache.messages import Message, count_message_tokens, message_text

__all__ = [
    "BenchSummarizer",
    "HTTPChatSummarizer",
    "MeteredSummarizer",
    "OfflineSummarizer",
    "make_summarizer",
]

_OFFLINE_LINE_CHARS = 120


class BenchSummarizer(Protocol):
    """A summarizer the benchmark can run: the slimcache summarizer call plus a name."""

    name: str

    def __call__(
        self, messages: Sequence[Message], context: SummaryContext
    ) -> Awaitable[str] | str:
        """Summarize ``messages`` as :data:`slimcache.Summarizer` does."""
        ...


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = re.search(r"[.!?](\s|$)", flat)
    sentence = flat[: match.start() + 1] if match else flat
    if len(sentence) > _OFFLINE_LINE_CHARS:
        sentence = sentence[: _OFFLINE_LINE_CHARS - 3].rstrip() + "..."
    return sentence


class OfflineSummarizer:
    """A deterministic extractive summarizer: no model, no key, no network.

    Each message becomes one line, ``role: first sentence`` (truncated), appended to the
    previous summary; when the result exceeds the token budget the oldest lines go first.
    The same input always gives the same summary, so runs are repeatable.
    """

    name = "offline-extractive"

    def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` (extending ``context.previous_summary`` when given)."""
        lines = context.previous_summary.splitlines() if context.previous_summary else []
        for message in messages:
            role = "user" if message.get("role") == "human" else str(message.get("role"))
            sentence = _first_sentence(message_text(message)) or "(no text)"
            lines.append(f"- {role}: {sentence}")
        budget = context.max_tokens * 4  # approx_tokens counts four characters per token
        while len(lines) > 1 and len("\n".join(lines)) > budget:
            lines.pop(0)
        summary = "\n".join(lines)
        return summary[-budget:] if len(summary) > budget else summary or "(empty conversation)"


class HTTPChatSummarizer:
    """Summarizes with an OpenAI-compatible chat-completions endpoint, via the standard library.

    Args:
        model: The model name sent with every request.
        api_key: The bearer token.
        base_url: The API root, e.g. ``https://api.openai.com/v1``.
        timeout: Seconds one completion may take.
    """

    def __init__(self, model: str, *, api_key: str, base_url: str, timeout: float = 120.0) -> None:
        if not model:
            raise ConfigurationError("summarizer 'openai:MODEL' needs a model name")
        self.model = model
        self.name = f"openai:{model}"
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout

    @classmethod
    def from_env(cls, model: str) -> HTTPChatSummarizer:
        """Build one from ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (optional).

        Raises:
            ConfigurationError: ``OPENAI_API_KEY`` is not set, or the model name is empty.
        """
        key = os.environ.get("OPENAI_API_KEY", "")
        if not key:
            raise ConfigurationError(
                "--summarizer openai:MODEL needs the OPENAI_API_KEY environment variable"
            )
        base = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return cls(model, api_key=key, base_url=base)

    def _request(self, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        url = f"{self.base_url}{path}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            url,
            data=data,
            method="GET" if body is None else "POST",
            headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise SummarizerError(f"{url} answered HTTP {exc.code}: {detail}") from exc
        except urllib.error.URLError as exc:
            raise SummarizerError(f"cannot reach {url}: {exc.reason}") from exc
        except (OSError, ValueError) as exc:
            raise SummarizerError(f"request to {url} failed: {type(exc).__name__}: {exc}") from exc

    def preflight(self, timeout: float = 5.0) -> None:
        """One cheap request (``GET /models``) so a dead endpoint or bad key fails at once.

        Raises:
            SummarizerError: The endpoint is unreachable or refuses the key.
        """
        self._request("/models", None, timeout)

    def complete(self, chat: list[dict[str, str]]) -> str:
        """Send one chat-completions request and return the reply's text (blocking).

        Raises:
            SummarizerError: The request failed or the reply has no text.
        """
        reply = self._request(
            "/chat/completions", {"model": self.model, "messages": chat}, self._timeout
        )
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError(f"unexpected chat-completions reply: {reply!r:.300}") from exc
        if not isinstance(content, str):
            raise SummarizerError(f"chat-completions reply has no text: {reply!r:.300}")
        return content

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` with the model, off the event loop."""
        return await asyncio.to_thread(self.complete, context.to_chat(messages))


def make_summarizer(spec: str) -> OfflineSummarizer | HTTPChatSummarizer:
    """Build the summarizer a ``--summarizer`` value names: ``offline`` or ``openai:MODEL``.

    Raises:
        ConfigurationError: Unknown value, or ``OPENAI_API_KEY`` missing for ``openai:``.
    """
    if spec == "offline":
        return OfflineSummarizer()
    if spec.startswith("openai:"):
        return HTTPChatSummarizer.from_env(spec.partition(":")[2])
    raise ConfigurationError(f"summarizer must be 'offline' or 'openai:MODEL', got {spec!r}")


class MeteredSummarizer:
    """Wraps a summarizer, counts the message tokens it is given and times each call.

    Args:
        inner: The summarizer to call.

    Attributes:
        message_tokens: Tokens of the messages given, counted as the compressor counts them.
        call_seconds: How long each call that returned took, in call order.
    """

    def __init__(self, inner: BenchSummarizer) -> None:
        self.inner = inner
        self.message_tokens = 0
        self.call_seconds: list[float] = []

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Count the message tokens of ``messages``, then summarize them with ``inner``."""
        # Counted exactly as the compressor counts them, so the figures can be compared.
        self.message_tokens += sum(count_message_tokens(m) for m in messages)
        started = time.perf_counter()
        result = self.inner(messages, context)
        if not isinstance(result, str):
            result = await result
        self.call_seconds.append(time.perf_counter() - started)
        return result
