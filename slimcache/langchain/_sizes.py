"""LangChain's ``trigger`` and ``keep`` sizes, read as slimcache triggers and keep policies.

LangChain's ``SummarizationMiddleware`` takes ``("messages", 50)``, ``("tokens", 4000)`` and
``("fraction", 0.8)`` (of the model's context window), a dict of those that must all hold, and a
list of either of which any may hold. Here they mean the same for what the model is about to
see: the verbatim messages, and the tokens of the whole conversation sent (leading system
messages, the summary and the verbatim messages).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Union, get_args

from slimcache._exceptions import ConfigurationError
from slimcache.core.policy import AnyOf, Keep, KeepMessages, KeepTokens, Trigger, WindowState

__all__ = [
    "ContextSize",
    "Reaches",
    "TriggerSpec",
    "ceiling_from",
    "ceiling_needs_context_size",
    "keep_from",
    "needs_context_size",
    "trigger_from",
]

SizeKind = Literal["messages", "tokens", "fraction"]
"""The units of a context size."""

ContextSize = tuple[SizeKind, Union[int, float]]  # noqa: UP007
"""``("messages", 50)``, ``("tokens", 4000)`` or ``("fraction", 0.8)``, as LangChain writes them."""

TriggerSpec = Union[  # noqa: UP007
    ContextSize,
    Mapping[str, int | float],
    Sequence[Union[ContextSize, Mapping[str, Union[int, float]]]],  # noqa: UP007
]
"""One size, a dict of sizes that must all be reached, or a list of either (any one reached)."""

_KINDS: tuple[str, ...] = get_args(SizeKind)


@dataclass(frozen=True)
class Reaches:
    """Fires when the verbatim messages, or all the tokens sent, reach ``limit``.

    Whatever it fires on, the keep policy alone says how much stays, as in LangChain.
    """

    unit: Literal["messages", "tokens"]
    limit: int

    def reason(self, state: WindowState) -> str | None:
        """``"messages>=50"`` or ``"tokens>=4000"`` when reached, else ``None``."""
        count = state.messages if self.unit == "messages" else state.total_tokens
        return f"{self.unit}>={self.limit}" if count >= self.limit else None


@dataclass(frozen=True)
class AllOf:
    """Fires when every one of its triggers does (a LangChain trigger dict)."""

    triggers: tuple[Reaches, ...]

    def reason(self, state: WindowState) -> str | None:
        """The reasons joined with ``" and "`` when all fire, else ``None``."""
        reasons = [trigger.reason(state) for trigger in self.triggers]
        if any(reason is None for reason in reasons):
            return None
        return " and ".join(reason for reason in reasons if reason is not None)


def _size(value: object, name: str) -> tuple[str, float]:
    """Check one ``(kind, number)`` pair."""
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or value[0] not in _KINDS
        or isinstance(value[1], bool)
        or not isinstance(value[1], (int, float))
    ):
        raise ConfigurationError(
            f'{name} sizes are ("messages", n), ("tokens", n) or ("fraction", f), got {value!r}'
        )
    kind, number = value
    if kind == "fraction":
        if not 0 < number <= 1:
            raise ConfigurationError(f"{name} fraction must be in (0, 1], got {number!r}")
    elif not isinstance(number, int) or number < 1:
        raise ConfigurationError(f"{name} {kind} must be a positive integer, got {number!r}")
    return kind, number


def _clauses(trigger: object) -> list[list[tuple[str, float]]]:
    """The trigger as clauses (any of) of sizes (all of), checked."""
    if isinstance(trigger, Mapping):
        if not trigger:
            raise ConfigurationError("a trigger dict needs at least one size")
        return [[_size((kind, number), "trigger") for kind, number in trigger.items()]]
    if isinstance(trigger, tuple):
        return [[_size(trigger, "trigger")]]
    if isinstance(trigger, list) and trigger:
        return [clause for item in trigger for clause in _clauses_of_item(item)]
    raise ConfigurationError(
        'trigger must be a size such as ("messages", 50), ("tokens", 4000) or ("fraction", 0.8), '
        f"a dict of sizes that must all be reached, or a non-empty list of those; got {trigger!r}"
    )


def _clauses_of_item(item: object) -> list[list[tuple[str, float]]]:
    if isinstance(item, list):
        raise ConfigurationError(f"trigger lists do not nest, got {item!r}")
    return _clauses(item)


def needs_context_size(trigger: object, keep: object) -> bool:
    """Whether a fraction is used, so the model's context size is needed."""
    sizes = [size for clause in _clauses(trigger) for size in clause]
    return any(kind == "fraction" for kind, _ in [*sizes, _size(keep, "keep")])


def _limit(kind: str, number: float, context_size: int | None) -> tuple[str, int]:
    if kind != "fraction":
        return kind, int(number)
    assert context_size is not None
    return "tokens", max(1, int(context_size * number))


def trigger_from(trigger: object, context_size: int | None) -> Trigger:
    """The slimcache trigger for a LangChain ``trigger`` (``context_size`` for fractions)."""
    options: list[Trigger] = []
    for clause in _clauses(trigger):
        reaches = tuple(
            Reaches(unit, limit)  # type: ignore[arg-type]
            for unit, limit in (_limit(kind, number, context_size) for kind, number in clause)
        )
        options.append(reaches[0] if len(reaches) == 1 else AllOf(reaches))
    return options[0] if len(options) == 1 else AnyOf(*options)


def keep_from(keep: object, trigger: Trigger, context_size: int | None) -> Keep:
    """The slimcache keep policy for a LangChain ``keep``, checked against the trigger.

    Raises:
        ConfigurationError: The size is malformed, or keeping it would reach a trigger of the
            same unit again at once (every request would summarize).
    """
    kind, number = _size(keep, "keep")
    unit, limit = _limit(kind, number, context_size)
    policy: Keep = KeepMessages(limit) if unit == "messages" else KeepTokens(limit)
    options = trigger.triggers if isinstance(trigger, AnyOf) else (trigger,)
    for option in options:
        if isinstance(option, Reaches) and option.unit == unit and limit >= option.limit:
            raise ConfigurationError(
                f"keep ({unit!r}, {limit}) must be below the trigger ({unit!r}, {option.limit}): "
                "what is kept would reach the trigger again at once"
            )
    return policy


def ceiling_from(ceiling: object, trigger: Trigger, context_size: int | None) -> Reaches:
    """The slimcache ceiling for a size (``("messages", 80)``, ...), checked against the trigger.

    Raises:
        ConfigurationError: The size is malformed, or at or below a trigger of the same unit
            (every request the trigger fires on would reach it, and wait).
    """
    kind, number = _size(ceiling, "ceiling")
    unit, limit = _limit(kind, number, context_size)
    for option in trigger.triggers if isinstance(trigger, AnyOf) else (trigger,):
        if isinstance(option, Reaches) and option.unit == unit and limit <= option.limit:
            raise ConfigurationError(
                f"ceiling {ceiling!r} must be above the trigger's {option.limit} {unit}: every "
                "request the trigger fires on would reach it, and wait"
            )
    return Reaches(unit, limit)  # type: ignore[arg-type]


def ceiling_needs_context_size(ceiling: object) -> bool:
    """Whether a ceiling is a fraction, so the model's context size is needed."""
    return ceiling is not None and _size(ceiling, "ceiling")[0] == "fraction"
