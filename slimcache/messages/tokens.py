"""Token counting: the approximate counter, per-message counts, and counters that count once."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import overload

from slimcache._process import register
from slimcache.messages.types import Message, TokenCounter

__all__ = [
    "DEFAULT_MESSAGE_OVERHEAD",
    "NON_TEXT_PART_TOKENS",
    "LazyTokens",
    "RememberingCounter",
    "approx_counts",
    "approx_tokens",
    "count_message_tokens",
]

DEFAULT_MESSAGE_OVERHEAD = 4
# A flat estimate for an image, audio or file part; their bytes say little about their tokens.
NON_TEXT_PART_TOKENS = 85
_TOOL_CALLS_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
# Texts shorter than this are counted by approx_tokens (plus the overhead) by table lookup.
_APPROX_TABLE_SIZE = 1024


def approx_tokens(text: str) -> int:
    """Approximate token count: one token per four characters, rounded up."""
    return _approx_of_length(len(text))


def _approx_of_length(length: int) -> int:
    """:func:`approx_tokens` of a text of ``length`` characters."""
    return (length + 3) // 4


@lru_cache(maxsize=8)
def _approx_table(overhead: int) -> list[int]:
    # A list, not a tuple: list.__getitem__ is the faster of the two to map over. Never mutated.
    return [overhead + _approx_of_length(length) for length in range(_APPROX_TABLE_SIZE)]


register(
    __name__,
    "approximate counts",
    "the default counter's tables, per message overhead",
    _approx_table,
    clear=_approx_table.cache_clear,
)


def approx_counts(contents: Sequence[str], overhead: int) -> list[int]:
    """``overhead + approx_tokens(text)`` of every text: looked up in C while texts are short."""
    try:
        return list(map(_approx_table(overhead).__getitem__, map(len, contents)))
    except IndexError:  # a text of the table's size or longer
        return [overhead + tokens for tokens in map(_approx_of_length, map(len, contents))]


def count_message_tokens(
    message: Message,
    counter: TokenCounter = approx_tokens,
    overhead: int = DEFAULT_MESSAGE_OVERHEAD,
) -> int:
    """Count one message's tokens: text, tool calls (as JSON), name, plus a per-message overhead.

    Non-text content parts (images, audio, files) count a flat ``NON_TEXT_PART_TOKENS`` each.
    """
    total = overhead
    content = message.get("content")
    if isinstance(content, str):
        total += counter(content)
    elif isinstance(content, list):
        for part in content:
            if part.get("type") in ("text", "refusal"):
                total += counter(str(part.get("text", part.get("refusal", ""))))
            else:
                total += NON_TEXT_PART_TOKENS
    tool_calls = message.get("tool_calls")
    if tool_calls:
        total += counter(_TOOL_CALLS_ENCODER.encode(tool_calls))
    name = message.get("name")
    if isinstance(name, str):
        total += counter(name)
    return total


class RememberingCounter:
    """A token counter that remembers the counts of the texts it was given.

    A thread's verbatim window is mostly the same from one request to the next, so a hit would
    have a tokenizer count the same texts again on every request. A token counter is a function
    of the text alone: counts are kept per text, for at most ``max_chars`` characters of text
    (past that, all are forgotten at once). A subclass of ``str`` is remembered by its plain text.

    Args:
        counter: The token counter.
        max_chars: Characters of text whose counts are kept at most.
    """

    def __init__(self, counter: TokenCounter, *, max_chars: int = 2_000_000) -> None:
        self.counter = counter
        self._max_chars = max_chars
        self._counts: dict[str, int] = {}
        self._chars = 0

    def __call__(self, text: str) -> int:
        # A subclass of str (a tree's served summary) is remembered by its plain text.
        key = str.__str__(text) if isinstance(text, str) else None
        found = self._counts.get(key) if key is not None else None
        if found is not None:
            return found
        counted = self.counter(text)
        if key is not None and len(key) <= self._max_chars // 8:
            if self._chars + len(key) > self._max_chars:
                self._counts.clear()
                self._chars = 0
            self._counts[key] = counted
            self._chars += len(key)
        return counted


class LazyTokens(Sequence[int]):
    """Token counts of plain turns, each counted the first time it is read.

    With a real tokenizer as the counter, counting is most of what checking a history costs. A
    cache hit reads the counts of the pinned messages and of the verbatim window only (the
    summary's entry records what it covers), so it counts those alone, however long the history.
    Compares equal to the list of the same counts.

    Args:
        contents: The turns' texts.
        counter: The token counter.
        overhead: Tokens added per message.
    """

    __slots__ = ("_contents", "_counted", "_counter", "_overhead")

    def __init__(self, contents: Sequence[str], counter: TokenCounter, overhead: int) -> None:
        self._contents = contents
        self._counter = counter
        self._overhead = overhead
        self._counted: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._contents)

    def _count(self, position: int) -> int:
        found = self._counted.get(position)
        if found is None:
            found = self._overhead + self._counter(self._contents[position])
            self._counted[position] = found
        return found

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        total = len(self._contents)
        if isinstance(index, slice):
            return list(map(self._count, range(*index.indices(total))))
        position = operator.index(index)
        if position < 0:
            position += total
        if not 0 <= position < total:
            raise IndexError("token index out of range")
        return self._count(position)

    def __iter__(self) -> Iterator[int]:
        if self._counter is approx_tokens:
            # Every count at once (a sum over the history, say): cheaper in C than one by one.
            return iter(approx_counts(self._contents, self._overhead))
        return map(self._count, range(len(self._contents)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == len(self) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as one

    def __repr__(self) -> str:
        return f"LazyTokens({list(self)!r})"
