"""The exceptions slimcache raises.

Every exception derives from :class:`SlimcacheError`, so one ``except`` clause catches them all::

    SlimcacheError
    ├── ConfigurationError   (also a ValueError) a constructor argument or URL is wrong
    │   └── MissingExtraError (also an ImportError) the adapter for a URL is not installed
    ├── InvalidInput          (also a ValueError) a message, conversation or thread id is malformed
    ├── StoreError            the store failed; the driver's exception is chained as __cause__
    │   └── StoreTimeout      a store call did not answer within its time bound
    └── SummarizerError       the summarizer raised, timed out or returned nothing usable
        └── InputTooLong      the model refused a request for its length (HTTP 400, context)

Errors about input are raised before anything is written to the store.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "InputTooLong",
    "InvalidInput",
    "MissingExtraError",
    "SlimcacheError",
    "StoreError",
    "StoreTimeout",
    "SummarizerError",
]


class SlimcacheError(Exception):
    """Root of every exception raised by slimcache."""


class ConfigurationError(SlimcacheError, ValueError):
    """A constructor argument, option or store URL is invalid."""


class MissingExtraError(ConfigurationError, ImportError):
    """The adapter a store URL needs is not installed; the message names the ``pip install``."""


class InvalidInput(SlimcacheError, ValueError):
    """A message, conversation or thread id breaks a rule.

    Attributes:
        index: Position of the offending message in the list given, or ``None`` when the
            problem is not tied to one message (a thread id, the list itself).
        rule: Short statement of the rule that was broken.
    """

    def __init__(self, rule: str, *, index: int | None = None) -> None:
        self.index = index
        self.rule = rule
        where = f"messages[{index}]: " if index is not None else ""
        super().__init__(f"{where}{rule}")


class StoreError(SlimcacheError):
    """The store failed to read, write or delete; the driver's exception is the ``__cause__``."""


class StoreTimeout(StoreError):
    """A store call did not answer within its time bound (a frozen or unreachable server).

    Raised by the compressor's ``store_timeout`` and by the bundled stores' own ``timeout``.
    """


class SummarizerError(SlimcacheError):
    """The summarizer raised, timed out or returned an empty or non-string result.

    The store is left exactly as it was before the call.
    """


class InputTooLong(SummarizerError):
    """The model refused a summarizer request for its length: an HTTP 400 naming the context
    (llama.cpp's ``exceed_context_size_error``, OpenAI's ``context_length_exceeded``,
    Anthropic's ``prompt is too long``); the client's exception is the ``__cause__``.

    A compressor makes the step again, smaller, a few times before it lets this out (see
    :mod:`slimcache.core.input_ratio`).

    Attributes:
        prompt_tokens: The provider's count of the refused prompt, when the refusal gives it.
        context_tokens: The model's context in tokens, when the refusal gives it.
    """

    def __init__(
        self, message: str, *, prompt_tokens: int | None = None, context_tokens: int | None = None
    ) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
