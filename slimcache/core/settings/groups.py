"""What the compressor's settings and the front doors share beside each setting's check.

The types settings are written with (:data:`InputBoundSetting`, :data:`RefreshMode`, the
choices of the others), the defaults that are no setting's own (:data:`DEFAULT_KEEP`, the
default trigger, the summary message's template and roles), the default policies filled in and
checked as a pair (:func:`resolve_policies`), the input bound's sizing, and the calling of a
user's hooks.

A setting itself (its name, type, default and check) is declared once, in
:mod:`slimcache.core.settings.compressor`, and checked with the kinds of check of
:mod:`slimcache.core.settings.checks`. (The module is named for the groups of settings it
once declared, which re-declared those defaults; its importers keep its name.)
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Literal, Union

from slimcache.core.policy import Keep, KeepMessages, MessageThreshold, Trigger, check_hysteresis
from slimcache.core.settings.checks import check_keep, check_trigger
from slimcache.core.summarizer import Prompts
from slimcache.messages import TokenCounter

__all__ = [
    "DEFAULT_KEEP",
    "DEFAULT_MAX_INPUT_TOKENS",
    "DEFAULT_SUMMARY_TEMPLATE",
    "DEFAULT_TRIGGER",
    "INPUT_TOKENS_PER_SUMMARY_TOKEN",
    "SUMMARY_ROLES",
    "Fingerprint",
    "Hook",
    "InputBoundSetting",
    "OnStoreError",
    "OnSummarizerError",
    "RefreshMode",
    "ReuseEntries",
    "call_hook",
    "default_trigger",
    "input_limit",
    "prompt_tokens",
    "resolve_policies",
    "takes_messages_summary_ms",
]

logger = logging.getLogger("slimcache")

SUMMARY_ROLES = ("system", "developer", "user", "assistant")
"""The roles a summary message may have (``summary_role``)."""

DEFAULT_SUMMARY_TEMPLATE = "Summary of the earlier conversation:\n{summary}"
"""The summary message's text by default (``summary_template``)."""

DEFAULT_TRIGGER = 20
"""Messages past which every compressor compresses when given no ``trigger``."""

DEFAULT_KEEP = 10
"""Messages every compressor keeps verbatim when given no ``keep`` policy."""

DEFAULT_MAX_INPUT_TOKENS = 6000
"""The least ``max_input_tokens="auto"`` bounds a summarizer call to: with the default summary
budget of 1,000 tokens, a call and its reply fit a model with an 8,192-token context, with room
to spare for a tokenizer that counts more than the default counter."""

INPUT_TOKENS_PER_SUMMARY_TOKEN = 4
"""``max_input_tokens="auto"`` is at least this many times ``max_summary_tokens``: a call carries
a previous summary and about three times as much of new messages."""

InputBoundSetting = Union[int, Literal["auto"], None]  # noqa: UP007
"""A ``max_input_tokens`` argument: a number of tokens, ``"auto"`` or ``None`` (no bound)."""

Hook = Any
"""A user's hook: ``None`` or a callable, sync or async."""

RefreshMode = Literal["inline", "background"]
"""A ``refresh`` argument: when a due summary is made."""

OnSummarizerError = Literal["raise", "uncompressed"]
"""An ``on_summarizer_error`` argument of the compressor."""

OnStoreError = Literal["raise", "bypass"]
"""An ``on_store_error`` argument."""

ReuseEntries = Literal["matching", "any"]
"""A ``reuse_entries`` argument."""

Fingerprint = Literal["content", "id"]
"""A ``fingerprint`` argument."""


def resolve_policies(
    trigger: Trigger | None, keep: Keep | None, *, default_keep: int = DEFAULT_KEEP
) -> tuple[Trigger, Keep]:
    """Fill in the default trigger and keep policy, and check the pair.

    Every compressor compresses past :data:`DEFAULT_TRIGGER` messages and keeps
    :data:`DEFAULT_KEEP` by default, except where its docstring says why it keeps another count
    (``default_keep``).

    Raises:
        ConfigurationError: Either is not a policy, or they leave no hysteresis.
    """
    check_trigger("trigger", trigger)
    check_keep(keep)
    resolved_trigger = default_trigger(trigger)
    resolved_keep: Keep = keep if keep is not None else KeepMessages(default_keep)
    check_hysteresis(resolved_trigger, resolved_keep)
    return resolved_trigger, resolved_keep


def default_trigger(trigger: Trigger | None) -> Trigger:
    """``trigger``, or the default one: more than :data:`DEFAULT_TRIGGER` messages."""
    return trigger if trigger is not None else MessageThreshold(DEFAULT_TRIGGER)


# ---------------------------------------------------------------------- the input bound


def prompt_tokens(prompts: Prompts, max_summary_tokens: int, count: TokenCounter) -> int:
    """Tokens of the longer of the prompts messages are sent with (summarize, extend), the
    budget filled in, as ``count`` counts them."""
    budget = str(max_summary_tokens)
    return max(
        count(prompt.replace("{max_tokens}", budget))
        for prompt in (prompts.summarize, prompts.extend)
    )


def input_limit(
    max_input_tokens: InputBoundSetting, max_summary_tokens: int, prompt_tokens: int
) -> int | None:
    """The bound ``max_input_tokens`` sets, ``"auto"`` resolved: ``max_summary_tokens`` times
    :data:`INPUT_TOKENS_PER_SUMMARY_TOKEN`, at least :data:`DEFAULT_MAX_INPUT_TOKENS` and room
    for the prompt and two budgets; ``None``: no bound.

    Args:
        max_input_tokens: The setting, checked.
        max_summary_tokens: The summary budget, checked.
        prompt_tokens: :func:`prompt_tokens`, counted once by the caller.
    """
    if max_input_tokens != "auto":
        return max_input_tokens
    return max(
        DEFAULT_MAX_INPUT_TOKENS,
        INPUT_TOKENS_PER_SUMMARY_TOKEN * max_summary_tokens,
        prompt_tokens + 2 * max_summary_tokens,
    )


# ---------------------------------------------------------------------- hooks


def takes_messages_summary_ms(hook: Any) -> bool:
    """Whether an ``on_compress`` hook has convo-compress's shape, ``(messages, summary, ms)``,
    rather than slimcache's ``(CompressEvent)``: it requires two or more positional arguments."""
    if hook is None:
        return False
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in parameters if p.kind in positional and p.default is p.empty]
    return len(required) >= 2


async def call_hook(name: str, hook: Any, *args: Any) -> None:
    """Call a user's hook, sync or async; a hook that raises is logged, never propagated.

    A broken hook must not lose the user's compression: it is reported, not hidden.
    """
    if hook is None:
        return
    try:
        result = hook(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("%s hook raised", name)
