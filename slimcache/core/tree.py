"""The ``tree`` strategy: a range's summary as a forest of summaries merged like a binary counter.

A cached range ``first..end`` is served as one text, the summaries of its *parts* in order,
separated by a blank line. Each part covers consecutive messages and has a level: a
compaction's new messages become a part of level 0, unless the last parts complete a pair,
as a binary counter carries: the new messages are then summarized together with the parts they
merge with, in the same call, into one part a level higher. A fact therefore passes through a
logarithmic number of summarizer calls, not one per extension, and the tree makes exactly one
call per compaction, as ``extend`` does.

Each part is given its share of the budget at the call that makes it: the tokens it covers
over the tokens of the whole range plus one more compaction of the same size, so that every
part summarizes its messages about as densely as the others and room is left for the next
compaction. The first part alone has the whole budget: the next compaction merges it anyway
(the counter's carry), so a range summarized once is summarized as ``extend`` would. When the
parts kept and the new one would exceed :data:`CEILING` times the budget, the new part merges
the parts before it too, until they fit: the served summary stays within the budget (and the
slack the summarizer is allowed), whatever the number of compactions.

A merge reads the original messages of the range it covers, rather than the parts' summaries,
when they count at most :data:`ORIGINALS_WITHIN` times the budget (or
:data:`ORIGINALS_AT_LEAST` tokens, when that is more) and fit the bound on one call's input:
a stateless client resends the whole history, so the producer has them at hand
(:class:`Originals`), and a fact then goes through one summary less at each merge, the merge
reading the fact as stated. The producer hands them over only for a range whose cached part
matched the request's messages, so a merge never reads messages other than those its parts
summarized; past the bound, or for a part whose messages are not known (one an earlier version
wrote), the merge reads the parts' summaries.

The layout (each part's level, tokens covered and length in characters) is recorded in the
entry (:attr:`~slimcache.stores.entries.SummaryEntry.parts`), and the messages each part
covers beside it (:attr:`~slimcache.stores.entries.SummaryEntry.part_messages`, a key earlier
versions ignore); a summary with no layout (one ``extend`` wrote, or whose layout does not add
up to its text) is one part of its own.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from slimcache.messages import Message, TokenCounter, message_text

__all__ = [
    "CEILING",
    "ORIGINALS_AT_LEAST",
    "ORIGINALS_WITHIN",
    "SEPARATOR",
    "Forest",
    "Originals",
    "Part",
    "Tree",
]

SEPARATOR = "\n\n"
"""What joins the parts' summaries in the served text."""

CEILING = 1.1
"""The served parts together stay within this many times the budget (before the summarizer's
own slack): past it, a compaction merges earlier parts into its new one."""

ORIGINALS_WITHIN = 8
"""A merge reads the original messages of its range when they count at most this many times
the budget (and fit the bound on one call's input); past it, the parts' summaries.

It bounds what re-reading costs: each merge re-sends at most this many budgets of messages.
Where a compaction alone is several budgets (a 2,000-token trigger with a 400-token budget),
no merge re-reads and each message is sent once, as with ``extend``; where a compaction is
about one budget, the merges of the first several compactions read the facts as stated."""

ORIGINALS_AT_LEAST = 3000
"""A merge may read up to this many tokens of original messages whatever the budget (and the
bound on one call's input allows).

Eight budgets of a small summary are few messages: at 150 tokens, 1,200, less than a
conversation of twenty turns, so that past the first few compactions every merge would read
summaries of summaries, and an early fact pass through one call more at each level of the tree.
A call's time goes mostly on its reply, which the budget bounds, so reading 3,000 tokens makes
such a call little slower than reading 1,200; the tokens are paid for (``benchmarks/quality.py``
measures the input: at 150 tokens, within 1.3 times ``extend``'s). From a budget of 375 tokens
on, the eight budgets are the larger bound and this one changes nothing: each message is then
sent once with a 2,000-token trigger, as before."""

# A summary with no recorded layout: merged only to stay within the ceiling, never as a sibling.
_WHOLE = 64


@dataclass(frozen=True)
class Part:
    """One summary of the forest: its level, the tokens of the messages it covers, its text,
    and how many messages it covers (``None``: not known, as in a layout an earlier version
    recorded)."""

    level: int
    covered: int
    text: str
    messages: int | None = None


@dataclass(frozen=True)
class Originals:
    """The original messages of the range a forest and a step's new messages cover.

    Attributes:
        start: The index of the range's first message in the history.
        messages: The range's messages, from ``start`` to the step's last, as the request has
            them.
        tokens: Each message's tokens as a call is sent them (the compressor's counter and
            per-message overhead).
        room: Tokens one call may give messages (the input bound less the longest prompt);
            ``None``: no bound.
    """

    start: int
    messages: tuple[Message, ...]
    tokens: tuple[int, ...]
    room: int | None


