"""The kinds of check a setting is given: each takes the value, returns it normalised (a
number of seconds as a float), and raises a :class:`ConfigurationError` naming the argument.

:data:`~slimcache.core.settings.compressor.CHECKS` names, beside the compressor's settings,
which of these checks each setting, and every front door taking a compressor setting checks it
there; a front door's setting of its own is checked with one of these directly. A new kind of
setting (one no check here fits) adds its check here. The checks of a setting against another
(:func:`check_input_room`, :func:`check_ceiling`) are here too, for the front doors that take
both.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args

from slimcache._exceptions import ConfigurationError
from slimcache.core.policy import (
    AnyOf,
    ContextWindow,
    Keep,
    MessageThreshold,
    TokenThreshold,
    Trigger,
)
from slimcache.core.summarizer import Prompts
from slimcache.stores.keys import normalize_namespace
from slimcache.stores.protocol import abilities, conforms
from slimcache.stores.toolkit import check_seconds, redact_url

__all__ = [
    "Check",
    "check_callable",
    "check_callables",
    "check_ceiling",
    "check_choice",
    "check_count_or_none",
    "check_flag",
    "check_input_room",
    "check_keep",
    "check_lease_ttl",
    "check_lock_wait",
    "check_max_input_tokens",
    "check_message_overhead",
    "check_namespace",
    "check_prompts",
    "check_seconds_or_none",
    "check_store",
    "check_summarizer",
    "check_summarizer_id",
    "check_template",
    "check_token_counter",
    "check_trigger",
    "choice",
    "named",
]

_T = TypeVar("_T")

Check = Callable[[Any], Any]
"""A setting's check: takes the value, returns it normalised, raises naming the setting."""


def named(check: Callable[[str, Any], Any], name: str) -> Check:
    """The check of one setting, from a check of any setting that takes its name first."""
    return lambda value: check(name, value)


def choice(name: str, choices: Any) -> Check:
    """The check of a setting that is one of ``choices``: a tuple of strings, or the
    ``Literal`` type listing them (its type, written once)."""
    allowed: tuple[str, ...] = get_args(choices) or tuple(choices)
    return lambda value: check_choice(name, value, allowed)


def check_store(store: object, *, optional: bool = True) -> None:
    """Check a ``store`` argument: a :class:`Store`, or ``None`` where ``optional`` (the front
    door then makes a memory store).

    Raises:
        ConfigurationError: It lacks async ``get``, ``set`` or ``delete``.
    """
    if isinstance(store, str):
        raise ConfigurationError(
            f"store must be a store, not the URL string {redact_url(store)!r}: open it first, "
            f"store=open_store({redact_url(store)!r})"
        )
    if (store is not None or not optional) and not abilities(store).store:
        raise ConfigurationError(
            f"store must have async get, set and delete methods, got {type(store).__name__}"
        )


def check_summarizer(summarizer: _T) -> _T:
    """Check a ``summarizer`` argument.

    Raises:
        ConfigurationError: It is not callable.
    """
    if not callable(summarizer):
        raise ConfigurationError("summarizer must be a callable (messages, context) -> str")
    try:
        signature = inspect.signature(summarizer)
    except (TypeError, ValueError):  # no signature to read (a builtin): it will tell when called
        return summarizer
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(summarizer, "__qualname__", type(summarizer).__name__)
        raise ConfigurationError(
            f"summarizer must take two arguments, (messages, context); {name}{signature} "
            "does not. Add the context (async def summarize(messages, context)), or keep your "
            "summarize(messages) and cache it with cached_summarizer(store)"
        ) from None
    return summarizer


def check_token_counter(token_counter: _T) -> _T:
    """Check a ``token_counter`` argument.

    Raises:
        ConfigurationError: It is not callable.
    """
    if not callable(token_counter):
        raise ConfigurationError(
            f"token_counter must be a callable (text) -> int, got {type(token_counter).__name__}"
        )
    return token_counter


def check_message_overhead(message_overhead: object) -> int:
    """Check a ``message_overhead`` argument: an integer >= 0 (``bool`` is not one).

    Raises:
        ConfigurationError: Naming the argument.
    """
    if isinstance(message_overhead, bool) or not isinstance(message_overhead, int):
        raise ConfigurationError("message_overhead must be an integer")
    if message_overhead < 0:
        raise ConfigurationError("message_overhead must not be negative")
    return message_overhead


