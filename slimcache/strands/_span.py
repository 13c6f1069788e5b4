"""Summarizing exactly the span of a thread that Strands reduces, on the compression as it is.

Strands picks the messages to summarize itself: the oldest ``summary_ratio`` of the agent's
messages. The compressor decides its own boundary from a trigger and a keep policy, so the span
is handed to it followed by one stand-in message, with a trigger of two messages and a keep of
one: it summarizes every message but the stand-in, extending the longest cached summary of the
thread that still matches them, and caches the summary of the span under its range.
"""

from __future__ import annotations

from collections.abc import Sequence

from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.compression import AgentCompression, Summarized, summarized
from slimcache.frameworks.settings import AgentSettings
from slimcache.messages import Message
from slimcache.stores import Store

__all__ = ["span_compression", "summarize_span"]

# Follows the span, so that the compressor summarizes the whole span and keeps only this.
_NEXT: Message = {"role": "user", "content": "(the conversation goes on)"}


def span_compression(
    summarizer: Summarizer, store: Store | str | None, settings: AgentSettings
) -> AgentCompression:
    """The compression :func:`summarize_span` runs, with ``settings``' compressor settings and
    what it does when the summarizer fails.

    Raises:
        ConfigurationError: A compressor setting is invalid, before the store is opened.
    """
    spans = AgentSettings(
        trigger=("messages", 2),
        keep=("messages", 1),
        on_summarizer_error=settings.on_summarizer_error,
        on_truncated=settings.on_truncated,
        compressor=settings.compressor,
    )
    return AgentCompression(summarizer, store, spans)


def summarize_span(
    compression: AgentCompression, messages: Sequence[Message], thread_id: str | None
) -> Summarized | None:
    """The summary of ``messages`` (a thread's messages from its first), from the cache when it
    holds it; blocks until slimcache's loop has it.

    Returns:
        Where the summary goes, or ``None`` when there is none (the summarizer failed and
        nothing was cached, as ``on_summarizer_error`` says). Degrading, it may stand for
        fewer messages than given.

    Raises:
        InvalidInput: A message breaks a rule slimcache checks.
        StoreError: The store failed (with ``on_store_error="raise"``).
        SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
    """
    return summarized(compression.compress_blocking([*messages, _NEXT], thread_id))
