"""How many tokens the model counts for what slimcache estimates, learned per summarizer; and
a request the model refused for its length.

slimcache measures what it sends with the compressor's token counter (by default about four
characters a token). A model's tokenizer counts more: some 1.1 to 1.2 times as many on English
chat, 1.5 on code, numbers or German, 2.2 on JSON tool results. A step that fits
``max_input_tokens`` by the estimate would then be refused by the server. So:

- **Learned from the replies.** A reply whose provider reports the input tokens it used (the
  summarizer's :class:`~slimcache.core.summarizer.SummarizerReport`) gives the ratio of that
  count to the estimate of what was sent. One :class:`InputRatio` per summarizer id, for the
  whole process (a stateless server that builds a compressor per request still shares it),
  as the breaker is kept (:mod:`slimcache.core.breaker`). A higher ratio is taken at once,
  a lower one moves the ratio :data:`FALL` of the way down, so that one reply of plain prose
  does not undo what a reply of JSON taught.
- **Used by the bound.** A step's estimated size times the ratio must fit
  ``max_input_tokens`` (:meth:`InputRatio.in_force`: never below 1.0, a provider counting fewer
  tokens leaves the bound as estimated, and never above :data:`MAX_RATIO`).
- **Raised by a refusal.** A request refused for its length (HTTP 400: llama.cpp's
  ``exceed_context_size_error``, OpenAI's ``context_length_exceeded``, Anthropic's ``prompt is
  too long``) raises :class:`~slimcache.types.InputTooLong`. The ratio is raised to what the
  refusal's numbers say (the provider's count of the prompt against the context), doubled when
  it gives none, and the step is made again within the smaller bound, at most
  :data:`REFUSALS` times a request.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from slimcache._exceptions import InputTooLong
from slimcache._process import PerName, register

__all__ = [
    "FALL",
    "MAX_RATIO",
    "REFUSALS",
    "InputRatio",
    "InputTooLong",
    "length_refusal",
    "ratio_for",
]

logger = logging.getLogger("slimcache")

FALL = 0.25
"""How far a lower observed ratio moves the learned one down: a quarter of the way."""

MAX_RATIO = 8.0
"""The most the bound is divided by, however high a refusal or a reply sets the ratio."""

REFUSALS = 4
"""Length refusals one request takes, each followed by a smaller step; the next one raises."""

_MARKERS = (
    "exceed_context_size_error",  # llama.cpp
    "context_length_exceeded",  # OpenAI
    "prompt is too long",  # Anthropic
    "maximum context length is",  # OpenAI's message, and vLLM's, which has no code
)

# The numbers each refusal gives, as (prompt tokens, context tokens) in the order they appear.
_NUMBERS = (
    # llama.cpp: "request (6015 tokens) exceeds the available context size (4096 tokens)"
    re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"),
)
# OpenAI: "This model's maximum context length is 8192 tokens. However, your messages resulted
# in 9000 tokens."
_OPENAI = re.compile(r"maximum context length is (\d+) tokens.*?resulted in (\d+) tokens", re.S)


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _body_numbers(body: Any) -> tuple[int | None, int | None]:
    """llama.cpp's ``n_prompt_tokens`` and ``n_ctx``, in the error body or its ``error``."""
    for part in (body, body.get("error") if isinstance(body, dict) else None):
        if isinstance(part, dict) and "n_ctx" in part:
            return _number(part.get("n_prompt_tokens")), _number(part.get("n_ctx"))
    return None, None


def _text_numbers(text: str) -> tuple[int | None, int | None]:
    for pattern in _NUMBERS:
        found = pattern.search(text)
        if found:
            return int(found[1]), int(found[2])
    found = _OPENAI.search(text)
    return (int(found[2]), int(found[1])) if found else (None, None)


