"""How a cached summary and newly evicted messages combine into the next summary.

A strategy gets the previous summary (or ``None``), the new messages, and a ``summarize``
function that calls the user's summarizer for one task (counting its tokens, applying its
timeout). Each strategy's ``name`` is recorded in the entries it makes, so a change of strategy
is recognised on the next request.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, Union, runtime_checkable

from slimcache._exceptions import ConfigurationError, SummarizerError
from slimcache.core.summarizer import Task, summarizer_name
from slimcache.core.tree import Tree
from slimcache.messages import Message, TokenCounter
from slimcache.stores.protocol import positive_int

__all__ = [
    "STRATEGY_NAMES",
    "WEIGHTED_EMPHASIS",
    "Concat",
    "Custom",
    "Extend",
    "Hybrid",
    "MergeFunction",
    "Replace",
    "Strategy",
    "StrategyName",
    "SummarizeFn",
    "Tree",
    "Weighted",
    "builds_on",
    "resolve_strategy",
    "sends_previous",
]

MergeFunction = Callable[[Union[str, None], str], Union[Awaitable[str], str]]  # noqa: UP007
"""For :class:`Custom`: ``(previous_summary or None, summary_of_new_messages) -> merged``."""


class SummarizeFn(Protocol):
    """Calls the summarizer for one task: ``(task, messages, previous_summary) -> summary``.

    ``emphasis``, when given, is one more sentence appended to the task's prompt;
    ``max_tokens``, when given, is this call's budget, below the compressor's
    ``max_summary_tokens`` (the ``tree`` strategy gives each part its share); ``first``, when
    given, is the index in the history of ``messages[0]``, for messages that begin before the
    step's new ones (a ``tree`` merge that reads its range's original messages).
    """

    def __call__(
        self,
        task: Task,
        messages: Sequence[Message],
        previous: str | None,
        *,
        emphasis: str | None = None,
        max_tokens: int | None = None,
        first: int | None = None,
    ) -> Awaitable[str]: ...


@runtime_checkable
class Strategy(Protocol):
    """Combines the previous summary with new messages.

    A strategy may also say, with a class attribute ``sends_previous = False``, that it never
    sends the previous summary along with new messages; ``max_input_tokens`` then leaves no room
    for it (see :func:`sends_previous`).

    Attributes:
        name: Identifies the strategy (and its settings) in cached entries.
    """

    @property
    def name(self) -> str:
        """Identifies the strategy and its settings in cached entries."""
        ...

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Return the summary covering the previous summary and ``new``.

        Args:
            previous: The cached summary being extended, or ``None`` when starting over.
            new: The messages to fold in.
            summarize: Calls the summarizer for one task.
            count: The compressor's token counter.
            max_tokens: The compressor's summary budget.
        """
        ...


@dataclass(frozen=True)
class Extend:
    """One call given the previous summary and only the new messages (the default)."""

    name: str = field(default="extend", init=False)
    sends_previous: ClassVar[bool] = True

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Ask the summarizer to extend ``previous`` (or to summarize, without one)."""
        return await summarize("extend" if previous is not None else "summarize", new, previous)


WEIGHTED_EMPHASIS = (
    "Weight the newer messages above the summary so far: keep their details in full, and "
    "shorten older points to what still matters for them."
)


@dataclass(frozen=True)
class Weighted:
    """Like :class:`Extend`, one call, asking the summarizer to weight recent content more.

    convo-compress's ``weighted`` merge: the extend prompt gets one more sentence
    (:data:`WEIGHTED_EMPHASIS`) telling the model to keep the newer messages in detail and cut
    older points down to what still matters.
    """

    name: str = field(default="weighted", init=False)

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Ask the summarizer to extend ``previous`` with the emphasis on ``new``."""
        if previous is None:
            return await summarize("summarize", new, None)
        return await summarize("extend", new, previous, emphasis=WEIGHTED_EMPHASIS)


@dataclass(frozen=True)
class Concat:
    """Summarize only the new messages and append that to the previous summary."""

    name: str = field(default="concat", init=False)
    sends_previous: ClassVar[bool] = False

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Append a summary of ``new`` to ``previous``."""
        part = await summarize("summarize", new, None)
        return part if previous is None else f"{previous}\n\n{part}"


@dataclass(frozen=True)
class Hybrid:
    """Concatenate until the summary passes ``max_tokens``, then one call condenses it.

    Args:
        max_tokens: The budget; ``None`` uses the compressor's ``max_summary_tokens``.
    """

    max_tokens: int | None = None
    # The new messages go without the previous summary; only a condense call sends a summary.
    sends_previous: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.max_tokens is not None:
            positive_int("Hybrid.max_tokens", self.max_tokens)

    @property
    def name(self) -> str:
        """``hybrid`` plus the budget when one is set."""
        return "hybrid" if self.max_tokens is None else f"hybrid:{self.max_tokens}"

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Concatenate, and condense once the result exceeds the budget."""
        summary = await Concat().combine(
            previous, new, summarize, count=count, max_tokens=max_tokens
        )
        budget = self.max_tokens if self.max_tokens is not None else max_tokens
        if previous is not None and count(summary) > budget:
            summary = await summarize("condense", [], summary)
        return summary


