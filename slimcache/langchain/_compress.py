"""Compressing a LangChain message list with a slimcache compressor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slimcache.core.compressor import SummarizeCompressor
from slimcache.langchain._convert import from_langchain, to_langchain
from slimcache.messages import Message
from slimcache.recipes.trim import TrimCompressor

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = ["compress_langchain"]


def _pinned_count(messages: Sequence[Message]) -> int:
    count = 0
    while count < len(messages) and messages[count]["role"] in ("system", "developer"):
        count += 1
    return count


async def compress_langchain(
    compressor: SummarizeCompressor | TrimCompressor,
    messages: Sequence[BaseMessage],
    *,
    thread_id: str | int | None = None,
    force: bool = False,
) -> list[BaseMessage]:
    """Compress a list of LangChain messages with a slimcache compressor.

    The messages are converted with :func:`from_langchain` and compressed; the result is
    ``[pinned system messages..., summary SystemMessage, *verbatim messages]`` for a
    :class:`~slimcache.SummarizeCompressor` (``[pinned..., *most recent messages]`` for a
    :class:`~slimcache.TrimCompressor`), where every message kept is the very object given,
    with its ids, metadata and response data intact. Only the summary message is new.

    In LangGraph, call it in a node or a ``pre_model_hook`` with the state's messages and the
    thread id from ``config["configurable"]["thread_id"]``.

    Args:
        compressor: A :class:`~slimcache.SummarizeCompressor` or a
            :class:`~slimcache.TrimCompressor`.
        messages: The conversation, oldest first.
        thread_id: The thread the messages belong to; without one nothing is cached.
        force: Compress now whatever the trigger says (``SummarizeCompressor`` only; a trim
            always trims to its budget).

    Returns:
        The compressed conversation as LangChain messages.

    Raises:
        InvalidInput: A message cannot be converted or breaks a rule slimcache checks.
        SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        StoreError: The store failed (with ``on_store_error="raise"``).
        MissingExtraError: ``langchain-core`` is not installed.
    """
    originals = list(messages)
    dicts = from_langchain(originals)
    if isinstance(compressor, TrimCompressor):
        trimmed = await compressor.compress_detailed(dicts, thread_id=thread_id)
        if not trimmed.dropped:
            return originals
        for pinned in (_pinned_count(dicts), 0):
            start = pinned + trimmed.dropped
            if trimmed.messages == dicts[:pinned] + dicts[start:]:
                return originals[:pinned] + originals[start:]
        return to_langchain(trimmed.messages)
    if not isinstance(compressor, SummarizeCompressor):
        raise TypeError(
            f"compressor must be a SummarizeCompressor or a TrimCompressor, "
            f"got {type(compressor).__name__}"
        )
    result = await compressor.compress_detailed(dicts, thread_id=thread_id, force=force)
    if result.summary_range is None:
        return originals
    end = result.summary_range[1]
    pinned = len(result.messages) - 1 - (len(originals) - end - 1)
    summary = to_langchain([result.messages[pinned]])
    return originals[:pinned] + summary + originals[end + 1 :]
