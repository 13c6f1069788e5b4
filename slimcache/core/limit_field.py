"""Which request field carries the summary's budget: ``max_tokens``, or ``max_completion_tokens``
where the server refuses it.

OpenAI-compatible servers read the reply's limit from one of two fields, and some read only
one: llama.cpp's server (and llama-cpp-python's, Ollama, LM Studio) obeys ``max_tokens`` and
ignores ``max_completion_tokens``, so a budget sent as the latter leaves the reply unbounded;
OpenAI's reasoning models refuse ``max_tokens`` with HTTP 400. :class:`LimitField` sends
``max_tokens`` first and, on a 400 that names it, the same request once more with
``max_completion_tokens``, which it then keeps for every later request. A field the user chose
is kept as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from slimcache.core.summarizer import SummarizerReport

__all__ = ["MAX_COMPLETION_TOKENS", "MAX_TOKENS", "LimitField", "LimitName", "refuses_max_tokens"]

logger = logging.getLogger("slimcache")

LimitName = Literal["max_tokens", "max_completion_tokens"]
"""The two fields an OpenAI-compatible chat-completions request carries its reply limit in."""

MAX_TOKENS: LimitName = "max_tokens"
MAX_COMPLETION_TOKENS: LimitName = "max_completion_tokens"

_T = TypeVar("_T")


def refuses_max_tokens(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is an HTTP 400 refusing the
    ``max_tokens`` field, as OpenAI's reasoning models answer ("Unsupported parameter:
    'max_tokens' ... Use 'max_completion_tokens' instead")."""
    seen: BaseException | None = error
    for _ in range(4):  # a framework's error wraps the SDK's
        if seen is None:
            return False
        if getattr(seen, "status_code", None) == 400:
            text = f"{seen} {getattr(seen, 'body', '')}"
            return MAX_TOKENS in text and (
                MAX_COMPLETION_TOKENS in text or "support" in text.lower()
            )
        seen = seen.__cause__ or seen.__context__
    return False


class LimitField:
    """The field one summarizer sends the summary's budget in, remembered across its calls.

    Args:
        chosen: The field the user chose, always sent; ``None``: ``max_tokens``, and
            ``max_completion_tokens`` from the first request the server refuses
            ``max_tokens`` on.

    Attributes:
        name: The field the next request sends.
    """

    def __init__(self, chosen: LimitName | None = None) -> None:
        self.fixed = chosen is not None
        self.name: LimitName = chosen or MAX_TOKENS

    async def send(
        self, request: Callable[[], Awaitable[_T]], report: SummarizerReport, what: str
    ) -> _T:
        """``request()``, which sends the budget in :attr:`name`; once more with
        ``max_completion_tokens`` when the server refuses ``max_tokens`` (counted in
        ``report.requests``). ``what``: the summarizer's name, for the log."""
        sent = self.name
        try:
            return await request()
        except Exception as exc:
            if self.fixed or sent != MAX_TOKENS or not refuses_max_tokens(exc):
                raise
        if self.name == MAX_TOKENS:
            self.name = MAX_COMPLETION_TOKENS
            logger.info(
                "%s: the server refuses max_tokens; the budget goes as max_completion_tokens "
                "from now on",
                what,
            )
        report.requests += 1
        return await request()
