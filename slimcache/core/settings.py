"""Checks the compressors share for their settings, and the one way hooks are called."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

from slimcache._exceptions import ConfigurationError
from slimcache.core.policy import Keep, KeepMessages, MessageThreshold, Trigger, check_hysteresis
from slimcache.stores.protocol import positive_int
from slimcache.stores.toolkit import check_seconds

__all__ = [
    "SUMMARY_ROLES",
    "call_hook",
    "check_callables",
    "check_seconds_or_none",
    "check_summary_format",
    "fingerprints_by_id",
    "resolve_policies",
]

logger = logging.getLogger("slimcache")

SUMMARY_ROLES = ("system", "developer", "user", "assistant")


def resolve_policies(
    trigger: Trigger | None, keep: Keep | None, *, default_keep: int
) -> tuple[Trigger, Keep]:
    """Fill in the default trigger and keep policy, and check the pair.

    Raises:
        ConfigurationError: Either is not a policy, or they leave no hysteresis.
    """
    resolved_trigger: Trigger = trigger if trigger is not None else MessageThreshold(20)
    resolved_keep: Keep = keep if keep is not None else KeepMessages(default_keep)
    if not isinstance(resolved_trigger, Trigger):
        raise ConfigurationError(f"trigger has no reason() method: {resolved_trigger!r}")
    if not isinstance(resolved_keep, Keep):
        raise ConfigurationError(f"keep has no satisfied() method: {resolved_keep!r}")
    check_hysteresis(resolved_trigger, resolved_keep)
    return resolved_trigger, resolved_keep


def check_summary_format(
    *,
    max_summary_tokens: object,
    message_overhead: object,
    summary_role: object,
    summary_template: object,
) -> None:
    """Check the settings that shape the summary message.

    Raises:
        ConfigurationError: Naming the first setting that is wrong.
    """
    positive_int("max_summary_tokens", max_summary_tokens)
    if isinstance(message_overhead, bool) or not isinstance(message_overhead, int):
        raise ConfigurationError("message_overhead must be an integer")
    if message_overhead < 0:
        raise ConfigurationError("message_overhead must not be negative")
    if summary_role not in SUMMARY_ROLES:
        raise ConfigurationError(
            f"summary_role must be system, developer, user or assistant, got {summary_role!r}"
        )
    if not isinstance(summary_template, str):
        raise ConfigurationError("summary_template must be a string")
    try:
        summary_template.format(summary="", start=0, end=0, count=0)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ConfigurationError(f"summary_template is not a valid template: {exc}") from None
    if "{summary}" not in summary_template:
        raise ConfigurationError("summary_template must contain {summary}")


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
    if fingerprint not in ("content", "id"):
        raise ConfigurationError(f"fingerprint must be 'content' or 'id', got {fingerprint!r}")
    return fingerprint == "id"


def check_callables(callables: Mapping[str, object]) -> None:
    """Check that every given (not ``None``) hook or function is callable.

    Raises:
        ConfigurationError: Naming the first that is not.
    """
    for name, value in callables.items():
        if value is not None and not callable(value):
            raise ConfigurationError(f"{name} must be callable")


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
