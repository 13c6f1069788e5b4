"""The JSON envelopes slimcache writes: range summaries and the per-thread index.

A value that does not parse, carries an unknown version, or belongs to another thread or range
is treated as a cache miss (and logged), never served and never a crash. A record of a version
this one does not know (:func:`of_other_version`) is not overwritten either: a fleet upgrading
one worker at a time shares the store (see docs/format.md).
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from slimcache._process import register

__all__ = [
    "ENTRY_VERSION",
    "RangeRef",
    "SummaryEntry",
    "ThreadIndex",
    "load_stored",
    "of_other_version",
]

logger = logging.getLogger("slimcache")

ENTRY_VERSION = 1
_SUMMARY_FORMAT = "slimcache.summary"
_INDEX_FORMAT = "slimcache.index"


def load_stored(raw: object) -> object:
    """Parse a stored value; ``None`` for anything that is not JSON slimcache could have written.

    Values come from a store other programs may write too: bytes, garbage, or JSON nested
    deeply enough to exhaust the parser's recursion are all just unusable.
    """
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_version(value: object) -> bool:
    # ``True == 1`` in Python: a JSON ``true`` is not version 1.
    return _is_int(value) and value == ENTRY_VERSION


def of_other_version(raw: object) -> bool:
    """Whether a stored value is a slimcache record of a format version this one does not know.

    That is a JSON object whose ``format`` starts with ``"slimcache."`` and whose ``v`` is an
    integer other than :data:`ENTRY_VERSION`. Such a record is never served (it does not parse)
    and never overwritten: the worker that wrote it reads it. Anything else that does not parse
    is garbage, a miss that the next write replaces.
    """
    if not isinstance(raw, str) or '"slimcache.' not in raw:
        return False
    data = load_stored(raw)
    if not isinstance(data, dict):
        return False
    kind = data.get("format")
    version = data.get("v")
    return (
        isinstance(kind, str)
        and kind.startswith("slimcache.")
        and _is_int(version)
        and version != ENTRY_VERSION
    )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parts(value: object) -> tuple[tuple[int, int, int], ...] | None:
    """A summary's layout as stored (a list of three non-negative integers each), or ``None``."""
    if not isinstance(value, list):
        return None
    parts: list[tuple[int, int, int]] = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 3):
            return None
        if not all(_is_int(n) and n >= 0 for n in item):
            return None
        parts.append((item[0], item[1], item[2]))
    return tuple(parts)


def _part_messages(value: object, parts: int) -> tuple[int, ...] | None:
    """The messages each part covers as stored (a list of non-negative integers), or ``None``
    for a value of another type. Absent, or not one count per part: empty (the parts' messages
    are then not known, as in an entry an earlier version wrote)."""
    if not isinstance(value, list) or not all(_is_int(n) and n >= 0 for n in value):
        return None
    return tuple(value) if len(value) == parts else ()


@dataclass(frozen=True)
class SummaryEntry:
    """A cached summary of messages ``start..end`` (inclusive) of one thread.

    Attributes:
        thread: The encoded thread id.
        start: First message index covered.
        end: Last message index covered.
        fingerprint: Hash of exactly the covered messages.
        summary: The summary text.
        summary_tokens: Tokens of the summary.
        covered_tokens: Tokens of the messages it covers.
        created_at: Unix time of creation.
        summarizer: Which summarizer made it.
        prompt: Digest of the prompts it was made with.
        strategy: The merge strategy that produced it.
        parts: The ``tree`` strategy's layout of the summary: ``(level, covered tokens,
            characters)`` per part, in order (see :mod:`slimcache.core.tree`); empty for a
            summary of one piece, and then not written, so that versions before it read the
            entry as they always did (they ignore the key when it is there).
        part_messages: How many messages each of ``parts`` covers, in order; empty when not
            known (an entry an earlier version wrote), and then not written. Versions before it
            ignore the key; one that does not give a count per part is read as empty.
    """

    thread: str
    start: int
    end: int
    fingerprint: str
    summary: str
    summary_tokens: int
    covered_tokens: int
    created_at: float
    summarizer: str
    prompt: str
    strategy: str
    parts: tuple[tuple[int, int, int], ...] = ()
    part_messages: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the envelope as a JSON-ready dict."""
        data = {"format": _SUMMARY_FORMAT, "v": ENTRY_VERSION, **asdict(self)}
        if not self.parts:
            del data["parts"]
        if not self.part_messages:
            del data["part_messages"]
        return data

    def to_json(self) -> str:
        """Serialize the envelope."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: object, *, thread: str, start: int, end: int) -> SummaryEntry | None:
        """Rebuild an entry, or return ``None`` if it is malformed or not for this range."""
        if not isinstance(data, dict):
            return None
        if data.get("format") != _SUMMARY_FORMAT or not _is_version(data.get("v")):
            return None
        texts = ("thread", "fingerprint", "summary", "summarizer", "prompt", "strategy")
        ints = ("start", "end", "summary_tokens", "covered_tokens")
        if not all(isinstance(data.get(k), str) for k in texts):
            return None
        if not all(_is_int(data.get(k)) for k in ints) or not _is_number(data.get("created_at")):
            return None
        if (data["thread"], data["start"], data["end"]) != (thread, start, end):
            return None
        parts = _parts(data.get("parts", []))
        if parts is None:
            return None
        counts = _part_messages(data.get("part_messages", []), len(parts))
        if counts is None:
            return None
        optional = ("parts", "part_messages")
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k not in optional}
        return cls(**fields, parts=parts, part_messages=counts)

    @classmethod
    def parse(cls, raw: object, *, thread: str, start: int, end: int) -> SummaryEntry | None:
        """Parse a stored value; anything unusable is a miss, logged at WARNING."""
        if raw is None:
            return None
        entry = cls.from_dict(load_stored(raw), thread=thread, start=start, end=end)
        if entry is None:
            logger.warning(
                "ignoring unusable cache entry for thread %s range %d-%d", thread, start, end
            )
        return entry