class Forest(str):
    """A served summary (the parts' texts joined by :data:`SEPARATOR`) that knows its parts.

    It is a ``str``: every strategy and front door uses it as the summary's text.
    """

    parts: tuple[Part, ...]
    originals: Originals | None

    def __new__(cls, parts: Sequence[Part], originals: Originals | None = None) -> Forest:
        text = super().__new__(cls, SEPARATOR.join(p.text for p in parts))
        text.parts = tuple(parts)
        text.originals = originals
        return text

    def reading(self, originals: Originals) -> Forest:
        """The same forest, with the original messages of its range and the next step's."""
        return Forest(self.parts, originals)

    @property
    def layout(self) -> tuple[tuple[int, int, int], ...]:
        """``(level, covered tokens, characters)`` per part, as an entry records it."""
        return tuple((p.level, p.covered, len(p.text)) for p in self.parts)

    @property
    def messages(self) -> tuple[int, ...]:
        """The messages each part covers, as an entry records them; empty when one is not
        known."""
        counts = tuple(p.messages for p in self.parts)
        return () if None in counts else tuple(n for n in counts if n is not None)

    @classmethod
    def of(
        cls,
        summary: str,
        layout: Sequence[Sequence[int]],
        covered: int,
        messages: Sequence[int] = (),
    ) -> Forest:
        """The forest a stored summary holds, from its ``layout`` as an entry records it.

        ``messages``: how many messages each part covers, as the entry records them (ignored
        unless there is one per part). A layout that does not add up to the text (or none)
        makes the summary one part covering ``covered`` tokens.
        """
        counts: Sequence[int | None] = messages
        if len(messages) != len(layout):
            counts = [None] * len(layout)
        parts: list[Part] = []
        position = 0
        for (level, tokens, chars), count in zip(layout, counts, strict=True):
            if parts:
                if summary[position : position + len(SEPARATOR)] != SEPARATOR:
                    break
                position += len(SEPARATOR)
            parts.append(Part(level, tokens, summary[position : position + chars], count))
            position += chars
        else:
            if parts and position == len(summary):
                return cls(parts)
        return cls([Part(_WHOLE, covered, summary)])


def forest(previous: str, count: TokenCounter) -> Forest:
    """``previous`` as a forest: itself when it is one, else one part of its own."""
    if isinstance(previous, Forest):
        return previous
    # A previous summary cut to fit a call's input: its messages' tokens are not known here.
    return Forest([Part(_WHOLE, count(previous), previous)])


def _merged_originals(
    prior: Forest | None, merged: Sequence[Part], new: Sequence[Message], max_tokens: int
) -> tuple[int, Sequence[Message]] | None:
    """``(index of the first, messages)``: the original messages of the ``merged`` parts and
    ``new``, when the merge may read them; else ``None``.

    It may when the producer handed over the range's messages, every part's message count is
    known and they add up to them, and the merged range's messages count at most
    :data:`ORIGINALS_WITHIN` times the budget (or :data:`ORIGINALS_AT_LEAST`, when that is more)
    and fit the room of one call.
    """
    if prior is None or prior.originals is None or not merged:
        return None
    originals = prior.originals
    counts = prior.messages
    if not counts or sum(counts) + len(new) != len(originals.messages):
        return None
    span = sum(p.messages or 0 for p in merged) + len(new)
    size = sum(originals.tokens[len(originals.tokens) - span :])
    if size > max(ORIGINALS_WITHIN * max_tokens, ORIGINALS_AT_LEAST):
        return None
    if originals.room is not None and size > originals.room:
        return None
    first = len(originals.messages) - span
    return originals.start + first, originals.messages[first:]


@dataclass(frozen=True)
class Tree:
    """Range summaries merged as a balanced tree, one summarizer call per compaction.

    A fact stated early passes through about ``log2`` of the compactions' calls, as many as
    one stated late, where ``extend`` summarizes it again at every compaction. See
    :mod:`slimcache.core.tree` for the layout and the budget each part is given.
    """

    name: str = field(default="tree", init=False)
    sends_previous: ClassVar[bool] = True
    builds_on: ClassVar[tuple[str, ...]] = ("extend",)
    """Strategies whose entries this one serves and extends: their summary is one part."""

    async def combine(
        self,
        previous: str | None,
        new: Sequence[Message],
        summarize: Callable[..., Awaitable[str]],
        *,
        count: TokenCounter,
        max_tokens: int,
    ) -> str:
        """Summarize ``new`` into a part, merged with the parts it completes a pair with: from
        the original messages of the merged range when they are at hand and fit, else from the
        parts' summaries."""
        prior = forest(previous, count) if previous is not None else None
        parts = list(prior.parts) if prior is not None else []
        added = sum(count(message_text(m)) for m in new) or 1
        merged: list[Part] = []
        level = 0
        while parts and parts[-1].level == level:  # the binary counter's carry
            merged.insert(0, parts.pop())
            level += 1
        whole = sum(p.covered for p in parts) + sum(p.covered for p in merged) + added

        def share() -> int:
            covered = sum(p.covered for p in merged) + added
            return max(1, math.floor(max_tokens * covered / (whole + added)))

        while parts and sum(count(p.text) for p in parts) + share() > CEILING * max_tokens:
            merged.insert(0, parts.pop())
            level = max(level, merged[0].level + 1)
        # The first part is merged at the next compaction (the counter's carry), so it keeps
        # no room for a part beside it: a range summarized once has the whole budget.
        budget = min(max_tokens, share()) if prior is not None else max_tokens
        covered = sum(p.covered for p in merged) + added
        known = all(p.messages is not None for p in merged)
        messages = sum(p.messages or 0 for p in merged) + len(new) if known else None
        originals = _merged_originals(prior, merged, new, max_tokens)
        if originals is not None:  # the merge reads the messages its parts summarized
            first, source = originals
            text = await summarize("summarize", source, None, max_tokens=budget, first=first)
        elif merged:
            siblings = SEPARATOR.join(p.text for p in merged)
            text = await summarize("extend", new, siblings, max_tokens=budget)
        else:
            text = await summarize("summarize", new, None, max_tokens=budget)
        return Forest([*parts, Part(min(level, _WHOLE), covered, text, messages)])
