"""The planner on its own: decisions from an index and a history, without store or summarizer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimcache import KeepMessages, KeepTokens, MessageThreshold
from slimcache.core.plan import (
    ExtendCached,
    History,
    Identity,
    NothingDue,
    Rules,
    ServeCached,
    SummarizeAnew,
    _boundary_from_the_end,
    _boundary_from_the_front,
    decide,
    eviction_boundary,
    listed_with,
    next_index,
    pick_base,
    read_index,
)
from slimcache.messages import check_messages
from slimcache.stores import RangeRef, SummaryEntry, ThreadIndex
from tests.fakes import chat

IDENTITY = Identity("s", "p", "extend")
RULES = Rules(
    MessageThreshold(20), KeepMessages(10), summary_tokens=lambda e: 10, identity=IDENTITY
)


def history_of(messages: list[dict[str, Any]]) -> History:
    return History(check_messages(messages))


def entry(history: History, end: int, *, strategy: str = "extend", text: str = "s") -> SummaryEntry:
    return SummaryEntry(
        thread="t",
        start=history.pinned,
        end=end,
        fingerprint=history.fingerprint(end),
        summary=f"{text}[{history.pinned}-{end}]",
        summary_tokens=1,
        covered_tokens=1,
        created_at=0.0,
        summarizer="s",
        prompt="p",
        strategy=strategy,
    )


def ref(e: SummaryEntry) -> RangeRef:
    return RangeRef(e.start, e.end, e.fingerprint)


def test_short_history_is_unchanged_and_long_one_is_summarized() -> None:
    short = history_of(chat(20))
    assert decide(short, None, RULES, force=False) == NothingDue()
    long = history_of(chat(30))
    decision = decide(long, None, RULES, force=False)
    assert isinstance(decision, SummarizeAnew)
    assert (decision.target.start, decision.target.end) == (1, 20)
    assert decision.target.fingerprint == long.fingerprint(20)
    assert decision.reason == "messages>20"
    forced = decide(short, None, RULES, force=True)
    assert isinstance(forced, SummarizeAnew)
    assert forced.reason == "forced"


def test_a_matching_head_is_served_then_extended() -> None:
    history = history_of(chat(30))
    head = entry(history, 20)
    index = ThreadIndex("t", (ref(head),), head)
    view = read_index(index, history, RULES)
    assert view.head_usable
    assert not view.invalidated
    base, gone = pick_base(view, [], RULES)
    assert base is head
    assert gone == frozenset()
    assert decide(history, base, RULES, force=False) == ServeCached(head)

    longer = history_of(chat(52))
    view = read_index(index, longer, RULES)
    base, _ = pick_base(view, [], RULES)
    decision = decide(longer, base, RULES, force=False)
    assert isinstance(decision, ExtendCached)
    assert decision.base is head
    assert (decision.target.start, decision.target.end) == (1, 42)


def test_an_edit_makes_the_head_stale_and_falls_back_to_a_checkpoint() -> None:
    original = history_of(chat(60))
    early, late = entry(original, 20), entry(original, 40)
    index = ThreadIndex("t", (ref(early), ref(late)), late)
    edited_messages = chat(60)
    edited_messages[30]["content"] = "edited"
    edited = history_of(edited_messages)
    view = read_index(index, edited, RULES)
    assert view.head_stale
    assert view.stale == frozenset({(1, 40)})
    assert view.candidates == (ref(early),)
    base, gone = pick_base(view, [early], RULES)
    assert base is early
    assert not gone
    # A candidate that turned out missing is reported gone; nothing usable is left.
    base, gone = pick_base(view, [None], RULES)
    assert base is None
    assert gone == frozenset({ref(early)})


def test_a_head_made_by_other_settings_is_not_used_unless_any_is_accepted() -> None:
    history = history_of(chat(30))
    head = entry(history, 20, strategy="concat")
    index = ThreadIndex("t", (ref(head),), head)
    view = read_index(index, history, RULES)
    assert view.head_stale
    assert not view.head_usable
    accept_any = Rules(MessageThreshold(20), KeepMessages(10), summary_tokens=lambda e: 10)
    assert read_index(index, history, accept_any).head_usable


def test_a_head_past_the_keep_boundary_is_kept_not_served() -> None:
    full = history_of(chat(60))
    head = entry(full, 40)
    index = ThreadIndex("t", (ref(head),), head)
    earlier = history_of(chat(30))  # a replay of an earlier point of the same conversation
    view = read_index(index, earlier, RULES)
    assert view.head_beyond
    assert not view.head_usable
    assert not view.invalidated


def test_next_index_never_moves_back_to_a_shorter_head() -> None:
    full = history_of(chat(60))
    longer = entry(full, 40)
    stored = ThreadIndex("t", (ref(longer),), longer)
    shorter_history = history_of(chat(30))
    mine = entry(shorter_history, 20)
    update = next_index(stored, shorter_history, mine, RULES, thread="t", checkpoints=4)
    assert update.index.head is longer
    assert [(r.start, r.end) for r in update.index.ranges] == [(1, 20), (1, 40)]
    assert update.delete == ()


def test_next_index_replaces_a_contradicted_head_and_deletes_stale_ranges() -> None:
    original = history_of(chat(60))
    old = entry(original, 40)
    stored = ThreadIndex("t", (ref(entry(original, 20)), ref(old)), old)
    edited_messages = chat(60)
    edited_messages[5]["content"] = "edited"
    edited = history_of(edited_messages)
    fresh = entry(edited, 50)
    update = next_index(stored, edited, fresh, RULES, thread="t", checkpoints=4)
    assert update.index.head is fresh
    assert [(r.start, r.end) for r in update.index.ranges] == [(1, 50)]
    assert update.delete == ((1, 20), (1, 40))


def test_next_index_keeps_only_the_latest_checkpoints() -> None:
    history = history_of(chat(80))
    entries = [entry(history, end) for end in (10, 20, 30, 40)]
    stored = ThreadIndex("t", tuple(ref(e) for e in entries[:3]), entries[2])
    update = next_index(stored, history, entries[3], RULES, thread="t", checkpoints=2)
    assert [(r.start, r.end) for r in update.index.ranges] == [(1, 30), (1, 40)]
    assert update.index.head is entries[3]
    assert update.delete == ((1, 10), (1, 20))


def test_listed_with_drops_what_it_is_told_is_stale_or_gone_and_keeps_a_head_it_is_told_to() -> (
    None
):
    history = history_of(chat(80))
    e10, e20, e30, e40, e50 = (entry(history, end) for end in (10, 20, 30, 40, 50))
    stored = ThreadIndex("t", (ref(e10), ref(e20), ref(e30), ref(e50)), e50)
    # A shorter entry (a replay of an earlier point): the longer head stays.
    kept = listed_with(
        stored,
        e40,
        thread="t",
        checkpoints=3,
        stale={(1, 20)},
        head_stays=True,
        gone={ref(e30)},
    )
    assert kept.index.head is e50
    assert [(r.start, r.end) for r in kept.index.ranges] == [(1, 10), (1, 40), (1, 50)]
    assert kept.delete == ((1, 20),)  # gone ranges are not there to delete
    # The head replaced and no longer listed is deleted with what falls off the listing.
    replaced = listed_with(
        ThreadIndex("t", (ref(e10), ref(e20)), e30),
        e40,
        thread="t",
        checkpoints=1,
        stale=(),
        head_stays=False,
    )
    assert replaced.index.head is e40
    assert [(r.start, r.end) for r in replaced.index.ranges] == [(1, 40)]
    assert replaced.delete == ((1, 10), (1, 20), (1, 30))
    assert listed_with(None, e10, thread="t", checkpoints=2, stale=(), head_stays=True).index == (
        ThreadIndex("t", (ref(e10),), e10)
    )


@pytest.mark.parametrize("keep", [1, 3, 10])
def test_eviction_never_splits_a_tool_group(keep: int) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for i in range(6):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    checked = check_messages(messages)
    boundary = eviction_boundary(checked, 0, KeepMessages(keep))
    assert boundary is not None
    assert checked.unit_end[boundary] == boundary
    assert messages[boundary + 1]["role"] != "tool"


def random_history(data: st.DataObject) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "rules"}] * data.draw(
        st.integers(0, 2)
    )
    for i in range(data.draw(st.integers(0, 40))):
        if data.draw(st.booleans()):
            calls = data.draw(st.integers(1, 3))
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}-{j}", "type": "function", "function": {"name": "f"}}
                        for j in range(calls)
                    ],
                }
            )
            answered = data.draw(st.integers(0, calls))
            messages += [
                {"role": "tool", "tool_call_id": f"c{i}-{j}", "content": "x" * j}
                for j in range(answered)
            ]
        else:
            text = "w" * data.draw(st.integers(0, 60))
            messages.append(
                {"role": data.draw(st.sampled_from(["user", "assistant"])), "content": text}
            )
    return messages


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_walk_from_the_end_finds_the_same_boundary(data: st.DataObject) -> None:
    checked = check_messages(random_history(data))
    keep: KeepMessages | KeepTokens = data.draw(
        st.one_of(
            st.builds(KeepMessages, st.integers(1, 12)), st.builds(KeepTokens, st.integers(1, 200))
        )
    )
    half = data.draw(st.integers(1, 30))

    def settled(messages: int, tokens: int) -> bool:
        return messages <= half

    floor = keep.messages if isinstance(keep, KeepMessages) else 1
    for start in range(checked.pinned, len(checked) + 1):
        if start > checked.pinned and checked.unit_end[start - 1] != start - 1:
            continue  # a window starts on a unit
        for rule in (None, settled):
            fast = _boundary_from_the_end(checked, start, keep, rule, floor)
            assert fast == _boundary_from_the_front(checked, start, keep, rule, floor)
            assert eviction_boundary(checked, start, keep, rule) == fast


def test_histories_by_id_hash_ids_of_any_size_and_content_where_there_is_none() -> None:
    messages = chat(12)
    huge = 10**5000  # past the 4,300 digits str() accepts
    for i, message in enumerate(messages[1:], start=1):
        message["id"] = huge + i if i % 2 else f"m{i}"
    by_id = History(check_messages(messages), by_id=True)
    edited = [dict(m) for m in messages]
    edited[3]["content"] = "another text"
    assert History(check_messages(edited), by_id=True).fingerprint(8) == by_id.fingerprint(8)
    assert History(check_messages(edited)).fingerprint(8) != History(
        check_messages(messages)
    ).fingerprint(8)
    renamed = [dict(m) for m in messages]
    renamed[3]["id"] = huge + 4
    assert History(check_messages(renamed), by_id=True).fingerprint(8) != by_id.fingerprint(8)
    unnamed = [dict(m) for m in messages]
    del unnamed[3]["id"]
    without = History(check_messages(unnamed), by_id=True)
    assert without.fingerprint(8) != by_id.fingerprint(8)
    unnamed_edited = [dict(m) for m in unnamed]
    unnamed_edited[3]["content"] = "another text"
    assert History(check_messages(unnamed_edited), by_id=True).fingerprint(8) != (
        without.fingerprint(8)
    )
