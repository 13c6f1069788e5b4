"""The settings of :class:`~slimcache.pydantic_ai.CachedSummarization`: every agent
integration's, and ``on_truncated``.

Pydantic AI is not imported here, so the settings are documented and typed without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slimcache.core.truncation import OnTruncated, check_on_truncated
from slimcache.frameworks.settings import AgentOptions, AgentSettings

__all__ = ["PydanticAIOptions", "PydanticAISettings"]


class PydanticAIOptions(AgentOptions, total=False):
    """The keyword arguments of :class:`~slimcache.pydantic_ai.CachedSummarization` after its
    own, each with the type of the :class:`PydanticAISettings` attribute it sets."""

    on_truncated: OnTruncated


@dataclass(frozen=True)
class PydanticAISettings(AgentSettings):
    """The settings of :class:`~slimcache.pydantic_ai.CachedSummarization`: those of every
    agent integration (:class:`~slimcache.frameworks.settings.AgentSettings`), and one of its
    own.

    Attributes:
        on_truncated: When ``model`` is a Pydantic AI model or a model name: a reply still cut
            at the budget after asking for a shorter one is kept with a warning (``"accept"``,
            default; ``stats.truncated_accepted`` counts it) or is a summarizer failure
            (``"raise"``). A slimcache summarizer given as ``model`` has its own.

    Raises:
        ConfigurationError: A setting it checks is not one of its choices.
    """

    on_truncated: OnTruncated = "accept"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_on_truncated(self.on_truncated)
