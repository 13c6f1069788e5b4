"""When to compress (triggers) and how much to keep verbatim (keep policies).

A trigger fires when the verbatim window grows past a threshold; the compressor then summarizes
the oldest messages until the window is down to what the keep policy allows. The gap between
the two (hysteresis) makes summarization happen in batches rather than on every turn.

Hysteresis holds for every combination, mixed units included: when the keep policy counts
another unit than a trigger (``MessageThreshold`` with ``KeepTokens``, say), compressing also
brings the window down to half that trigger's threshold (its ``settled`` rule), so the next
compression is at least half a threshold away. ``KeepMessages(n)`` is a floor all the same:
it never leaves fewer than ``n`` messages verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from slimcache._exceptions import ConfigurationError
from slimcache.stores.protocol import positive_int

__all__ = [
    "BUILT_IN_KEEPS",
    "BUILT_IN_TRIGGERS",
    "AnyOf",
    "ContextWindow",
    "EvictableTokens",
    "Keep",
    "KeepMessages",
    "KeepTokens",
    "KeepWithin",
    "Manual",
    "MessageThreshold",
    "TokenThreshold",
    "Trigger",
    "WindowState",
    "built_in_name",
    "check_hysteresis",
    "is_settled",
]


@dataclass(frozen=True)
class WindowState:
    """What a trigger looks at.

    Attributes:
        messages: Messages in the verbatim window (after the summary, pinned ones excluded).
        tokens: Tokens of those messages.
        pinned_tokens: Tokens of the pinned system messages.
        summary_tokens: Tokens of the current summary message (0 when there is none).
        evictable_messages: Messages outside the keep target: what compressing would summarize.
        evictable_tokens: Tokens of those messages.
    """

    messages: int
    tokens: int
    pinned_tokens: int
    summary_tokens: int
    evictable_messages: int = 0
    evictable_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Tokens of the whole compressed prompt: pinned, summary and window."""
        return self.pinned_tokens + self.summary_tokens + self.tokens


@runtime_checkable
class Trigger(Protocol):
    """Decides whether the window must be compressed."""

    def reason(self, state: WindowState) -> str | None:
        """Return why compression is due (e.g. ``"messages>40"``), or ``None`` if it is not."""
        ...


@dataclass(frozen=True)
class MessageThreshold:
    """Compress when the verbatim window holds more than ``messages`` messages."""

    messages: int

    def __post_init__(self) -> None:
        positive_int("MessageThreshold.messages", self.messages)

    def reason(self, state: WindowState) -> str | None:
        """Fire when the window's message count exceeds the threshold."""
        return f"messages>{self.messages}" if state.messages > self.messages else None

    def settled(self, state: WindowState, keep: Keep) -> bool:
        """After compressing: kept to ``KeepMessages`` or ``KeepWithin``, or at most half the
        threshold."""
        return isinstance(keep, (KeepMessages, KeepWithin)) or state.messages <= self.messages // 2


@dataclass(frozen=True)
class TokenThreshold:
    """Compress when the verbatim window holds more than ``tokens`` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        positive_int("TokenThreshold.tokens", self.tokens)

    def reason(self, state: WindowState) -> str | None:
        """Fire when the window's token count exceeds the threshold."""
        return f"tokens>{self.tokens}" if state.tokens > self.tokens else None

    def settled(self, state: WindowState, keep: Keep) -> bool:
        """After compressing: kept to ``KeepTokens`` or ``KeepWithin``, or at most half the
        threshold."""
        return isinstance(keep, (KeepTokens, KeepWithin)) or state.tokens <= self.tokens // 2


