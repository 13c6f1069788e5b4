"""Ready-made summarizers for the OpenAI and Anthropic APIs, through their official SDKs.

Both are async :data:`slimcache.Summarizer` s: pass one to :class:`slimcache.SummarizeCompressor`
(or any other slimcache compressor) in place of your own function::

    from slimcache.llm import OpenAISummarizer

    compressor = SummarizeCompressor(OpenAISummarizer("gpt-4o-mini"), store)

The SDKs are optional: ``pip install "slimcache[openai]"`` or ``"slimcache[anthropic]"``.
Importing this module needs neither; building a summarizer without its SDK raises
:class:`~slimcache.MissingExtraError` naming the ``pip install`` to run.

Transient failures (429, 408, 409, 5xx including Anthropic's 529 "overloaded", connection
errors and timeouts) are retried by the SDK itself, with exponential backoff and jitter and
honouring the server's ``Retry-After``; ``max_retries`` sets how many times. Anything else, and
a reply without text, raises, and the compressor turns that into a
:class:`~slimcache.SummarizerError` with the SDK's exception as ``__cause__``.

A reply the model cut at the summary's budget (``finish_reason="length"``,
``stop_reason="max_tokens"``) is never returned as if it were whole: the request is made once
more with a prompt asking for a shorter summary, and if that reply is no better (cut too, or
empty) the call raises :class:`~slimcache.SummarizerError`, so nothing is cached (or, with
``on_truncated="accept"``, the first cut summary is returned and a warning logged).
The compressor counts both in its :class:`~slimcache.Stats` (``truncated_replies``,
``shorter_retries``, ``truncated_accepted``).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from slimcache._exceptions import ConfigurationError, MissingExtraError, SummarizerError
from slimcache._install import pip_install
from slimcache.core.limit_field import LimitField, LimitName
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import (
    OnTruncated,
    Reply,
    check_on_truncated,
    summarize_within_budget,
    usage_of,
)
from slimcache.messages import Message

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message as AnthropicReply
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion
    from typing_extensions import Self

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "AnthropicSummarizer",
    "OpenAISummarizer",
]

DEFAULT_MAX_RETRIES = 4
"""Retries of a transient failure for a client the summarizer builds itself."""

DEFAULT_TIMEOUT = 120.0
"""Seconds one attempt may take, for a client the summarizer builds itself."""


def _check_model(model: object) -> str:
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError("model must be a non-empty string, e.g. 'gpt-4o-mini'")
    return model


def _check_max_retries(max_retries: object) -> int | None:
    if max_retries is None:
        return None
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigurationError("max_retries must be an integer >= 0")
    return max_retries


def _check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not timeout > 0
        or math.isinf(timeout)
    ):
        raise ConfigurationError("timeout must be a positive, finite number of seconds")
    return float(timeout)


_C = TypeVar("_C", "AsyncOpenAI", "AsyncAnthropic")


def _with_options(client: _C, retries: int | None, seconds: float | None) -> _C:
    """The caller's client, with the retries and timeout given here (as it is if none)."""
    options: dict[str, Any] = {}
    if retries is not None:
        options["max_retries"] = retries
    if seconds is not None:
        options["timeout"] = seconds
    return client.with_options(**options) if options else client


def _client_options(
    client: object, base_url: str | None, api_key: str | None, provider: str
) -> None:
    if client is not None and (base_url is not None or api_key is not None):
        raise ConfigurationError(
            f"give either client= or base_url=/api_key= to the {provider} summarizer, not both: "
            "the client already has its own"
        )


class _SDKSummarizer:
    """What both summarizers share: identity, options, closing the client they built."""

    provider = ""

    def __init__(self, model: str, on_truncated: OnTruncated) -> None:
        self.model = _check_model(model)
        self.on_truncated = check_on_truncated(on_truncated)
        self.name = f"{self.provider}:{model}"
        # slimcache records summarizer_name(summarizer), "<module>.<__qualname__>", with every
        # cached summary; a per-instance qualified name makes that id carry the model, so a
        # change of model is a change of summarizer and older summaries are not reused.
        self.__qualname__ = self.name
        self._owns_client = False
        self._closable: Any = None

    async def aclose(self) -> None:
        """Close the HTTP client, if this summarizer built it (a client you gave is yours)."""
        if self._owns_client and self._closable is not None:
            await self._closable.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"