def check_choice(name: str, value: _T, choices: tuple[str, ...]) -> _T:
    """Check that a literal argument is one of ``choices``.

    Raises:
        ConfigurationError: Naming the argument, the choices and the value given.
    """
    if not isinstance(value, str) or value not in choices:
        listed = " or ".join(repr(choice) for choice in choices)
        raise ConfigurationError(f"{name} must be {listed}, got {value!r}")
    return value


def check_flag(name: str, value: object) -> bool:
    """Check that an argument is ``True`` or ``False`` (not merely truthy).

    Raises:
        ConfigurationError: Naming the argument.
    """
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {value!r}")
    return value


def check_template(name: str, template: object, **fields: object) -> str:
    """Check a message template: a string with ``{summary}`` that formats with ``fields``.

    Raises:
        ConfigurationError: Naming the argument.
    """
    if not isinstance(template, str):
        raise ConfigurationError(f"{name} must be a string containing {{summary}}")
    try:
        template.format(summary="", **fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ConfigurationError(f"{name} is not a valid template: {exc}") from None
    if "{summary}" not in template:
        raise ConfigurationError(f"{name} must contain {{summary}}")
    return template


def check_seconds_or_none(name: str, value: object) -> float | None:
    """``None``, or a positive, finite number of seconds given as a number.

    :func:`slimcache.stores.toolkit.check_seconds` with one rule more: a constructor argument is
    never a numeric string (only URL options are).

    Raises:
        ConfigurationError: Naming the setting.
    """
    if isinstance(value, str):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    return check_seconds(name, value, allow_none=True)


def check_count_or_none(name: str, value: object) -> int | None:
    """Check a count that may be ``None`` (off).

    Raises:
        ConfigurationError: ``value`` is neither a positive integer nor ``None``.
    """
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer or None, got {value!r}")
    return value


def check_callables(callables: Mapping[str, object]) -> None:
    """Check that every given (not ``None``) hook or function is callable.

    Raises:
        ConfigurationError: Naming the first that is not.
    """
    for name, value in callables.items():
        if value is not None and not callable(value):
            raise ConfigurationError(f"{name} must be callable, got {type(value).__name__}")


def check_lock_wait(lock_wait: object) -> float:
    """Check a ``lock_wait`` argument: a number of seconds >= 0; return it as a float.

    Raises:
        ConfigurationError: Naming the argument.
    """
    if (
        isinstance(lock_wait, bool)
        or not isinstance(lock_wait, (int, float))
        or math.isnan(lock_wait)
        or lock_wait < 0
    ):
        raise ConfigurationError(f"lock_wait must be a number of seconds >= 0, got {lock_wait!r}")
    return float(lock_wait)


def check_max_input_tokens(max_input_tokens: _T) -> _T:
    """Check a ``max_input_tokens`` argument: ``"auto"``, ``None`` or an integer > 0.

    Raises:
        ConfigurationError: Naming the argument.
    """
    if max_input_tokens is None or (
        isinstance(max_input_tokens, str) and max_input_tokens == "auto"
    ):
        return max_input_tokens
    if (
        isinstance(max_input_tokens, bool)
        or not isinstance(max_input_tokens, int)
        or max_input_tokens <= 0
    ):
        raise ConfigurationError(
            f"max_input_tokens must be 'auto', None or a positive integer, got {max_input_tokens!r}"
        )
    return max_input_tokens


def check_input_room(max_input_tokens: int, max_summary_tokens: int, prompt_tokens: int) -> None:
    """Check that a bound on the summarizer's input leaves room for what each call holds.

    A call holds the prompt (``prompt_tokens``), a previous summary (``max_summary_tokens``)
    and at least as many tokens of messages.

    Raises:
        ConfigurationError: Naming ``max_input_tokens`` and the least it may be.
    """
    least = prompt_tokens + 2 * max_summary_tokens
    if max_input_tokens < least:
        raise ConfigurationError(
            f"max_input_tokens must leave room for the prompt ({prompt_tokens} tokens), a "
            f"previous summary and as many tokens of messages ({max_summary_tokens} each, "
            f"max_summary_tokens): at least {least}, got {max_input_tokens}"
        )


def check_callable(name: str, value: _T) -> _T:
    """Check a hook or function argument: ``None`` or a callable.

    Raises:
        ConfigurationError: Naming the argument.
    """
    check_callables({name: value})
    return value


def check_lease_ttl(lease_ttl: object) -> float:
    """Check a ``lease_ttl`` argument: a positive, finite number of seconds; return it as a float.

    Raises:
        ConfigurationError: Naming the argument.
    """
    lease = check_seconds_or_none("lease_ttl", lease_ttl)
    if lease is None:
        raise ConfigurationError("lease_ttl must be a number of seconds, got None")
    return lease


def check_namespace(namespace: _T) -> _T:
    """Check a ``namespace`` argument (see :func:`~slimcache.stores.keys.normalize_namespace`);
    return it as given, the keys add the separator.

    Raises:
        ConfigurationError: Naming the argument.
    """
    normalize_namespace(namespace)
    return namespace


def check_summarizer_id(summarizer_id: _T) -> _T:
    """Check a ``summarizer_id`` argument: ``None`` or a non-empty string.

    Raises:
        ConfigurationError: Naming the argument.
    """
    if summarizer_id is not None and (not isinstance(summarizer_id, str) or not summarizer_id):
        raise ConfigurationError(
            f"summarizer_id must be a non-empty string or None, got {summarizer_id!r}"
        )
    return summarizer_id


def check_prompts(prompts: object) -> Prompts:
    """Check a ``prompts`` argument: a :class:`Prompts`, or ``None`` for the default ones
    (returned filled in).

    Raises:
        ConfigurationError: Naming the argument.
    """
    if prompts is None:
        return Prompts()
    if not isinstance(prompts, Prompts):
        raise ConfigurationError(
            f"prompts must be a Prompts(...) object, got {type(prompts).__name__}"
        )
    return prompts


def _not_a_number(name: str, value: object, policy: str, tokens: str) -> None:
    """Refuse a bare number where a policy is expected, saying which to write."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise ConfigurationError(
            f"{name} must be a policy, not the number {value}: write {name}={policy}({value}) "
            f"(or {tokens}({value}) to count tokens)"
        )


def check_trigger(name: str, trigger: _T) -> _T:
    """Check a trigger argument (``trigger``, ``ceiling``): ``None`` or a :class:`Trigger`.

    Raises:
        ConfigurationError: Naming the argument; a bare number is told which policy to write.
    """
    if trigger is not None:
        _not_a_number(name, trigger, "MessageThreshold", "TokenThreshold")
        if not conforms(trigger, Trigger):
            raise ConfigurationError(f"{name} has no reason() method: {trigger!r}")
    return trigger


def check_keep(keep: _T) -> _T:
    """Check a ``keep`` argument: ``None`` or a :class:`Keep` policy.

    Raises:
        ConfigurationError: Naming the argument; a bare number is told which policy to write.
    """
    if keep is not None:
        _not_a_number("keep", keep, "KeepMessages", "KeepTokens")
        if not conforms(keep, Keep):
            raise ConfigurationError(f"keep has no satisfied() method: {keep!r}")
    return keep


def check_ceiling(refresh: str, ceiling: Trigger | None, trigger: Trigger) -> None:
    """Check ``refresh`` and ``ceiling`` together, each checked alone first: a background
    refresh needs a ceiling, an inline one takes none, and a ceiling counting what the
    (resolved) trigger counts is above it, or every request it fires on would wait.

    Raises:
        ConfigurationError: Naming ``ceiling`` or ``refresh``.
    """
    if ceiling is None:
        if refresh == "background":
            raise ConfigurationError(
                "refresh='background' needs a ceiling, the most an answer may hold while its "
                "summary is extended in the background: ceiling=MessageThreshold(40), say"
            )
        return
    bound = _threshold(ceiling)
    for item in trigger.triggers if isinstance(trigger, AnyOf) else (trigger,):
        fires = _threshold(item)
        if (
            bound is not None
            and fires is not None
            and bound[0] is fires[0]
            and bound[1] <= fires[1]
        ):
            raise ConfigurationError(
                f"ceiling {ceiling!r} must be above the trigger {item!r}: every request the "
                "trigger fires on would be over it, and wait"
            )
    if refresh == "inline":
        raise ConfigurationError(
            "ceiling applies only with refresh='background' (got refresh='inline')"
        )


def _threshold(policy: Trigger) -> tuple[type, int] | None:
    """A built-in threshold's kind and the count above which it fires; ``None`` for others."""
    if isinstance(policy, MessageThreshold):
        return MessageThreshold, policy.messages
    if isinstance(policy, TokenThreshold):
        return TokenThreshold, policy.tokens
    if isinstance(policy, ContextWindow):
        return ContextWindow, policy.limit
    return None
