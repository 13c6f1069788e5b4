"""Which of its cached ranges a ``cached_summarizer`` call's messages still hold."""

from __future__ import annotations

from slimcache.core.plan import History
from slimcache.messages import CheckedMessages
from slimcache.stores.entries import RangeRef, ThreadIndex

__all__ = ["WrapHistory"]


class WrapHistory:
    """One call's messages, and which ranges from the first message they still hold.

    A range's fingerprint is checked as the compressor checks its own (see
    :class:`slimcache.core.plan.History`): by comparison with what this process hashed when it
    can, so a repeated call does not hash every message again; entries written with the older
    per-message chain are still checked with it.
    """

    def __init__(self, checked: CheckedMessages) -> None:
        self.checked = checked
        self.last = len(checked) - 1
        self._prefixes = History(checked, first=0)

    def fingerprint(self) -> str:
        """The fingerprint of all the messages, as a new entry is written with."""
        return self._prefixes.fingerprint(self.last)

    def matches(self, start: int, end: int, fingerprint: str) -> bool:
        """A range from the first message that these messages still hold unchanged."""
        return start == 0 and 0 <= end <= self.last and self._prefixes.same(end, fingerprint)

    def contradicts(self, start: int, end: int, fingerprint: str) -> bool:
        """A range inside these messages that no longer matches them (an edit)."""
        return end <= self.last and not self.matches(start, end, fingerprint)

    def stale(self, index: ThreadIndex) -> set[tuple[int, int]]:
        """The ranges ``index`` lists, its head among them, that these messages contradict.

        A head that matches vouches for the listed ranges it covers: they were listed against
        messages equal to these up to it. Only the ranges past it are checked, so a worker new
        to the thread hashes the head, not every checkpoint. (Nothing is served on the head's
        word: a range is checked itself before it is used.)
        """
        head = index.head
        vouched = head.end if self.matches(head.start, head.end, head.fingerprint) else -1
        return {
            (ref.start, ref.end)
            for ref in (*index.ranges, RangeRef(head.start, head.end, head.fingerprint))
            if ref.end > vouched and self.contradicts(ref.start, ref.end, ref.fingerprint)
        }