@dataclass(frozen=True)
class Replace:
    """The summary of the new messages replaces the previous one."""

    name: str = field(default="replace", init=False)
    sends_previous: ClassVar[bool] = False

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Summarize ``new`` alone."""
        return await summarize("summarize", new, None)


class Custom:
    """Summarize the new messages, then your ``merge(previous, part)`` combines the two.

    Args:
        merge: ``(previous_summary or None, summary_of_new_messages) -> merged``, sync or async.
        name: Identifies the merge in cached entries (default: its qualified name).
    """

    sends_previous: ClassVar[bool] = False

    def __init__(self, merge: MergeFunction, *, name: str | None = None) -> None:
        if not callable(merge):
            raise ConfigurationError("Custom needs a merge function (previous, part) -> str")
        self.merge = merge
        self._name = f"custom:{name or summarizer_name(merge)}"

    @property
    def name(self) -> str:
        """``custom:`` plus the merge function's name."""
        return self._name

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: SummarizeFn,
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Summarize ``new``, then merge it into ``previous``."""
        part = await summarize("summarize", new, None)
        try:
            merged: Any = self.merge(previous, part)
            if inspect.isawaitable(merged):
                merged = await merged
        except Exception as exc:
            raise SummarizerError(f"merge function failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(merged, str) or not merged.strip():
            raise SummarizerError("merge function returned an empty or non-string summary")
        return merged

    def __repr__(self) -> str:
        return f"Custom({self.merge!r})"


StrategyName = Literal[
    "extend", "tree", "concat", "hybrid", "replace", "weighted", "summarize", "append"
]
"""The strategies that have a string shortcut; ``summarize`` and ``append`` are convo-compress's
names of ``extend`` and ``concat``."""

_SHORTCUTS: dict[str, Callable[[], Strategy]] = {
    "extend": Extend,
    "tree": Tree,
    "concat": Concat,
    "hybrid": Hybrid,
    "replace": Replace,
    "weighted": Weighted,
    # convo-compress's names
    "summarize": Extend,
    "append": Concat,
}
STRATEGY_NAMES: tuple[str, ...] = tuple(_SHORTCUTS)


def builds_on(strategy: Strategy) -> tuple[str, ...]:
    """The other strategies whose entries ``strategy`` serves and extends as its own.

    A strategy says so with a ``builds_on`` tuple of names (``tree`` builds on ``extend``'s
    summaries, each one part of its forest); by default, none.
    """
    said = getattr(strategy, "builds_on", ())
    return tuple(n for n in said if isinstance(n, str)) if isinstance(said, tuple) else ()


def sends_previous(strategy: Strategy) -> bool:
    """Whether ``strategy`` sends the previous summary along with the new messages.

    A strategy says so with a boolean ``sends_previous`` attribute (the built-in ones do); one
    that does not is taken to send it, so that ``max_input_tokens`` counts it.
    """
    said = getattr(strategy, "sends_previous", True)
    return said if isinstance(said, bool) else True


def resolve_strategy(strategy: Strategy | str) -> Strategy:
    """Return the strategy object for ``strategy`` (an object, or a shortcut name).

    Raises:
        ConfigurationError: An unknown name, or an object that is not a strategy.
    """
    if isinstance(strategy, str):
        make = _SHORTCUTS.get(strategy)
        if strategy == "custom":
            raise ConfigurationError("strategy 'custom' needs a merge function: pass Custom(merge)")
        if make is None:
            raise ConfigurationError(
                f"strategy must be one of {', '.join(STRATEGY_NAMES)} or a strategy object "
                f"(Extend(), Tree(), Concat(), Hybrid(n), Replace(), Weighted(), Custom(merge)), "
                f"got {strategy!r}"
            )
        return make()
    if not isinstance(strategy, Strategy) or not isinstance(getattr(strategy, "name", None), str):
        raise ConfigurationError(
            f"strategy must have a string name and an async combine(), got {strategy!r}"
        )
    return strategy
