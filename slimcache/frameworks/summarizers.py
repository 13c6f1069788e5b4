"""A framework's model as the summarizer: what ``model=`` makes, and how a cut reply is retried.

Every integration takes ``model`` as a framework's model, a model name, or a slimcache
summarizer; :func:`summarizer_for` makes the summarizer from either. The summarizers built on a
framework's model (LangChain's, Pydantic AI's, the Agents SDK's) share :class:`ModelSummarizer`:
each says how to send one request and read its reply, and the class asks once more, shorter,
when the reply was cut at its limit (:func:`~slimcache.core.truncation.summarize_within_budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from slimcache._exceptions import ConfigurationError
from slimcache.core.limit_field import LimitField
from slimcache.core.settings.checks import check_summarizer
from slimcache.core.summarizer import Summarizer, SummaryContext
from slimcache.core.truncation import (
    OnTruncated,
    Reply,
    ReplyLimit,
    check_on_truncated,
    summarize_within_budget,
)
from slimcache.messages import Message

__all__ = ["ModelSummarizer", "summarizer_for"]


def summarizer_for(
    model: object,
    kinds: type | tuple[type, ...],
    make: Callable[[Any], Summarizer],
    *,
    what: str,
) -> Summarizer:
    """The summarizer ``model`` makes: ``make(model)`` for a framework's model (an instance of
    ``kinds``) or a model name, else ``model`` itself, a slimcache summarizer.

    Args:
        model: What the integration was given as ``model``.
        kinds: The framework's model classes.
        make: Makes the framework's summarizer of a model or a model name.
        what: The framework's model and name in words, as the error names them
            (``"a Pydantic AI model, a model name such as 'openai:gpt-4o-mini'"``).

    Raises:
        ConfigurationError: ``model`` is none of them, naming it.
    """
    if isinstance(model, (str, kinds)):
        return make(model)
    if not callable(model):
        raise ConfigurationError(
            f"model must be {what}, or a slimcache summarizer (messages, context) -> str; "
            f"got {model!r}"
        )
    check_summarizer(model)
    return model


class ModelSummarizer:
    """A framework's model as a slimcache summarizer: one request for each prompt, and a reply
    cut at its limit asked for once more, shorter (then kept or refused as ``on_truncated``
    says).

    A subclass sends the request (:meth:`reply`) and may say what limits the reply
    (:meth:`limit`). One that sends the budget in an OpenAI-compatible request sets
    :attr:`limit_field` and sends it in the field that names: a server refusing
    ``max_tokens`` is asked once more with ``max_completion_tokens``, from then on.

    Args:
        name: The id slimcache records with each cached summary.
        on_truncated: When the reply is still cut after asking for a shorter one: ``"accept"``
            keeps it with a warning logged, ``"raise"`` raises
            :class:`~slimcache.SummarizerError`.

    Raises:
        ConfigurationError: ``on_truncated`` is not one of its choices.
    """

    def __init__(self, name: str, on_truncated: OnTruncated) -> None:
        self.name = name
        # slimcache records "<module>.<__qualname__>" with each summary; see slimcache.llm.
        self.__qualname__ = name
        self.on_truncated = check_on_truncated(on_truncated)
        self.limit_field: LimitField | None = None

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` as ``context`` asks; see :class:`slimcache.SummaryContext`.

        Raises:
            SummarizerError: The reply has no text, or it is cut at its limit even when asked
                for a shorter summary (with ``on_truncated="raise"``).
        """

        async def complete(prompt: str) -> Reply:
            if self.limit_field is None:
                return await self.reply(prompt, messages, context)
            return await self.limit_field.send(
                lambda: self.reply(prompt, messages, context), context.report, self.name
            )

        return await summarize_within_budget(
            complete,
            context,
            on_truncated=self.on_truncated,
            name=self.name,
            limit=self.limit(context.max_tokens),
        )

    async def reply(
        self, prompt: str, messages: Sequence[Message], context: SummaryContext
    ) -> Reply:
        """The model's reply to one request: ``prompt`` as the task's prompt, ``messages``
        and ``context`` as :meth:`slimcache.SummaryContext.to_chat` sends them."""
        raise NotImplementedError

    def limit(self, max_tokens: int) -> ReplyLimit:
        """What cuts the reply, as the messages about a cut reply name it: by default the
        summary's budget, which :meth:`reply` sends as the reply's limit."""
        return ReplyLimit.budget(max_tokens)
