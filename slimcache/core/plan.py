"""The cache decision for one request, as pure functions: no store, no summarizer, no clock.

Given a thread's parsed index and the request's checked history, the planner says what to do:

- :class:`NothingDue`: nothing is summarized and nothing is cached to serve;
- :class:`ServeCached`: a cached summary still matches and nothing new is due;
- :class:`ExtendCached`: a cached summary matches, and the messages after it up to ``target``
  are due;
- :class:`SummarizeAnew`: nothing usable is cached, and messages up to ``target`` are due.

The compressor does the I/O around it: it reads the index, asks :func:`read_index` which ranges
are worth reading, reads them, lets :func:`pick_base` and :func:`decide` choose, and writes the
index :func:`next_index` computes. ``slimcache inspect`` uses the same validity rule.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Union

from slimcache.core.fingerprints import hashed
from slimcache.core.policy import Keep, KeepMessages, KeepTokens, Trigger, WindowState, is_settled
from slimcache.messages import CheckedMessages, ids_as_records
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex
from slimcache.stores.keys import FINGERPRINT_PREFIX, fingerprint_chain, fingerprint_range

__all__ = [
    "Decision",
    "ExtendCached",
    "History",
    "Identity",
    "IndexUpdate",
    "IndexView",
    "NothingDue",
    "Rules",
    "ServeCached",
    "SummarizeAnew",
    "answer_state",
    "count_boundary",
    "decide",
    "eviction_boundary",
    "listed_with",
    "next_index",
    "pick_base",
    "read_index",
    "window_state",
]


class History:
    """A request's checked messages, and fingerprints of the prefixes after the pinned ones.

    Args:
        checked: The messages.
        by_id: Fingerprint messages that have an ``id`` by their id alone (see
            :func:`slimcache.messages.checks.ids_as_records`).
        first: Where every range starts: right after the pinned messages (the default), or
            0 for ranges that cover the pinned messages too (``cached_summarizer``'s).
    """

    def __init__(
        self, checked: CheckedMessages, *, by_id: bool = False, first: int | None = None
    ) -> None:
        self.checked = checked
        self.pinned = checked.pinned
        self.first = checked.pinned if first is None else first
        self.total = len(checked)
        self.by_id = by_id
        self._fingerprints: dict[int, str] = {}

    @cached_property
    def _records(self) -> tuple[str, Sequence[str]]:
        checked = self.checked
        return ids_as_records(checked) if self.by_id else (checked.kinds, checked.payloads)

    @cached_property
    def chain(self) -> list[str]:
        """``chain[i - first]``: the older per-message fingerprint of ``first..i``."""
        return fingerprint_chain(self.checked.canonical, self.first)

    def fingerprint(self, end: int) -> str:
        """Fingerprint of messages ``first..end`` (the form new entries are written with)."""
        found = self._fingerprints.get(end)
        if found is None:
            kinds, payloads = self._records
            found = fingerprint_range(kinds, payloads, self.first, end)
            self._fingerprints[end] = found
            hashed.remember(found, kinds, payloads, self.first, end)
        return found

    def same(self, end: int, fingerprint: str) -> bool:
        """Whether messages ``first..end`` (``end`` inside the history) have ``fingerprint``.

        Either form is checked: :func:`~slimcache.stores.keys.fingerprint_range`'s, by comparison
        with what this process hashed when it can, or the older per-message chain's.
        """
        if fingerprint.startswith(FINGERPRINT_PREFIX):
            if end not in self._fingerprints:
                # Equal to what this process hashed into it: no need to hash again.
                kinds, payloads = self._records
                if hashed.holds(fingerprint, kinds, payloads, self.first, end):
                    self._fingerprints[end] = fingerprint
            return self.fingerprint(end) == fingerprint
        if ":" in fingerprint or self.by_id:
            # An unknown format (a newer version's, say), or the older chain, which hashed
            # content, when ids are what is trusted: a miss, then replaced.
            return False
        return self.chain[end - self.first] == fingerprint

    def matches(self, start: int, end: int, fingerprint: str) -> bool:
        """Whether a range is a valid summary range of this history.

        It must start at ``first`` (right after the pinned messages), end inside the history
        on a whole unit (never between a tool call and its results), and its fingerprint must
        match.
        """
        return (
            start == self.first
            and self.first <= end < self.total
            and self.checked.unit_end[end] == end
            and self.same(end, fingerprint)
        )

    def contradicts(self, start: int, end: int, fingerprint: str) -> bool:
        """Whether a range lies inside this history but does not match it (edited messages).

        A range reaching past the history is not contradicted: it may belong to a longer
        version of the same conversation (a replay of an earlier point).
        """
        return end < self.total and not self.matches(start, end, fingerprint)


@dataclass(frozen=True)
class Identity:
    """What made an entry: the summarizer, the prompts' digest and the strategy's name.

    Attributes:
        summarizer: The summarizer's id.
        prompt: The prompts' digest new entries are written with.
        strategy: The strategy's name new entries are written with.
        prompts_also: Digests of other prompts taken as these (the defaults of earlier
            versions, when the prompts are today's defaults).
        strategies_also: Strategies whose entries this one builds on (see
            :func:`~slimcache.core.strategies.builds_on`).
    """

    summarizer: str
    prompt: str
    strategy: str
    prompts_also: frozenset[str] = frozenset()
    strategies_also: frozenset[str] = frozenset()

    def made(self, entry: SummaryEntry) -> bool:
        """Whether ``entry`` was made by this configuration (or one it takes as its own)."""
        return (
            entry.summarizer == self.summarizer
            and (entry.prompt == self.prompt or entry.prompt in self.prompts_also)
            and (entry.strategy == self.strategy or entry.strategy in self.strategies_also)
        )


@dataclass(frozen=True)
class Rules:
    """The compressor's settings the decision depends on.

    Attributes:
        trigger: When compressing is due.
        keep: What stays verbatim.
        summary_tokens: Tokens of the summary message built from an entry.
        identity: Entries made by another configuration are not used; ``None`` uses any.
    """

    trigger: Trigger
    keep: Keep
    summary_tokens: Callable[[SummaryEntry], int]
    identity: Identity | None = None

    def usable(self, entry: SummaryEntry) -> bool:
        """Whether an entry's maker is acceptable."""
        return self.identity is None or self.identity.made(entry)

    def serves(self, entry: SummaryEntry | None, target: RangeRef) -> bool:
        """Whether ``entry`` is a usable summary of exactly ``target``."""
        return entry is not None and entry.fingerprint == target.fingerprint and self.usable(entry)


@dataclass(frozen=True)
class NothingDue:
    """Nothing to summarize and nothing cached to serve."""


@dataclass(frozen=True)
class ServeCached:
    """Serve ``entry`` as it is."""

    entry: SummaryEntry


@dataclass(frozen=True)
class ExtendCached:
    """Fold the messages after ``base`` up to ``target.end`` into it."""

    base: SummaryEntry
    target: RangeRef
    reason: str


@dataclass(frozen=True)
class SummarizeAnew:
    """Summarize messages ``target.start..target.end`` from scratch."""

    target: RangeRef
    reason: str


Decision = Union[NothingDue, ServeCached, ExtendCached, SummarizeAnew]  # noqa: UP007


@dataclass(frozen=True)
class IndexView:
    """A thread's index checked against one request's history.

    Attributes:
        index: The index, or ``None`` when there is none (or it was unusable).
        reach: The last message compressing down to the keep policy could end at (-1: none).
        stale: Listed ranges the history contradicts.
        head_stale: The head is contradicted, or was made by another configuration.
        head_usable: The head may be served or extended.
        head_beyond: The head reaches past ``reach`` (a replay of an earlier point): it is
            kept as the head, neither served nor dropped.
        candidates: Listed ranges that match and are longer than the usable head, longest
            first: worth reading, as the head alone would redo their work.
    """

    index: ThreadIndex | None
    reach: int
    stale: frozenset[tuple[int, int]]
    head_stale: bool
    head_usable: bool
    head_beyond: bool
    candidates: tuple[RangeRef, ...]

    @property
    def invalidated(self) -> bool:
        """Whether any cached range no longer matches the history."""
        return bool(self.stale) or self.head_stale


def eviction_boundary(
    checked: CheckedMessages,
    window_start: int,
    keep: Keep,
    settled: Callable[[int, int], bool] | None = None,
) -> int | None:
    """Evict whole units from the window's front until ``keep`` (and ``settled``) hold.

    Args:
        checked: The history.
        window_start: First message of the verbatim window.
        keep: The keep policy; ``KeepMessages(n)`` is also a floor: a unit is not evicted if
            fewer than ``n`` messages would stay.
        settled: ``(messages, tokens) -> bool`` for the remaining window: the trigger's own
            hysteresis rule (see :func:`slimcache.core.policy.is_settled`).

    Returns:
        The last evicted index, or ``None`` when nothing can be evicted. The last unit always
        stays verbatim, and an assistant message with tool calls is never separated from its
        tool results.
    """
    floor = keep.messages if isinstance(keep, KeepMessages) else 1
    if type(keep) in (KeepMessages, KeepTokens):
        return _boundary_from_the_end(checked, window_start, keep, settled, floor)
    return _boundary_from_the_front(checked, window_start, keep, settled, floor)


def _boundary_from_the_front(
    checked: CheckedMessages,
    window_start: int,
    keep: Keep,
    settled: Callable[[int, int], bool] | None,
    floor: int,
) -> int | None:
    """Evict unit by unit from the window's front; works for any keep policy."""
    total = len(checked)
    remaining = total - window_start
    remaining_tokens = sum(checked.tokens[window_start:])
    boundary: int | None = None
    position = window_start
    while position < total:
        if keep.satisfied(remaining, remaining_tokens) and (
            settled is None or settled(remaining, remaining_tokens)
        ):
            break
        end = checked.unit_end[position]
        size = end - position + 1
        if end >= total - 1 or remaining - size < floor:
            break
        remaining -= size
        remaining_tokens -= sum(checked.tokens[position : end + 1])
        boundary, position = end, end + 1
    return boundary


def _boundary_from_the_end(
    checked: CheckedMessages,
    window_start: int,
    keep: Keep,
    settled: Callable[[int, int], bool] | None,
    floor: int,
) -> int | None:
    """The same boundary as the front-to-back walk, found in time proportional to the window.

    Walking from the front stops at the first unit where eviction must stop (keep satisfied
    and settled, the last unit, or the floor). For the built-in keep policies and triggers
    that condition only grows truer as the window shrinks, so it is the earliest unit of the
    run of stopping units at the end, found by walking back from the last message.
    """
    total = len(checked)
    unit_end = checked.unit_end
    tokens = checked.tokens
    stop_at: int | None = None
    kept_tokens = 0
    position = total - 1
    # Every unit from the one holding message ``total - floor`` on stops (evicting it would
    # leave fewer than ``floor``, or it is the last unit): start the walk before them.
    floored = total - floor
    if floor > 1 and floored > window_start:
        start = floored
        while start > window_start and unit_end[start - 1] != start - 1:
            start -= 1
        kept_tokens = sum(tokens[start:])
        stop_at, position = start, start - 1
    while position >= window_start:
        start = position
        while start > window_start and unit_end[start - 1] != start - 1:
            start -= 1
        kept_tokens += sum(tokens[start : position + 1])
        kept = total - start
        stops = (
            unit_end[start] >= total - 1
            or total - unit_end[start] - 1 < floor
            or (
                keep.satisfied(kept, kept_tokens)
                and (settled is None or settled(kept, kept_tokens))
            )
        )
        if not stops:
            break
        stop_at = start
        position = start - 1
    if stop_at is None or stop_at <= window_start:
        return None
    return stop_at - 1


def _compression_boundary(
    history: History, window_start: int, rules: Rules, summary_tokens: int
) -> int | None:
    """Where compressing from ``window_start`` ends: keep satisfied and the trigger settled."""
    checked = history.checked
    pinned_tokens = sum(checked.tokens[: history.pinned])

    def settled(messages: int, tokens: int) -> bool:
        after = WindowState(messages, tokens, pinned_tokens, summary_tokens)
        return is_settled(rules.trigger, after, rules.keep)

    return eviction_boundary(checked, window_start, rules.keep, settled)


def count_boundary(checked: CheckedMessages, count: int) -> int | None:
    """Last index of the whole units covering at least ``count`` messages from the front.

    The last unit is never included, so fewer messages may be covered.
    """
    total = len(checked)
    boundary: int | None = None
    position = 0
    while position < count and position < total:
        end = checked.unit_end[position]
        if end >= total - 1:
            break
        boundary, position = end, end + 1
    return boundary


def read_index(index: ThreadIndex | None, history: History, rules: Rules) -> IndexView:
    """Check an index against a history: what is stale, usable, or worth reading."""
    head_tokens = rules.summary_tokens(index.head) if index is not None else 0
    limit = _compression_boundary(history, history.pinned, rules, head_tokens)
    reach = -1 if limit is None else limit
    if index is None:
        return IndexView(None, reach, frozenset(), False, False, False, ())
    head = index.head
    head_stale = history.contradicts(head.start, head.end, head.fingerprint) or not rules.usable(
        head
    )
    head_usable = (
        not head_stale
        and head.end <= reach
        and history.matches(head.start, head.end, head.fingerprint)
    )
    head_beyond = not head_stale and head.end > reach
    # A head that matches vouches for the listed ranges it covers: the index was written
    # against a history with these very messages up to it, and ranges are listed only if they
    # matched that history. Only ranges past it need checking. (A range is still checked
    # before it is ever served.)
    vouched = head.end if head_usable else -1
    stale = frozenset(
        (r.start, r.end)
        for r in index.ranges
        if r.end > vouched and history.contradicts(r.start, r.end, r.fingerprint)
    )
    candidates = sorted(
        (
            r
            for r in index.ranges
            # The cheap tests first: with a usable head, most listed ranges end at or before it.
            if (not head_usable or r.end > head.end)
            and r.end <= reach
            and (r.start, r.end) not in stale
            and history.matches(r.start, r.end, r.fingerprint)
        ),
        key=lambda r: r.end,
        reverse=True,
    )
    return IndexView(index, reach, stale, head_stale, head_usable, head_beyond, tuple(candidates))


def pick_base(
    view: IndexView, fetched: Sequence[SummaryEntry | None], rules: Rules
) -> tuple[SummaryEntry | None, frozenset[RangeRef]]:
    """Choose the summary to build on: the longest candidate read intact, else the head.

    Args:
        view: From :func:`read_index`.
        fetched: The entries read for ``view.candidates``, in the same order (``None`` for a
            missing or unusable value).
        rules: The compressor's settings.

    Returns:
        The base (or ``None``), and the candidates that turned out to be gone or unusable.
    """
    gone: set[RangeRef] = set()
    for ref, entry in zip(view.candidates, fetched, strict=True):
        if entry is not None and entry.fingerprint == ref.fingerprint and rules.usable(entry):
            return entry, frozenset(gone)
        gone.add(ref)
    if view.head_usable and view.index is not None:
        return view.index.head, frozenset(gone)
    return None, frozenset(gone)


def window_state(history: History, base: SummaryEntry | None, rules: Rules) -> WindowState:
    """What the request looks like with ``base`` (or no summary) and every message after it
    verbatim: what the trigger fires on."""
    checked = history.checked
    window_start = base.end + 1 if base is not None else history.pinned
    kept_to = eviction_boundary(checked, window_start, rules.keep)
    evictable = 0 if kept_to is None else kept_to - window_start + 1
    return WindowState(
        messages=history.total - window_start,
        tokens=sum(checked.tokens[window_start:]),
        pinned_tokens=sum(checked.tokens[: history.pinned]),
        summary_tokens=rules.summary_tokens(base) if base is not None else 0,
        evictable_messages=evictable,
        evictable_tokens=sum(checked.tokens[window_start : window_start + evictable]),
    )


def answer_state(history: History, base: SummaryEntry | None, rules: Rules) -> WindowState:
    """What a ceiling bounds: the answer served with ``base`` (or no summary), its pinned
    messages, the summary message and every later message, seen whole as the window.

    ``messages`` and ``tokens`` count all of it, and nothing is apart as pinned or summary, so
    a trigger set as a ceiling counts the whole answer whichever it reads: ``MessageThreshold``
    its messages, ``TokenThreshold`` and ``ContextWindow`` its tokens. What is evictable is
    the window's, as for the trigger: how far the summary lags.
    """
    state = window_state(history, base, rules)
    return WindowState(
        messages=history.pinned + (1 if base is not None else 0) + state.messages,
        tokens=state.total_tokens,
        pinned_tokens=0,
        summary_tokens=0,
        evictable_messages=state.evictable_messages,
        evictable_tokens=state.evictable_tokens,
    )


def decide(history: History, base: SummaryEntry | None, rules: Rules, *, force: bool) -> Decision:
    """Decide what one request does, given the summary it may build on."""
    state = window_state(history, base, rules)
    reason = "forced" if force else rules.trigger.reason(state)
    if reason is None:
        return ServeCached(base) if base is not None else NothingDue()

    window_start = base.end + 1 if base is not None else history.pinned
    boundary = _compression_boundary(history, window_start, rules, state.summary_tokens)
    if boundary is None:
        return ServeCached(base) if base is not None else NothingDue()
    target = RangeRef(history.pinned, boundary, history.fingerprint(boundary))
    if base is not None:
        return ExtendCached(base, target, reason)
    return SummarizeAnew(target, reason)


@dataclass(frozen=True)
class IndexUpdate:
    """The index to write, and the ranges to delete once it is written."""

    index: ThreadIndex
    delete: tuple[tuple[int, int], ...]


def next_index(
    stored: ThreadIndex | None,
    history: History,
    entry: SummaryEntry,
    rules: Rules,
    *,
    thread: str,
    checkpoints: int,
    gone: frozenset[RangeRef] = frozenset(),
) -> IndexUpdate:
    """Add ``entry`` to the stored index and make it the head, unless a longer head stays.

    The index never moves back to a shorter head that still matches (or reaches past) this
    history: a worker that read the index before another wrote a longer head keeps that
    head, so concurrent requests of one conversation never undo each other's progress. A head
    the history contradicts (edited messages) is replaced. Ranges the history contradicts are
    dropped and deleted; the listing keeps the ``checkpoints`` latest ranges.
    """
    view = read_index(stored, history, rules)
    head_stays = stored is not None and not view.head_stale and stored.head.end > entry.end
    return listed_with(
        stored,
        entry,
        thread=thread,
        checkpoints=checkpoints,
        stale=view.stale,
        head_stays=head_stays,
        gone=gone,
    )


def listed_with(
    stored: ThreadIndex | None,
    entry: SummaryEntry,
    *,
    thread: str,
    checkpoints: int,
    stale: Collection[tuple[int, int]],
    head_stays: bool,
    gone: Collection[RangeRef] = (),
) -> IndexUpdate:
    """The stored index with ``entry`` listed, and the ranges to delete once it is written.

    Args:
        stored: The index read, or ``None``.
        entry: The range just written.
        thread: The thread's encoded id.
        checkpoints: How many ranges the listing keeps (the latest); the others are deleted.
        stale: Ranges the history contradicts: dropped from the listing and deleted.
        head_stays: Keep the stored head (longer than ``entry`` and still good) rather than
            make ``entry`` the head. A head replaced and no longer listed is deleted.
        gone: Listed ranges found missing or unusable: dropped from the listing.
    """
    refs: list[RangeRef] = []
    if stored is not None:
        refs = [
            r
            for r in stored.ranges
            if (r.start, r.end) not in stale
            and r not in gone
            and (r.start, r.end) != (entry.start, entry.end)
        ]
    refs.append(RangeRef(entry.start, entry.end, entry.fingerprint))
    refs = sorted(refs, key=lambda r: r.end)
    # Ranges that fall off the listing are deleted: a thread keeps at most `checkpoints`.
    dropped = {(r.start, r.end) for r in refs[:-checkpoints]}
    refs = refs[-checkpoints:]
    head = stored.head if stored is not None and head_stays else entry
    delete = set(stale) | dropped
    delete.discard((head.start, head.end))
    if stored is not None and head is not stored.head:
        old = stored.head
        listed = {(r.start, r.end) for r in refs}
        if (old.start, old.end) not in listed and (old.start, old.end) != (entry.start, entry.end):
            delete.add((old.start, old.end))
    delete.discard((entry.start, entry.end))
    return IndexUpdate(ThreadIndex(thread, tuple(refs), head), tuple(sorted(delete)))