@dataclass(frozen=True)
class RangeRef:
    """Where a cached range is and what it covers, as listed in a thread's index."""

    start: int
    end: int
    fingerprint: str


@dataclass(frozen=True)
class ThreadIndex:
    """A thread's small index: which ranges exist, and a copy of the newest one.

    Carrying the newest summary lets the common request (nothing new to summarize) be
    answered with a single store read. ``written_at`` (Unix time) is recorded where entries
    have a TTL: a hit rewrites the index and its head once half the TTL has passed since, so
    a thread in use does not expire.
    """

    thread: str
    ranges: tuple[RangeRef, ...]
    head: SummaryEntry
    written_at: float | None = None

    def to_json(self) -> str:
        """Serialize the index."""
        data = {
            "format": _INDEX_FORMAT,
            "v": ENTRY_VERSION,
            "thread": self.thread,
            "ranges": [[r.start, r.end, r.fingerprint] for r in self.ranges],
            "head": self.head.to_dict(),
        }
        if self.written_at is not None:
            data["written_at"] = self.written_at
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: object, *, thread: str) -> ThreadIndex | None:
        """Parse a stored index; anything unusable is ``None``, logged at WARNING.

        Every request of a thread reads the same index until the next compression, so the
        last few hundred distinct usable values parsed are remembered (the result is
        immutable and depends on nothing else).
        """
        if raw is None:
            return None
        try:
            return _parse_usable(raw, thread) if isinstance(raw, str) else _usable(raw, thread)
        except _Unusable:
            logger.warning("ignoring unusable index entry for thread %s", thread)
            return None

    @classmethod
    def _from_json(cls, raw: object, thread: str) -> ThreadIndex | None:
        data = load_stored(raw)
        if not isinstance(data, dict) or data.get("format") != _INDEX_FORMAT:
            return None
        if not _is_version(data.get("v")) or data.get("thread") != thread:
            return None
        ranges_raw = data.get("ranges")
        head_raw = data.get("head")
        if not isinstance(ranges_raw, list) or not isinstance(head_raw, dict):
            return None
        ranges: list[RangeRef] = []
        for item in ranges_raw:
            if not (isinstance(item, list) and len(item) == 3):
                return None
            start, end, fingerprint = item
            if not (_is_int(start) and _is_int(end) and isinstance(fingerprint, str)):
                return None
            ranges.append(RangeRef(start, end, fingerprint))
        head = SummaryEntry.from_dict(
            head_raw, thread=thread, start=head_raw.get("start", -1), end=head_raw.get("end", -1)
        )
        if head is None:
            return None
        written_at: Any = data.get("written_at")
        written = float(written_at) if _is_number(written_at) else None
        return cls(thread=thread, ranges=tuple(ranges), head=head, written_at=written)


class _Unusable(Exception):
    """A stored index that cannot be used (never cached: an exception is not)."""


def _usable(raw: object, thread: str) -> ThreadIndex:
    index = ThreadIndex._from_json(raw, thread)
    if index is None:
        raise _Unusable
    return index


# Bounded: an index is a few kilobytes, so this holds a few megabytes at the most.
_parse_usable = functools.lru_cache(maxsize=512)(_usable)
register(
    __name__,
    "parsed indexes",
    "the stored indexes parsed last",
    _parse_usable,
    clear=_parse_usable.cache_clear,
)
