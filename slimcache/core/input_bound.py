"""A bound on what one summarizer call receives: the steps of a catch-up, and cutting to fit.

A request may have more messages to fold in than one call can take (a long history seen for the
first time, a big jump). They are folded in consecutive steps instead: the first step's messages
are summarized (or folded into the cached summary), each next step's folded into the summary
the step before made. Each step takes as many whole units (an assistant message with tool
calls and its tool results are one unit) as fit the bound beside the prompt and the previous
summary it is sent with. A unit that does not fit alone is sent on its own, its messages cut
(their text ends in :data:`CUT_MARKER`); a previous summary too long to leave room for messages
is cut the same way. Everything is measured as the compressor measures what it sends: with its
token counter, plus its per-message overhead; a provider known to count more tokens than that
gets a bound divided by how many more (:meth:`InputBound.scaled`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slimcache.messages import CheckedMessages, Message, TokenCounter, count_message_tokens
from slimcache.messages.transcript import message_text

__all__ = ["CUT_MARKER", "InputBound", "Step", "cut_message", "cut_text"]

logger = logging.getLogger("slimcache")

CUT_MARKER = " [... {cut} characters cut: longer than the summarizer's input bound]"
"""Ends a text cut to fit ``max_input_tokens``; ``{cut}`` is how many characters were left out."""


@dataclass(frozen=True)
class Step:
    """One summarizer step of a request: the messages it folds in, as they are sent.

    Attributes:
        first: Index of its first message in the history.
        end: Index of its last message (always the end of a unit).
        messages: Messages ``first..end`` as sent: as given, or with some cut to fit.
        previous: The previous summary as sent (cut when it left no room), or ``None``.
        cut: How many of the messages were cut.
    """

    first: int
    end: int
    messages: Sequence[Message]
    previous: str | None
    cut: int = 0


def _capped(text: str, cap: int) -> str:
    """``text`` cut to ``cap`` characters and the marker, unless that is no shorter."""
    if len(text) <= cap:
        return text
    cut = text[:cap] + CUT_MARKER.format(cut=len(text) - cap)
    return cut if len(cut) < len(text) else text


def _longest(fits: Callable[[int], bool], longest: int) -> int:
    """The largest cap in ``0..longest`` that ``fits`` (0 when none does); ``fits`` grows false
    as the cap grows."""
    low, high = 0, longest
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def cut_text(text: str, tokens: int, count: TokenCounter) -> str:
    """``text``, or its longest beginning that counts ``tokens`` or fewer with
    :data:`CUT_MARKER` after it."""
    if count(text) <= tokens:
        return text
    return _capped(text, _longest(lambda cap: count(_capped(text, cap)) <= tokens, len(text)))


def _capped_call(call: Any, cap: int) -> Any:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": _capped(function["arguments"], cap)}}


def _cuts(message: Message) -> tuple[Callable[[int], Message], int]:
    """``capped(cap)``: ``message`` with its text and tool arguments cut to ``cap`` characters
    each; and the longest of them (a cap past it cuts nothing)."""
    content = message.get("content")
    text = None if content is None else message_text(message)
    calls = message.get("tool_calls") or ()

    def capped(cap: int) -> Message:
        cut = dict(message)
        if text is not None:
            cut["content"] = _capped(text, cap)
        if calls:
            cut["tool_calls"] = [_capped_call(call, cap) for call in calls]
        return cut

    lengths = [len(text or "")]
    lengths += [len(str((call.get("function") or {}).get("arguments", ""))) for call in calls]
    return capped, max(lengths)


def cut_message(message: Message, tokens: int, count: TokenCounter, overhead: int) -> Message:
    """A copy of ``message`` counting ``tokens`` or fewer, its texts cut to one length.

    Its text (the content, text parts joined and other parts described) and the arguments of
    its tool calls are each cut to the longest length that fits, and end in
    :data:`CUT_MARKER`; role, name and tool call ids are kept. When even the shortest cut
    counts more, that is what is returned.
    """
    capped, longest = _cuts(message)
    fits = lambda cap: count_message_tokens(capped(cap), count, overhead) <= tokens  # noqa: E731
    return capped(_longest(fits, longest))


def _least(message: Message, count: TokenCounter, overhead: int) -> int:
    """Tokens of ``message`` cut as short as it goes."""
    capped, _ = _cuts(message)
    return count_message_tokens(capped(0), count, overhead)


def _spread(sizes: Sequence[int], room: int) -> list[int]:
    """How much of ``room`` each of ``sizes`` gets: one smaller than an even share keeps its
    size, and what it leaves is shared among the larger ones."""
    shares = list(sizes)
    left, waiting = max(room, 0), len(sizes)
    for position in sorted(range(len(sizes)), key=sizes.__getitem__):
        shares[position] = min(sizes[position], left // waiting)
        left -= shares[position]
        waiting -= 1
    return shares


@dataclass(frozen=True)
class InputBound:
    """How many tokens one summarizer call may receive, and the steps that keep within it.

    Attributes:
        limit: Tokens one call may receive (prompt, previous summary and messages); ``None``
            sets no bound: every request is one step.
        reserve: Tokens always left for messages: a previous summary longer than
            ``limit - prompt_tokens - reserve`` is cut.
        prompt_tokens: Tokens of the longest prompt a step may be sent with.
        sends_previous: Whether the strategy sends the previous summary with the messages.
        count: The compressor's token counter.
        overhead: Tokens added per message.
    """

    limit: int | None
    reserve: int
    prompt_tokens: int
    sends_previous: bool
    count: TokenCounter
    overhead: int

    def scaled(self, ratio: float) -> InputBound:
        """This bound for a provider that counts ``ratio`` tokens for each token estimated: the
        limit and the reserve divided by it (see :mod:`slimcache.core.input_ratio`); as it is
        for a ratio of 1.0 or less, or with no limit."""
        if ratio <= 1.0 or self.limit is None:
            return self
        return dataclasses.replace(
            self, limit=int(self.limit / ratio), reserve=int(self.reserve / ratio)
        )

    def step(self, checked: CheckedMessages, first: int, last: int, previous: str | None) -> Step:
        """The next step: messages from ``first`` on, up to ``last`` at most, that fit.

        Args:
            checked: The request's history (its tokens and units).
            first: The first message not yet folded in (the start of a unit).
            last: The last message due (the end of a unit).
            previous: The summary the step folds its messages into, or ``None``.
        """
        messages = checked.messages
        limit = self.limit
        if limit is None:
            return Step(first, last, messages[first : last + 1], previous)
        sent, room = previous, limit - self.prompt_tokens
        if previous is not None and self.sends_previous:
            sent = self._fitted_previous(previous, self.reserve)
            room -= self.count(sent)
        tokens, unit_end = checked.tokens, checked.unit_end
        end, used, position = first - 1, 0, first
        while position <= last:
            closes = unit_end[position]
            size = sum(tokens[position : closes + 1])
            if used + size > room:
                break
            end, used, position = closes, used + size, closes + 1
        if end >= first:
            return Step(first, end, messages[first : end + 1], sent)
        # The first unit does not fit alone: it is sent on its own, cut to the room there is.
        end = unit_end[first]
        unit, sizes = messages[first : end + 1], tokens[first : end + 1]
        least = [
            min(size, _least(message, self.count, self.overhead))
            for message, size in zip(unit, sizes, strict=True)
        ]
        if previous is not None and self.sends_previous and sum(least) > room:
            # What the unit cannot lose (ids, tool names, markers) goes before the summary.
            sent = self._fitted_previous(previous, sum(least))
            room = limit - self.prompt_tokens - self.count(sent)
        cut_unit, cut = self._cut_unit(unit, sizes, least, room)
        return Step(first, end, cut_unit, sent, cut)

    def _cut_unit(
        self, unit: Sequence[Message], sizes: Sequence[int], least: Sequence[int], room: int
    ) -> tuple[list[Message], int]:
        """A unit cut to ``room``; and how many of its messages were cut.

        Each message keeps ``least`` (what it cannot lose: its role, ids, tool names, the
        markers), and the rest of the room is spread over what they can lose.
        """
        if sum(least) > room:
            logger.warning(
                "a tool call's messages do not fit max_input_tokens=%s even cut: sent cut short",
                self.limit,
            )
        spare = _spread(
            [size - low for size, low in zip(sizes, least, strict=True)], room - sum(least)
        )
        shares = [low + more for low, more in zip(least, spare, strict=True)]
        sent = [
            message if share >= size else cut_message(message, share, self.count, self.overhead)
            for message, size, share in zip(unit, sizes, shares, strict=True)
        ]
        return sent, sum(share < size for size, share in zip(sizes, shares, strict=True))

    def _fitted_previous(self, previous: str, reserve: int) -> str:
        """The previous summary, cut if it leaves fewer than ``reserve`` tokens for messages."""
        assert self.limit is not None
        most = max(self.limit - self.prompt_tokens - reserve, 0)
        if self.count(previous) <= most:
            return previous
        logger.warning(
            "the previous summary leaves no room under max_input_tokens=%d: sent cut to %d tokens",
            self.limit,
            most,
        )
        return cut_text(previous, most, self.count)
