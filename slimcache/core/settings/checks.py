"""One check per setting the front doors share; each raises a message naming the argument.

:mod:`slimcache.core.settings.groups` groups these into the settings objects the front doors
build; a front door with a setting of its own calls its check here directly.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping

from slimcache._exceptions import ConfigurationError
from slimcache.stores.protocol import abilities
from slimcache.stores.toolkit import check_seconds, redact_url

__all__ = [
    "check_callables",
    "check_choice",
    "check_flag",
    "check_input_room",
    "check_lock_wait",
    "check_max_input_tokens",
    "check_message_overhead",
    "check_seconds_or_none",
    "check_store",
    "check_summarizer",
    "check_template",
    "check_token_counter",
    "fingerprints_by_id",
]


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


def check_summarizer(summarizer: object) -> None:
    """Check a ``summarizer`` argument.

    Raises:
        ConfigurationError: It is not callable.
    """
    if not callable(summarizer):
        raise ConfigurationError("summarizer must be a callable (messages, context) -> str")
    try:
        signature = inspect.signature(summarizer)
    except (TypeError, ValueError):  # no signature to read (a builtin): it will tell when called
        return
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(summarizer, "__qualname__", type(summarizer).__name__)
        raise ConfigurationError(
            f"summarizer must take two arguments, (messages, context); {name}{signature} "
            "does not. Add the context (async def summarize(messages, context)), or keep your "
            "summarize(messages) and cache it with cached_summarizer(store)"
        ) from None


def check_token_counter(token_counter: object) -> None:
    """Check a ``token_counter`` argument.

    Raises:
        ConfigurationError: It is not callable.
    """
    if not callable(token_counter):
        raise ConfigurationError(
            f"token_counter must be a callable (text) -> int, got {type(token_counter).__name__}"
        )


def check_message_overhead(message_overhead: object) -> None:
    """Check a ``message_overhead`` argument: an integer >= 0 (``bool`` is not one).

    Raises:
        ConfigurationError: Naming the argument.
    """
    if isinstance(message_overhead, bool) or not isinstance(message_overhead, int):
        raise ConfigurationError("message_overhead must be an integer")
    if message_overhead < 0:
        raise ConfigurationError("message_overhead must not be negative")


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Check that a literal argument is one of ``choices``.

    Raises:
        ConfigurationError: Naming the argument, the choices and the value given.
    """
    if not isinstance(value, str) or value not in choices:
        listed = " or ".join(repr(choice) for choice in choices)
        raise ConfigurationError(f"{name} must be {listed}, got {value!r}")


def check_flag(name: str, value: object) -> None:
    """Check that an argument is ``True`` or ``False`` (not merely truthy).

    Raises:
        ConfigurationError: Naming the argument.
    """
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {value!r}")


def check_template(name: str, template: object, **fields: object) -> None:
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


def fingerprints_by_id(fingerprint: object) -> bool:
    """Check a ``fingerprint`` setting; return whether messages are fingerprinted by id.

    Raises:
        ConfigurationError: It is neither ``"content"`` nor ``"id"``.
    """
    check_choice("fingerprint", fingerprint, ("content", "id"))
    return fingerprint == "id"


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


def check_max_input_tokens(max_input_tokens: object) -> None:
    """Check a ``max_input_tokens`` argument: ``"auto"``, ``None`` or an integer > 0.

    Raises:
        ConfigurationError: Naming the argument.
    """
    if max_input_tokens is None or (
        isinstance(max_input_tokens, str) and max_input_tokens == "auto"
    ):
        return
    if (
        isinstance(max_input_tokens, bool)
        or not isinstance(max_input_tokens, int)
        or max_input_tokens <= 0
    ):
        raise ConfigurationError(
            f"max_input_tokens must be 'auto', None or a positive integer, got {max_input_tokens!r}"
        )


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