def length_refusal(error: BaseException) -> InputTooLong | None:
    """The length refusal ``error`` is (or was raised from), as :class:`InputTooLong` with the
    numbers it gives; ``None`` when it is none.

    A refusal is an HTTP 400 (an exception whose ``status_code`` is 400, as the OpenAI and
    Anthropic SDKs and Pydantic AI raise) naming the context: llama.cpp's
    ``exceed_context_size_error``, OpenAI's ``context_length_exceeded``, Anthropic's ``prompt is
    too long``, vLLM's "maximum context length is". A framework's error that wraps the SDK's is
    followed down its causes. The numbers are read from llama.cpp's ``n_prompt_tokens`` and
    ``n_ctx`` and from the messages of llama.cpp, OpenAI and Anthropic; vLLM's message is not
    read (its refusal doubles the ratio).
    """
    seen: BaseException | None = error
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, InputTooLong):
            return seen
        if getattr(seen, "status_code", None) == 400:
            body = getattr(seen, "body", None)
            text = f"{seen} {body}"
            if any(marker in text for marker in _MARKERS):
                tokens, context = _body_numbers(body)
                if tokens is None or context is None:
                    tokens, context = _text_numbers(text)
                return InputTooLong(
                    f"the model refused the request for its length: {seen}",
                    prompt_tokens=tokens,
                    context_tokens=context,
                )
        seen = seen.__cause__ or seen.__context__
    return None


class InputRatio:
    """How many tokens one summarizer's provider counts per token slimcache estimates.

    Args:
        name: The summarizer's id, for messages.

    Attributes:
        value: The ratio learned (``None``: none yet, no reply reported its input tokens and
            no request was refused for its length). It may be below 1.0; the bound never
            uses less (:meth:`in_force`).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.value: float | None = None
        self._lock = threading.Lock()

    def in_force(self) -> float:
        """The ratio the bound uses: the learned one, between 1.0 and :data:`MAX_RATIO`."""
        value = self.value
        return 1.0 if value is None else min(max(value, 1.0), MAX_RATIO)

    def observed(self, provider_tokens: float, estimated: int) -> None:
        """Learn from one request the provider counted ``provider_tokens`` for, which slimcache
        estimated at ``estimated``: a higher ratio is taken at once, a lower one moves the
        learned ratio :data:`FALL` of the way down."""
        if estimated <= 0 or provider_tokens <= 0:
            return
        seen = provider_tokens / estimated
        with self._lock:
            value = self.value
            self.value = seen if value is None or seen >= value else value + FALL * (seen - value)

    def refused(self, refusal: InputTooLong, estimated: int, limit: int | None) -> float:
        """Raise the ratio after a request estimated at ``estimated`` was refused for its
        length, so that the next step fits; return the ratio now in force.

        With the refusal's numbers, the ratio becomes at least the provider's count over the
        estimate, and enough that a step of ``limit`` (``max_input_tokens``) fits the context
        the refusal names; without them, the ratio in force is doubled.
        """
        tokens, context = refusal.prompt_tokens, refusal.context_tokens
        with self._lock:
            now = 1.0 if self.value is None else max(self.value, 1.0)
            if tokens is None or estimated <= 0:
                raised = 2 * now
            else:
                raised = max(now, tokens / estimated)
                if context is not None and limit is not None and context < tokens:
                    raised = max(raised, tokens * limit / (estimated * context))
                if raised <= now:  # the numbers do not explain the refusal
                    raised = 2 * now
            self.value = min(raised, MAX_RATIO)
        if context is not None and limit is not None and context < limit:
            logger.warning(
                "%s: max_input_tokens=%d is more than the model's context of %d tokens",
                self.name,
                limit,
                context,
            )
        return self.in_force()


_RATIOS: PerName[InputRatio] = register(
    __name__,
    "input ratios",
    "each summarizer's token count against the estimate",
    PerName(InputRatio),
)


def ratio_for(name: str) -> InputRatio:
    """The process's learned ratio of the summarizer ``name``."""
    return _RATIOS.get(name)