class OpenAISummarizer(_SDKSummarizer):
    """Summarizes with any OpenAI-compatible chat-completions API, via ``openai.AsyncOpenAI``.

    Each call sends ``context.to_chat(messages)`` (the task's prompt as the system message, the
    previous summary and the transcript as the user message) with the summary's token budget,
    ``context.max_tokens``, as ``max_tokens``, and returns the reply's text. A reply cut at the
    budget (``finish_reason="length"``) is asked for again, shorter; see ``on_truncated``.

    The id slimcache records with each cached summary is ``"slimcache.llm.openai:<model>"``, so
    summaries made with another model are not reused (see ``reuse_entries``).

    Args:
        model: The model name sent with every request, e.g. ``"gpt-4o-mini"``.
        client: An ``openai.AsyncOpenAI`` to use (Azure, a proxy, custom HTTP settings).
            Without one, a client is built from ``base_url`` and ``api_key``.
        base_url: The API root, e.g. ``"http://localhost:11434/v1"`` for a local server
            (default: ``OPENAI_BASE_URL``, else the OpenAI API).
        api_key: The key (default: ``OPENAI_API_KEY``). A server that needs none still wants
            a value: pass any string.
        max_retries: How many times a transient failure is retried by the SDK. Default:
            ``DEFAULT_MAX_RETRIES`` for a client built here; a given client's own setting.
        timeout: Seconds one attempt may take. Default: ``DEFAULT_TIMEOUT`` for a client
            built here; a given client's own setting. The compressor's
            ``summarizer_timeout`` bounds all attempts together.
        temperature: Sent when given; otherwise the server's default applies.
        extra_body: Further JSON fields merged into every request body (server-specific
            options).
        token_limit: The request field that carries the budget: ``"max_tokens"`` or
            ``"max_completion_tokens"``, which OpenAI's reasoning models require. By default
            ``max_tokens`` (the one llama.cpp's server obeys), and ``max_completion_tokens``
            from the first request a server refuses ``max_tokens`` on (HTTP 400), which is
            made once more with it.
        on_truncated: When the reply is cut at the budget, the request is made once more with
            a prompt asking for a shorter summary; if that reply is cut too, ``"raise"``
            (default) raises :class:`~slimcache.SummarizerError`, so nothing is cached, and
            ``"accept"`` returns the cut summary with a warning logged.

    Raises:
        ConfigurationError: An invalid argument, both ``client`` and ``base_url``/``api_key``,
            or no API key to be found.
        MissingExtraError: The ``openai`` package is not installed and no client was given.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        token_limit: LimitName | None = None,
        on_truncated: OnTruncated = "raise",
    ) -> None:
        super().__init__(model, on_truncated)
        _client_options(client, base_url, api_key, "OpenAI")
        retries = _check_max_retries(max_retries)
        seconds = _check_timeout(timeout)
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, (int, float))
        ):
            raise ConfigurationError("temperature must be a number")
        if token_limit not in (None, "max_tokens", "max_completion_tokens"):
            raise ConfigurationError("token_limit must be 'max_tokens' or 'max_completion_tokens'")
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body is not None else None
        self.token_limit = token_limit
        self._limit_field = LimitField(token_limit)
        if client is None:
            client = _build_client(_OPENAI, base_url, api_key, retries, seconds)
            self._owns_client = True
        else:
            client = _with_options(client, retries, seconds)
        self._client = client
        self._closable = client

    @property
    def client(self) -> AsyncOpenAI:
        """The ``openai.AsyncOpenAI`` the requests go through."""
        return self._client

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` as ``context`` asks; see :class:`slimcache.SummaryContext`.

        Returns:
            The reply's text.

        Raises:
            openai.APIError: The request failed for good (after the retries, or at once for a
                non-transient error such as 400 or 401).
            SummarizerError: The reply has no text, or it is cut at the budget even when asked
                for a shorter summary (with ``on_truncated="raise"``).
        """
        chat = context.to_chat(messages)

        async def complete(prompt: str) -> Reply:
            sent = [{"role": "system", "content": prompt}, *chat[1:]]
            return await self._limit_field.send(
                lambda: self._complete(sent, context), context.report, self.name
            )

        return await summarize_within_budget(
            complete, context, on_truncated=self.on_truncated, name=self.name
        )

    async def _complete(self, chat: list[dict[str, str]], context: SummaryContext) -> Reply:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": chat,
            self._limit_field.name: context.max_tokens,
        }
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.extra_body is not None:
            request["extra_body"] = self.extra_body
        completion: ChatCompletion = await self._client.chat.completions.create(**request)
        if not completion.choices:
            raise SummarizerError(f"{self.name} replied with no choices")
        choice = completion.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        why = f", refusal: {refusal!r:.200}" if refusal else ""
        used = usage_of(completion.usage, "prompt_tokens", "completion_tokens")
        return Reply(
            choice.message.content or "",
            choice.finish_reason == "length",
            f"finish_reason={choice.finish_reason!r}{why}",
            *used,
        )