@dataclass(frozen=True)
class EvictableTokens:
    """Compress when the messages outside the keep target reach ``tokens`` tokens.

    Unlike :class:`TokenThreshold`, the messages that stay verbatim do not count, so every
    compression summarizes a batch of at least ``tokens`` tokens whatever the keep policy:
    ``EvictableTokens(2000)`` with ``KeepMessages(12)`` keeps a strict 12-message window and
    calls the summarizer once per 2,000 tokens that leave it.
    """

    tokens: int

    def __post_init__(self) -> None:
        positive_int("EvictableTokens.tokens", self.tokens)

    def reason(self, state: WindowState) -> str | None:
        """Fire when the tokens outside the keep target reach the threshold."""
        return f"evictable>={self.tokens}" if state.evictable_tokens >= self.tokens else None

    def settled(self, state: WindowState, keep: Keep) -> bool:
        """Compressing to the keep target leaves nothing evictable."""
        return True


@dataclass(frozen=True)
class ContextWindow:
    """Compress when the whole prompt passes a fraction of the model's context window.

    The whole prompt is the pinned system messages, the summary and the verbatim window.

    Args:
        max_tokens: The model's context window, in tokens.
        fraction: Compress above ``fraction * max_tokens`` (0 < fraction <= 1).
    """

    max_tokens: int
    fraction: float = 0.8

    def __post_init__(self) -> None:
        positive_int("ContextWindow.max_tokens", self.max_tokens)
        if isinstance(self.fraction, bool) or not 0 < self.fraction <= 1:
            raise ConfigurationError(
                f"ContextWindow.fraction must be in (0, 1], got {self.fraction!r}"
            )

    @property
    def limit(self) -> int:
        """The token count above which compression is due."""
        return int(self.max_tokens * self.fraction)

    def reason(self, state: WindowState) -> str | None:
        """Fire when pinned + summary + window tokens exceed the limit."""
        return f"context>{self.limit}" if state.total_tokens > self.limit else None

    def settled(self, state: WindowState, keep: Keep) -> bool:
        """After compressing: the whole prompt at most half the limit."""
        return state.total_tokens <= self.limit // 2


class AnyOf:
    """Compress when any of the given triggers fires (e.g. messages *or* tokens)."""

    def __init__(self, *triggers: Trigger) -> None:
        if not triggers:
            raise ConfigurationError("AnyOf needs at least one trigger")
        for trigger in triggers:
            if not isinstance(trigger, Trigger):
                raise ConfigurationError(f"AnyOf takes triggers, got {type(trigger).__name__}")
        self.triggers = triggers

    def reason(self, state: WindowState) -> str | None:
        """Return the first reason any trigger gives."""
        for trigger in self.triggers:
            found = trigger.reason(state)
            if found is not None:
                return found
        return None

    def settled(self, state: WindowState, keep: Keep) -> bool:
        """Every trigger is settled."""
        return all(is_settled(trigger, state, keep) for trigger in self.triggers)

    def __repr__(self) -> str:
        return f"AnyOf({', '.join(map(repr, self.triggers))})"


@dataclass(frozen=True)
class Manual:
    """Never compress on its own; only ``compress(..., force=True)`` does."""

    def reason(self, state: WindowState) -> str | None:
        """Never fire."""
        return None


@runtime_checkable
class Keep(Protocol):
    """How much of the conversation's end stays verbatim after a compression."""

    def satisfied(self, messages: int, tokens: int) -> bool:
        """Whether a window of this size may stay as it is."""
        ...


@dataclass(frozen=True)
class KeepMessages:
    """Keep the last ``messages`` messages verbatim (more if a tool-call group would split)."""

    messages: int

    def __post_init__(self) -> None:
        positive_int("KeepMessages.messages", self.messages)

    def satisfied(self, messages: int, tokens: int) -> bool:
        """True when the window has at most ``messages`` messages."""
        return messages <= self.messages


@dataclass(frozen=True)
class KeepTokens:
    """Keep the last ``tokens`` tokens verbatim (always at least the last message group)."""

    tokens: int

    def __post_init__(self) -> None:
        positive_int("KeepTokens.tokens", self.tokens)

    def satisfied(self, messages: int, tokens: int) -> bool:
        """True when the window has at most ``tokens`` tokens."""
        return tokens <= self.tokens


