"""``trigger`` and ``keep`` as the agent frameworks write them, read as slimcache policies.

Every framework integration takes the sizes LangChain's ``SummarizationMiddleware`` made
familiar: ``("messages", 50)``, ``("tokens", 4000)`` and ``("fraction", 0.8)`` (of the model's
context window); a dict of sizes that must all be reached; a list of sizes and dicts of which
any one suffices. They apply to what the model is about to receive: as a trigger, ``messages``
counts the verbatim messages and ``tokens`` every message sent (the leading system messages, the
summary and the verbatim messages); as a ceiling, both count every message sent, the leading
system messages and the summary included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Union, get_args

from slimcache._exceptions import ConfigurationError
from slimcache.core.policy import AnyOf, Keep, KeepMessages, KeepTokens, Trigger, WindowState

__all__ = [
    "AllReached",
    "ContextSize",
    "Reaches",
    "TriggerSpec",
    "ceiling_policy",
    "keep_policy",
    "needs_context_size",
    "trigger_policy",
]

SizeKind = Literal["messages", "tokens", "fraction"]
"""The units of a context size."""

ContextSize = tuple[SizeKind, Union[int, float]]  # noqa: UP007
"""``("messages", 50)``, ``("tokens", 4000)`` or ``("fraction", 0.8)``."""

TriggerSpec = Union[  # noqa: UP007
    ContextSize,
    Mapping[str, Union[int, float]],  # noqa: UP007
    Sequence[Union[ContextSize, Mapping[str, Union[int, float]]]],  # noqa: UP007
]
"""One size, a dict of sizes that must all be reached, or a list of either (any one reached)."""

_UNITS = get_args(SizeKind)


@dataclass(frozen=True)
class Reaches:
    """Fires when the messages of the window it is given, or all the tokens sent, reach
    ``limit``: the verbatim messages as a trigger, every message sent as a ceiling."""

    unit: Literal["messages", "tokens"]
    limit: int

    def reason(self, state: WindowState) -> str | None:
        """``"messages>=50"`` or ``"tokens>=4000"`` when reached, else ``None``."""
        count = state.messages if self.unit == "messages" else state.total_tokens
        return f"{self.unit}>={self.limit}" if count >= self.limit else None


@dataclass(frozen=True)
class AllReached:
    """Fires when every one of its sizes is reached (a trigger dict)."""

    sizes: tuple[Reaches, ...]

    def reason(self, state: WindowState) -> str | None:
        """The reasons joined with ``" and "`` when all are reached, else ``None``."""
        reasons = [size.reason(state) for size in self.sizes]
        if any(reason is None for reason in reasons):
            return None
        return " and ".join(str(reason) for reason in reasons)


def _checked_size(value: object, name: str) -> tuple[str, float]:
    """One ``(unit, number)`` pair, checked."""
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or value[0] not in _UNITS
        or isinstance(value[1], bool)
        or not isinstance(value[1], (int, float))
    ):
        raise ConfigurationError(
            f'{name} sizes are ("messages", n), ("tokens", n) or ("fraction", f), got {value!r}'
        )
    unit, number = value
    if unit == "fraction":
        if not 0 < number <= 1:
            raise ConfigurationError(f"{name} fraction must be in (0, 1], got {number!r}")
    elif not isinstance(number, int) or number < 1:
        raise ConfigurationError(f"{name} {unit} must be a positive integer, got {number!r}")
    return unit, number


def _alternatives(trigger: object, *, nested: bool = False) -> list[list[tuple[str, float]]]:
    """The trigger as alternatives (any one) of sizes (all of them), checked."""
    if isinstance(trigger, Mapping):
        if not trigger:
            raise ConfigurationError("a trigger dict needs at least one size")
        return [[_checked_size((unit, number), "trigger") for unit, number in trigger.items()]]
    if isinstance(trigger, tuple):
        return [[_checked_size(trigger, "trigger")]]
    if isinstance(trigger, list) and trigger and not nested:
        return [sizes for item in trigger for sizes in _alternatives(item, nested=True)]
    raise ConfigurationError(
        'trigger must be a size such as ("messages", 50), ("tokens", 4000) or ("fraction", 0.8), '
        "a dict of sizes that must all be reached, or a non-empty list of those (lists do not "
        f"nest); got {trigger!r}"
    )


def needs_context_size(trigger: object, keep: object, ceiling: object = None) -> bool:
    """Whether ``trigger``, ``keep`` or ``ceiling`` (a size, or ``None``) holds a fraction,
    which needs the context size.

    Raises:
        ConfigurationError: One is malformed, naming it.
    """
    sizes = [size for sizes in _alternatives(trigger) for size in sizes]
    sizes.append(_checked_size(keep, "keep"))
    if ceiling is not None:
        sizes.append(_checked_size(ceiling, "ceiling"))
    return any(unit == "fraction" for unit, _ in sizes)


def _absolute(unit: str, number: float, context_size: int | None) -> tuple[str, int]:
    if unit != "fraction":
        return unit, int(number)
    if context_size is None:
        raise ConfigurationError("a fraction needs the model's context size")
    return "tokens", max(1, int(context_size * number))


def trigger_policy(trigger: object, context_size: int | None = None) -> Trigger:
    """The slimcache trigger for ``trigger`` (``context_size`` turns fractions into tokens).

    Raises:
        ConfigurationError: ``trigger`` is malformed, or holds a fraction and no context size
            is given.
    """
    options: list[Trigger] = []
    for sizes in _alternatives(trigger):
        reached = tuple(
            Reaches(unit, limit)  # type: ignore[arg-type]
            for unit, limit in (_absolute(unit, number, context_size) for unit, number in sizes)
        )
        options.append(reached[0] if len(reached) == 1 else AllReached(reached))
    return options[0] if len(options) == 1 else AnyOf(*options)


def keep_policy(keep: object, trigger: Trigger, context_size: int | None = None) -> Keep:
    """The slimcache keep policy for ``keep``, checked against ``trigger``.

    Raises:
        ConfigurationError: ``keep`` is malformed, or keeping it would reach a trigger of the
            same unit at once (every request would summarize).
    """
    unit, limit = _absolute(*_checked_size(keep, "keep"), context_size)
    options = trigger.triggers if isinstance(trigger, AnyOf) else (trigger,)
    for option in options:
        if isinstance(option, Reaches) and option.unit == unit and limit >= option.limit:
            raise ConfigurationError(
                f"keep ({unit!r}, {limit}) must be below the trigger ({unit!r}, {option.limit}): "
                "what is kept would reach the trigger again at once"
            )
    return KeepMessages(limit) if unit == "messages" else KeepTokens(limit)


def ceiling_policy(ceiling: object, trigger: Trigger, context_size: int | None = None) -> Trigger:
    """The slimcache ceiling of a background refresh for a size (``("messages", 80)``, ...),
    checked against ``trigger``: it bounds every message sent, the leading system messages and
    the summary included.

    Raises:
        ConfigurationError: The size is malformed, or at or below a trigger of the same unit
            (every request the trigger fires on would reach it, and wait).
    """
    unit, limit = _absolute(*_checked_size(ceiling, "ceiling"), context_size)
    for option in trigger.triggers if isinstance(trigger, AnyOf) else (trigger,):
        if isinstance(option, Reaches) and option.unit == unit and limit <= option.limit:
            raise ConfigurationError(
                f"ceiling {ceiling!r} must be above the trigger's {option.limit} {unit}: every "
                "request the trigger fires on would reach it, and wait"
            )
    return Reaches(unit, limit)  # type: ignore[arg-type]
