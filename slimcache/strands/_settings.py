"""The settings of the Strands conversation manager: every agent integration's, and Strands'
``summary_ratio`` and ``preserve_recent_messages``.

Strands is not imported here, so the settings are documented and typed without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slimcache._exceptions import ConfigurationError
from slimcache.frameworks.settings import (
    DEFAULT_KEEP,
    DEFAULT_TRIGGER,
    AgentOptions,
    AgentSettings,
    SummaryPlacement,
)

__all__ = ["StrandsOptions", "StrandsSettings"]


class StrandsOptions(AgentOptions, total=False):
    """The keyword arguments of
    :class:`~slimcache.strands.CachedSummarizingConversationManager` after its own, each with
    the type of the :class:`StrandsSettings` attribute it sets."""

    summary_ratio: float
    preserve_recent_messages: int


@dataclass(frozen=True)
class StrandsSettings(AgentSettings):
    """The settings of :class:`~slimcache.strands.CachedSummarizingConversationManager`: those
    of every agent integration (:class:`~slimcache.frameworks.settings.AgentSettings`) that
    apply to it, and Strands' own two, with the meaning ``SummarizingConversationManager``
    gives them.

    Strands decides when the history is reduced (a context window overflow, or
    ``proactive_compression``) and how much of it goes: so ``trigger``, ``keep``, ``ceiling``
    and ``refresh="background"`` are not taken (``trigger`` and ``keep`` keep their defaults,
    which nothing reads), and the summary is a user message, as Strands' own
    (``summary_placement="user"``).

    Attributes:
        summary_ratio: The share of the agent's messages summarized at each reduction, from
            0.1 to 0.8 (default 0.3).
        preserve_recent_messages: How many of the latest messages are never summarized
            (default 10).

    Raises:
        ConfigurationError: ``summary_ratio`` or ``preserve_recent_messages`` is out of its
            range, or a setting that Strands decides is given (and as
            :class:`~slimcache.frameworks.settings.AgentSettings` raises).
    """

    summary_placement: SummaryPlacement = "user"
    summary_ratio: float = 0.3
    preserve_recent_messages: int = 10

    def __post_init__(self) -> None:
        ratio = self.summary_ratio
        if (
            isinstance(ratio, bool)
            or not isinstance(ratio, (int, float))
            or not 0.1 <= ratio <= 0.8
        ):
            raise ConfigurationError(f"summary_ratio must be from 0.1 to 0.8, got {ratio!r}")
        kept = self.preserve_recent_messages
        if isinstance(kept, bool) or not isinstance(kept, int) or kept < 0:
            raise ConfigurationError(
                f"preserve_recent_messages must be a number of messages (0 or more), got {kept!r}"
            )
        decided = "Strands decides when the history is reduced and how much goes"
        if self.trigger != DEFAULT_TRIGGER:
            raise ConfigurationError(
                f"trigger is not taken: {decided}; pass proactive_compression= to reduce it "
                "before the context window fills"
            )
        if self.keep != DEFAULT_KEEP:
            raise ConfigurationError(
                f"keep is not taken: {decided}; preserve_recent_messages= and summary_ratio= say "
                "how much stays"
            )
        if self.ceiling is not None or self.compressor.get("refresh") == "background":
            raise ConfigurationError(
                f'ceiling and refresh="background" are not taken: {decided}, and a reduction '
                "that Strands asks for must be done when it returns"
            )
        if self.summary_placement != "user":
            raise ConfigurationError(
                "summary_placement must be 'user': a Strands agent's messages hold no system "
                f"messages, so the summary is a user message; got {self.summary_placement!r}"
            )
        super().__post_init__()
