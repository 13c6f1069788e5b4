"""What this process hashed into fingerprints, so a history is checked again by comparison.

A cache hit must show that the messages a summary covers are still the ones it was made from:
their fingerprint (:func:`slimcache.stores.keys.fingerprint_range`) must equal the one stored.
Hashing the whole covered text on every request is the larger part of a hit's cost. A
fingerprint is a function of its inputs (first message, kinds, payload texts), so when a history's
inputs are equal to the inputs this process hashed into a fingerprint, the history has that
fingerprint: comparing strings costs a fraction of hashing them (and next to nothing when they are
the very objects of the last request).
Nothing is trusted that was not compared: a miss hashes as before.

The inputs are kept in a process-wide LRU bounded by characters. They are only an accelerator:
nothing is served from them, and a restart or another worker only means hashing once more.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from slimcache._process import register

__all__ = ["MAX_CHARS", "MAX_ENTRIES", "HashedRanges", "hashed"]

# Characters of payload text kept at most (about 16 MB of ASCII text), and entries at most. One
# range may take up to a quarter of the budget; a longer one is hashed every time.
MAX_CHARS = 16_000_000
MAX_ENTRIES = 4096


class _Inputs(NamedTuple):
    start: int
    kinds: str
    payloads: list[str]
    chars: int


class HashedRanges:
    """Fingerprints with the inputs they were computed from, least recently used dropped first.

    Safe to share between threads and event loops: the table is changed under one lock, and
    the comparison runs outside it on values that are never changed.

    Args:
        max_chars: Characters of payload text kept at most.
        max_entries: Fingerprints kept at most.
    """

    def __init__(self, *, max_chars: int = MAX_CHARS, max_entries: int = MAX_ENTRIES) -> None:
        self._max_chars = max_chars
        self._max_entries = max_entries
        self._entries: OrderedDict[str, _Inputs] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def chars(self) -> int:
        """Characters of payload text kept now."""
        return self._chars

    def clear(self) -> None:
        """Forget every fingerprint's inputs."""
        with self._lock:
            self._entries.clear()
            self._chars = 0

    def limit(self, *, max_chars: int, max_entries: int) -> None:
        """Change the bounds, dropping the least recently used entries beyond them at once."""
        with self._lock:
            self._max_chars = max_chars
            self._max_entries = max_entries
            self._trim()

    def _trim(self) -> None:
        while self._chars > self._max_chars or len(self._entries) > self._max_entries:
            _, dropped = self._entries.popitem(last=False)
            self._chars -= dropped.chars

    def remember(
        self, fingerprint: str, kinds: str, payloads: Sequence[str], start: int, end: int
    ) -> None:
        """Keep what ``fingerprint`` was computed from: records ``start..end`` (inclusive)."""
        covered = list(payloads[start : end + 1])
        chars = sum(map(len, covered)) + len(covered)
        if chars > self._max_chars // 4:
            return
        inputs = _Inputs(start, kinds[start : end + 1], covered, chars)
        with self._lock:
            old = self._entries.pop(fingerprint, None)
            if old is not None:
                self._chars -= old.chars
            self._entries[fingerprint] = inputs
            self._chars += chars
            self._trim()

    def holds(
        self, fingerprint: str, kinds: str, payloads: Sequence[str], start: int, end: int
    ) -> bool:
        """Whether records ``start..end`` are exactly what ``fingerprint`` was computed from."""
        with self._lock:
            inputs = self._entries.get(fingerprint)
            if inputs is None:
                return False
            self._entries.move_to_end(fingerprint)
        if inputs.start != start or inputs.kinds != kinds[start : end + 1]:
            return False
        covered = payloads[start : end + 1]
        return inputs.payloads == (covered if type(covered) is list else list(covered))


hashed = register(
    __name__, "hashed ranges", "what was hashed into recent fingerprints", HashedRanges()
)
"""The process-wide table the planner checks and fills."""
