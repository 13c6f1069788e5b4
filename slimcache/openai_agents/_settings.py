"""The settings of the Agents SDK filter and session: every agent integration's, and
``context_window``.

The Agents SDK is not imported here, so the settings are documented and typed without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slimcache._exceptions import ConfigurationError
from slimcache.frameworks.settings import AgentOptions, AgentSettings
from slimcache.frameworks.sizes import needs_context_size

__all__ = ["OpenAIAgentsOptions", "OpenAIAgentsSettings"]


class OpenAIAgentsOptions(AgentOptions, total=False):
    """The keyword arguments of :class:`~slimcache.openai_agents.CachedSummarizationFilter` and
    :class:`~slimcache.openai_agents.CachedSummarySession` after their own, each with the type
    of the :class:`OpenAIAgentsSettings` attribute it sets."""

    context_window: int | None


@dataclass(frozen=True)
class OpenAIAgentsSettings(AgentSettings):
    """The settings of :class:`~slimcache.openai_agents.CachedSummarizationFilter` and
    :class:`~slimcache.openai_agents.CachedSummarySession`: those of every agent integration
    (:class:`~slimcache.frameworks.settings.AgentSettings`), and one of their own.

    Attributes:
        context_window: The model's context window in tokens, which a fraction in ``trigger``,
            ``keep`` or ``ceiling`` is of (the SDK's models do not tell it).

    Raises:
        ConfigurationError: ``context_window`` is not a positive integer, or is not given and
            a size is a fraction (and as :class:`~slimcache.frameworks.settings.AgentSettings`
            raises).
    """

    context_window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        window = self.context_window
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window < 1
        ):
            raise ConfigurationError(
                f"context_window must be a positive number of tokens, got {window!r}"
            )
        if window is None and needs_context_size(self.trigger, self.keep, self.ceiling):
            raise ConfigurationError(
                "a fraction in trigger, keep or ceiling needs the model's context size: pass "
                "context_window=, or use ('tokens', n) or ('messages', n)"
            )
