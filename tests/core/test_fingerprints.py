"""Fingerprints checked by comparison with what this process hashed into them (``_hashed.py``).

A history equal to the inputs of a fingerprint has that fingerprint; anything else, however
small the difference, is hashed as before. These tests hold the table to exactness, to its
bounds, and show a cache hit that hashes nothing, while an edit is still seen.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from slimcache import KeepMessages, MemoryStore, MessageThreshold, SummarizeCompressor
from slimcache.core.fingerprints import HashedRanges
from slimcache.core.plan import History
from slimcache.messages import check_messages
from slimcache.stores.keys import fingerprint_range
from tests.fakes import chat, counting_hashes

KINDS = "suaua"
PAYLOADS = ["be brief", "hello", "hi there", "how are you", "fine"]


def remembered(table: HashedRanges, start: int = 1, end: int = 3) -> str:
    fingerprint = fingerprint_range(KINDS, PAYLOADS, start, end)
    table.remember(fingerprint, KINDS, PAYLOADS, start, end)
    return fingerprint


def test_equal_inputs_are_held_whether_or_not_the_same_objects() -> None:
    table = HashedRanges()
    fingerprint = remembered(table)
    assert table.holds(fingerprint, KINDS, PAYLOADS, 1, 3)
    copies = json.loads(json.dumps(PAYLOADS))  # equal strings, other objects
    assert all(a is not b for a, b in zip(copies, PAYLOADS, strict=True))
    assert table.holds(fingerprint, KINDS, copies, 1, 3)
    assert table.holds(fingerprint, KINDS, tuple(copies), 1, 3)  # any sequence


@pytest.mark.parametrize(
    ("kinds", "payloads", "start", "end"),
    [
        (KINDS, ["be brief", "hello", "hi there!", "how are you", "fine"], 1, 3),  # an edit
        (KINDS, ["be brief", "hello", "hi there", "how are you"], 1, 4),  # fewer messages
        (KINDS, ["be brief", "hellohi", " there", "how are you", "fine"], 1, 3),  # text moved
        ("suuua", PAYLOADS, 1, 3),  # a role changed
        (KINDS, PAYLOADS, 0, 3),  # another first message
        (KINDS, PAYLOADS, 1, 2),  # another last message
    ],
)
def test_anything_else_is_not_held(kinds: str, payloads: list[str], start: int, end: int) -> None:
    table = HashedRanges()
    fingerprint = remembered(table)
    assert not table.holds(fingerprint, kinds, payloads, start, end)


def test_an_unknown_fingerprint_is_not_held() -> None:
    table = HashedRanges()
    remembered(table)
    assert not table.holds("3:" + "0" * 32, KINDS, PAYLOADS, 1, 3)


def test_the_least_recently_used_go_first_when_characters_run_out() -> None:
    texts = ["x" * 99] * 4  # 100 characters a range of one message, with its separator
    table = HashedRanges(max_chars=400)
    fingerprints = [f"3:{i}" for i in range(4)]
    for fingerprint in fingerprints:
        table.remember(fingerprint, "uuuu", texts, 0, 0)
    assert table.chars == 400
    assert table.holds(fingerprints[0], "uuuu", texts, 0, 0)  # now the most recent
    table.remember("3:new", "uuuu", texts, 0, 0)
    assert table.chars == 400
    assert not table.holds(fingerprints[1], "uuuu", texts, 0, 0)
    assert table.holds(fingerprints[0], "uuuu", texts, 0, 0)
    assert table.holds("3:new", "uuuu", texts, 0, 0)


def test_entries_are_bounded_in_number_too() -> None:
    table = HashedRanges(max_entries=3)
    for i in range(5):
        table.remember(f"3:{i}", KINDS, PAYLOADS, 1, 3)
    assert len(table) == 3
    assert not table.holds("3:1", KINDS, PAYLOADS, 1, 3)
    assert table.holds("3:4", KINDS, PAYLOADS, 1, 3)


def test_a_range_longer_than_a_quarter_of_the_budget_is_not_kept() -> None:
    table = HashedRanges(max_chars=1000)
    table.remember("3:long", "u", ["y" * 300], 0, 0)
    assert len(table) == 0
    assert table.chars == 0
    table.remember("3:short", "u", ["y" * 200], 0, 0)
    assert len(table) == 1
    assert table.chars == 201


def test_lowering_the_bounds_drops_the_least_recently_used_at_once() -> None:
    table = HashedRanges()
    for i in range(4):
        table.remember(f"3:{i}", KINDS, PAYLOADS, 1, 3)
    table.limit(max_chars=10**6, max_entries=2)
    assert len(table) == 2
    assert table.holds("3:3", KINDS, PAYLOADS, 1, 3)
    table.limit(max_chars=0, max_entries=0)  # keeps nothing from now on
    table.remember("3:4", KINDS, PAYLOADS, 1, 3)
    assert len(table) == 0
    assert table.chars == 0


def test_remembering_again_does_not_count_twice() -> None:
    table = HashedRanges()
    for _ in range(3):
        remembered(table)
    assert len(table) == 1
    assert table.chars == sum(map(len, PAYLOADS[1:4])) + 3


class Agreeable(str):
    """A string that claims to equal anything, and to have any length asked."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __len__(self) -> int:
        return 1


def test_a_str_subclass_cannot_pass_for_other_text() -> None:
    # A tool call sends the list down the message-by-message path (the bulk path takes only
    # str itself), which records the turn as the plain text it holds, never as the subclass.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": Agreeable("original question")},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "done", "tool_call_id": "c1"},
    ]
    before = History(check_messages(history))
    fingerprint = before.fingerprint(2)
    assert all(type(payload) is str for payload in before.checked.payloads)
    edited = copy.deepcopy(history)
    edited[1]["content"] = Agreeable("another question")
    assert not History(check_messages(edited)).matches(1, 2, fingerprint)
    assert History(check_messages(copy.deepcopy(history))).matches(1, 2, fingerprint)


async def summarize(messages: Any, context: Any) -> str:
    return f"summary of {len(messages)} messages"


async def test_a_hit_hashes_nothing_the_process_hashed_before_and_an_edit_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = counting_hashes(monkeypatch)
    store = MemoryStore()

    def compressor() -> SummarizeCompressor:
        return SummarizeCompressor(
            summarize, store, trigger=MessageThreshold(20), keep=KeepMessages(10)
        )

    history = chat(40)
    made = await compressor().compress_detailed(history, thread_id="t")
    assert made.outcome == "summarized"
    assert calls
    calls.clear()
    # A stateless server: every request is a new compressor and freshly parsed messages.
    for _ in range(3):
        hit = await compressor().compress_detailed(json.loads(json.dumps(history)), thread_id="t")
        assert hit.outcome == "hit"
    assert calls == []

    edited = json.loads(json.dumps(history))
    edited[5]["content"] += " (edited)"
    after = await compressor().compress_detailed(edited, thread_id="t")
    assert after.outcome == "summarized"  # the cached range no longer matches
    assert calls  # hashed, not taken from the table
    assert after.summary_range == made.summary_range
