"""The benchmark's summarizers: what one must offer, a deterministic offline one, the meter.

A real model is a :class:`slimcache.llm.OpenAISummarizer` or a
:class:`slimcache.llm.AnthropicSummarizer` (both have the ``name`` the benchmark records), which
``slimcache bench --summarizer openai:MODEL`` builds (see :mod:`slimcache.cli.summarizers`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Sequence
from typing import Protocol

from slimcache.core.summarizer import SummaryContext
from slimcache.messages import Message, count_message_tokens, message_text

__all__ = ["BenchSummarizer", "MeteredSummarizer", "OfflineSummarizer"]

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