@dataclass(frozen=True)
class KeepWithin:
    """Keep at most ``messages`` messages *and* at most ``tokens`` tokens verbatim.

    For a trigger on both counts (``AnyOf(MessageThreshold(20), TokenThreshold(4000))``):
    with ``KeepWithin(messages=12, tokens=2000)`` every compression leaves a window under both
    limits, as convo-compress's combined trigger does, where ``KeepMessages(12)`` would keep
    twelve large messages whatever their tokens. The last message group always stays.
    """

    messages: int
    tokens: int

    def __post_init__(self) -> None:
        positive_int("KeepWithin.messages", self.messages)
        positive_int("KeepWithin.tokens", self.tokens)

    def satisfied(self, messages: int, tokens: int) -> bool:
        """True when the window has at most ``messages`` messages and ``tokens`` tokens."""
        return messages <= self.messages and tokens <= self.tokens


BUILT_IN_TRIGGERS: dict[str, type[Trigger]] = {
    "messages": MessageThreshold,
    "tokens": TokenThreshold,
    "evictable_tokens": EvictableTokens,
    "context_window": ContextWindow,
    "manual": Manual,
    "any_of": AnyOf,
}
"""The built-in triggers, by the name a compressor's snapshot records each under. Each one's
settings are its dataclass fields, but :class:`AnyOf`'s, which are its triggers."""

BUILT_IN_KEEPS: dict[str, type[Keep]] = {
    "messages": KeepMessages,
    "tokens": KeepTokens,
    "within": KeepWithin,
}
"""The built-in keep policies, by the name a compressor's snapshot records each under; each
one's settings are its dataclass fields."""


def built_in_name(policy: object, registry: Mapping[str, type]) -> str | None:
    """The name ``policy``'s class has in ``registry``; ``None`` for a class of the caller's
    own, a subclass of a built-in one included."""
    for name, kind in registry.items():
        if type(policy) is kind:
            return name
    return None


def is_settled(trigger: Trigger, state: WindowState, keep: Keep) -> bool:
    """Whether a window just compressed is far enough below ``trigger`` to stop evicting.

    A trigger may define ``settled(state, keep)``; one that does not is settled once the keep
    policy is (the compressor checks that first).
    """
    settled = getattr(trigger, "settled", None)
    return True if settled is None else bool(settled(state, keep))


def check_hysteresis(trigger: Trigger, keep: Keep) -> None:
    """Reject a keep target that is not below the trigger threshold of the same unit.

    Raises:
        ConfigurationError: When compression would fire again on the very next message.
    """
    triggers = trigger.triggers if isinstance(trigger, AnyOf) else (trigger,)
    kept_messages = keep.messages if isinstance(keep, (KeepMessages, KeepWithin)) else None
    kept_tokens = keep.tokens if isinstance(keep, (KeepTokens, KeepWithin)) else None
    for item in triggers:
        if (
            isinstance(item, MessageThreshold)
            and kept_messages is not None
            and kept_messages >= item.messages
        ):
            shown = _kept(keep, "messages", kept_messages)
            raise ConfigurationError(f"{shown} must be below MessageThreshold({item.messages})")
        if (
            isinstance(item, TokenThreshold)
            and kept_tokens is not None
            and kept_tokens >= item.tokens
        ):
            shown = _kept(keep, "tokens", kept_tokens)
            raise ConfigurationError(f"{shown} must be below TokenThreshold({item.tokens})")


def _kept(keep: Keep, unit: str, count: int) -> str:
    """``KeepMessages(12)``, or ``KeepWithin(messages=12)``: the part of ``keep`` at fault."""
    return (
        f"KeepWithin({unit}={count})"
        if isinstance(keep, KeepWithin)
        else f"{type(keep).__name__}({count})"
    )
