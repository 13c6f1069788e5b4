"""Replies cut by the summary's token budget: one retry asking for less, then raise or accept.

A model given ``max_tokens`` stops when it reaches them, and says so (``finish_reason="length"``,
``stop_reason="max_tokens"``). A summary cut there reads as a whole one but is not, and cached it
would be the base of every later extension. :func:`summarize_within_budget` is how the
summarizers of :mod:`slimcache.llm` and :mod:`slimcache.langchain` handle it: ask once more with
a prompt that asks for a shorter summary (same budget), and if that reply is no better (cut
too, or empty), raise :class:`~slimcache.SummarizerError` (nothing is cached) or, by choice,
keep the first cut reply with a warning.
Both are counted in :attr:`SummaryContext.report <slimcache.SummaryContext.report>`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.core.summarizer import SummaryContext

__all__ = [
    "SHORTER_PROMPT",
    "OnTruncated",
    "Reply",
    "ReplyLimit",
    "check_on_truncated",
    "shorter_prompt",
    "summarize_within_budget",
    "usage_of",
]

logger = logging.getLogger("slimcache")

OnTruncated = Literal["raise", "accept"]
"""What a summarizer does when the reply is still cut after the shorter retry."""

SHORTER_PROMPT = (
    "Your previous summary was cut off at the limit of {max_tokens} tokens. Write a shorter "
    "one this time: keep only what matters most, in at most {target} tokens."
)
"""Added to the prompt of the retry after a cut reply; ``{max_tokens}`` and ``{target}`` (half
of it) are filled in."""


@dataclass(frozen=True)
class Reply:
    """One reply of the model, as a summarizer reads it.

    Attributes:
        text: The reply's text.
        cut: Whether the model stopped at the token budget.
        reason: Why it stopped, as the API says it (``"finish_reason='length'"``), for messages.
        input_tokens: The input tokens the provider reported using, if it did.
        output_tokens: The output tokens it reported, if it did.
    """

    text: str
    cut: bool
    reason: str
    input_tokens: int | None = None
    output_tokens: int | None = None


def usage_of(usage: Any, input_name: str, output_name: str) -> tuple[int | None, int | None]:
    """The input and output tokens of a provider's usage record (an object or a dict), read
    under the names the provider gives them; ``None`` for a count it does not have."""

    def read(name: str) -> int | None:
        try:
            value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
        except Exception:  # a broken property tells nothing
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return read(input_name), read(output_name)


@dataclass(frozen=True)
class ReplyLimit:
    """What stops the model's reply, as the messages about a cut reply name it.

    Attributes:
        tokens: The limit in tokens, when known (``None``: the model's or the server's own,
            unknown here).
        what: The limit in words, e.g. ``"the budget of 1000 tokens"``.
        remedy: How to allow a longer reply, e.g. ``"raise max_summary_tokens"``.
    """

    tokens: int | None
    what: str
    remedy: str = "raise max_summary_tokens"

    @classmethod
    def budget(cls, max_tokens: int) -> ReplyLimit:
        """The summary's budget, sent with the request as the reply's limit."""
        return cls(max_tokens, f"the budget of {max_tokens} tokens")


def check_on_truncated(value: object) -> OnTruncated:
    """Return ``value`` if it is ``"raise"`` or ``"accept"``.

    Raises:
        ConfigurationError: Any other value.
    """
    if value == "raise":
        return "raise"
    if value == "accept":
        return "accept"
    raise ConfigurationError(f"on_truncated must be 'raise' or 'accept', got {value!r}")


def shorter_prompt(prompt: str, max_tokens: int, limit: int | None = None) -> str:
    """``prompt`` with :data:`SHORTER_PROMPT` added, for the retry after a cut reply.

    ``limit``: the tokens the reply was cut at, when it is not the budget ``max_tokens``; the
    retry asks for half of the lower of the two.
    """
    cut_at = max_tokens if limit is None else limit
    target = max(1, min(cut_at, max_tokens) // 2)
    return f"{prompt}\n\n{SHORTER_PROMPT.format(max_tokens=cut_at, target=target)}"


async def summarize_within_budget(
    complete: Callable[[str], Awaitable[Reply]],
    context: SummaryContext,
    *,
    on_truncated: OnTruncated,
    name: str,
    limit: ReplyLimit | None = None,
) -> str:
    """Get a summary that the budget did not cut, retrying once with a shorter prompt.

    Args:
        complete: Sends one request with the given prompt (the task's prompt, or the shorter
            one) and the context's budget, and returns the reply.
        context: The call's context; its ``report`` counts cut replies and retries.
        on_truncated: ``"raise"``: a retry no better than the cut reply (cut too, or empty)
            raises. ``"accept"``: the cut reply is returned (the retry's, when the first had no
            text), with a warning logged.
        name: The summarizer's name, for messages.
        limit: What cuts the reply, for messages (default: the context's budget, which
            ``complete`` sends).

    Returns:
        The reply's text.

    Raises:
        SummarizerError: No reply has text, or the retry is no better with
            ``on_truncated="raise"``.
    """
    limit = limit or ReplyLimit.budget(context.max_tokens)
    context.report.requests += 1
    first = await complete(context.prompt)
    context.report.add_usage(first.input_tokens, first.output_tokens)
    if not first.cut:
        if not first.text.strip():
            raise SummarizerError(f"{name} replied with no text ({first.reason})")
        return first.text
    context.report.truncated_replies += 1
    context.report.shorter_retries += 1
    context.report.requests += 1
    retry = await complete(shorter_prompt(context.prompt, context.max_tokens, limit.tokens))
    context.report.add_usage(retry.input_tokens, retry.output_tokens)
    if not retry.cut and retry.text.strip():
        return retry.text
    if retry.cut:
        context.report.truncated_replies += 1
        worse = "again when asked for a shorter one"
    else:
        worse = f"and the shorter retry replied with no text ({retry.reason})"
    # The retry is no better than the cut reply: the cut reply stays the answer (the retry's,
    # only when the first had no text at all).
    kept = first if first.text.strip() else retry
    if not kept.text.strip():
        raise SummarizerError(f"{name} replied with no text ({retry.reason})")
    what = f"{name}: the summary was cut at {limit.what} ({kept.reason}), {worse}"
    if on_truncated == "raise":
        raise SummarizerError(f"{what}; {limit.remedy}, or pass on_truncated='accept' to keep it")
    context.report.truncated_accepted += 1
    logger.warning("%s; keeping it as it is (on_truncated='accept')", what)
    return kept.text