class AnthropicSummarizer(_SDKSummarizer):
    """Summarizes with the Anthropic Messages API, via ``anthropic.AsyncAnthropic``.

    Each call sends the task's prompt (``context.prompt``) as ``system``, the previous summary
    and the transcript as one user message, and the summary's token budget
    (``context.max_tokens``) as ``max_tokens``; it returns the reply's text blocks joined. A
    reply cut at the budget (``stop_reason="max_tokens"``) is asked for again, shorter; see
    ``on_truncated``.

    The id slimcache records with each cached summary is ``"slimcache.llm.anthropic:<model>"``.

    Args:
        model: The model name sent with every request, e.g. ``"claude-haiku-4-5"``.
        client: An ``anthropic.AsyncAnthropic`` to use. Without one, a client is built from
            ``base_url`` and ``api_key``.
        base_url: The API root (default: ``ANTHROPIC_BASE_URL``, else the Anthropic API).
        api_key: The key (default: the SDK's own look-up, ``ANTHROPIC_API_KEY`` first).
        max_retries: How many times a transient failure (429, 5xx, 529 overloaded, connection
            errors, timeouts) is retried by the SDK. Default: ``DEFAULT_MAX_RETRIES`` for a
            client built here; a given client's own setting.
        timeout: Seconds one attempt may take. Default: ``DEFAULT_TIMEOUT`` for a client
            built here; a given client's own setting.
        extra_body: Further JSON fields merged into every request body, e.g.
            ``{"temperature": 0}`` where the model takes one.
        on_truncated: When the reply is cut at the budget, the request is made once more with
            a prompt asking for a shorter summary; if that reply is cut too, ``"raise"``
            (default) raises :class:`~slimcache.SummarizerError`, so nothing is cached, and
            ``"accept"`` returns the cut summary with a warning logged.

    Raises:
        ConfigurationError: An invalid argument, or both ``client`` and
            ``base_url``/``api_key``.
        MissingExtraError: The ``anthropic`` package is not installed and no client was given.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        on_truncated: OnTruncated = "raise",
    ) -> None:
        super().__init__(model, on_truncated)
        _client_options(client, base_url, api_key, "Anthropic")
        retries = _check_max_retries(max_retries)
        seconds = _check_timeout(timeout)
        self.extra_body = dict(extra_body) if extra_body is not None else None
        if client is None:
            client = _build_client(_ANTHROPIC, base_url, api_key, retries, seconds)
            self._owns_client = True
        else:
            client = _with_options(client, retries, seconds)
        self._client = client
        self._closable = client

    @property
    def client(self) -> AsyncAnthropic:
        """The ``anthropic.AsyncAnthropic`` the requests go through."""
        return self._client

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` as ``context`` asks; see :class:`slimcache.SummaryContext`.

        Returns:
            The reply's text blocks, joined.

        Raises:
            anthropic.APIError: The request failed for good (after the retries, or at once for
                a non-transient error such as 400 or 401).
            SummarizerError: The reply has no text, or it is cut at the budget even when asked
                for a shorter summary (with ``on_truncated="raise"``).
        """
        user = context.to_chat(messages)[1]["content"]

        async def complete(prompt: str) -> Reply:
            return await self._complete(prompt, user, context)

        return await summarize_within_budget(
            complete, context, on_truncated=self.on_truncated, name=self.name
        )

    async def _complete(self, system: str, user: str, context: SummaryContext) -> Reply:
        request: dict[str, Any] = {
            "model": self.model,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "max_tokens": context.max_tokens,
        }
        if self.extra_body is not None:
            request["extra_body"] = self.extra_body
        response: AnthropicReply = await self._client.messages.create(**request)
        text = "".join(
            getattr(block, "text", "") for block in response.content if block.type == "text"
        )
        used = usage_of(response.usage, "input_tokens", "output_tokens")
        reason = f"stop_reason={response.stop_reason!r}"
        return Reply(text, response.stop_reason == "max_tokens", reason, *used)


@dataclass(frozen=True)
class _SDK:
    """One provider's SDK, as far as building its async client goes.

    Attributes:
        package: The SDK's package, which is also the name of its slimcache extra.
        client: Its async client class.
        error: Its base exception class, raised by the client's constructor.
        provider: How messages name the provider.
        summarizer: The summarizer that needs it.
        key_variable: The environment variable the client reads its key from.
    """

    package: str
    client: str
    error: str
    provider: str
    summarizer: str
    key_variable: str


_OPENAI = _SDK(
    package="openai",
    client="AsyncOpenAI",
    error="OpenAIError",
    provider="OpenAI",
    summarizer="OpenAISummarizer",
    key_variable="OPENAI_API_KEY",
)
_ANTHROPIC = _SDK(
    package="anthropic",
    client="AsyncAnthropic",
    error="AnthropicError",
    provider="Anthropic",
    summarizer="AnthropicSummarizer",
    key_variable="ANTHROPIC_API_KEY",
)


def _build_client(
    sdk: _SDK,
    base_url: str | None,
    api_key: str | None,
    max_retries: int | None,
    timeout: float | None,
) -> Any:
    """Build the SDK's async client, with slimcache's defaults for what is not given.

    Raises:
        MissingExtraError: The SDK is not installed.
        ConfigurationError: The client cannot be built (no API key to be found).
    """
    try:
        module = importlib.import_module(sdk.package)
    except ImportError:
        raise MissingExtraError(
            f"{sdk.summarizer} needs the {sdk.package} package: {pip_install(sdk.package)}"
        ) from None
    try:
        return getattr(module, sdk.client)(
            base_url=base_url,
            api_key=api_key,
            max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        )
    except getattr(module, sdk.error) as exc:
        raise ConfigurationError(
            f"cannot build the {sdk.provider} client: {exc} "
            f"(pass api_key= or set {sdk.key_variable})"
        ) from exc
