"""Key encoding, fingerprints and cached envelopes."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from slimcache import InvalidInput, SummaryEntry, ThreadIndex, ThreadKeys, encode_thread_id
from slimcache._keys import MAX_PLAIN_ID_LENGTH, fingerprint_chain
from slimcache._messages import check_messages

NASTY = st.one_of(
    st.text(min_size=1),
    st.text(alphabet=":/%~\n\r summary_thread-0123456789", min_size=1),
    st.text(min_size=1).map(lambda s: s * 400),
    st.integers(min_value=-(10**12), max_value=10**12),
)


@given(NASTY, NASTY)
def test_distinct_thread_ids_never_share_keys(a: str | int, b: str | int) -> None:
    assume(str(a) != str(b))
    assert encode_thread_id(a) != encode_thread_id(b)
    keys_a, keys_b = ThreadKeys(a), ThreadKeys(b)
    # No key of one thread is a key, or under the prefix, of the other.
    assert not keys_a.summary(1, 5).startswith(keys_b.prefix)
    assert not keys_b.index.startswith(keys_a.prefix)


@given(NASTY)
def test_encoded_ids_are_safe_and_bounded(thread_id: str | int) -> None:
    encoded = encode_thread_id(thread_id)
    assert len(encoded) <= MAX_PLAIN_ID_LENGTH + 1 or len(encoded) == 65
    assert all(ch.isascii() and (ch.isalnum() or ch in "_.-%~") for ch in encoded)
    assert ":" not in encoded
    assert "/" not in encoded
    assert "\n" not in encoded
    assert encoded.count("~") <= 1


def test_examples() -> None:
    assert ThreadKeys("123").summary(5, 15) == "thread_123:summary:5-15"
    assert ThreadKeys("a:summary:1-2").summary(0, 1) == "thread_a%3Asummary%3A1-2:summary:0-1"
    assert encode_thread_id("x" * 10_000).startswith("~")
    assert ThreadKeys(7, namespace="ns/").index == "ns/:thread_7:index"
    assert ThreadKeys(7, namespace="app").lease == "app:thread_7:lease"
    assert ThreadKeys(7, namespace="app:").index == ThreadKeys(7, namespace="app").index
    for bad in ("", None, True, 1.5):
        with pytest.raises(InvalidInput, match="thread_id"):
            encode_thread_id(bad)  # type: ignore[arg-type]


def test_namespace_and_thread_id_never_run_together() -> None:
    # Without a delimiter, "" + "athread_b" and "thread_a" + "b" gave the same keys.
    assert ThreadKeys("athread_b", namespace="").index != ThreadKeys("b", "thread_a").index
    assert ThreadKeys("b", namespace="thread_a").index == "thread_a:thread_b:index"


NAMESPACES = st.text(alphabet=":/_thread-ab", max_size=12)


def _normalized(namespace: str) -> str:
    return namespace + ":" if namespace and not namespace.endswith(":") else namespace


@given(NASTY, NAMESPACES, NASTY, NAMESPACES)
def test_distinct_namespace_and_id_pairs_never_share_keys(
    a: str | int, ns_a: str, b: str | int, ns_b: str
) -> None:
    assume(str(a) != str(b) or _normalized(ns_a) != _normalized(ns_b))
    keys_a, keys_b = ThreadKeys(a, ns_a), ThreadKeys(b, ns_b)
    of_a = {keys_a.index, keys_a.lease, keys_a.summary(1, 5), keys_a.summary(0, 12)}
    of_b = {keys_b.index, keys_b.lease, keys_b.summary(1, 5), keys_b.summary(0, 12)}
    assert not of_a & of_b


def test_huge_integer_thread_ids_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="at most 1000 digits"):
        encode_thread_id(10**5000)
    with pytest.raises(InvalidInput, match="at most 1000 digits"):
        encode_thread_id(-(10**1200))
    assert encode_thread_id(10**999) == str(10**999)[:0] + encode_thread_id(str(10**999))


def chain_of(texts: list[str], start: int) -> list[str]:
    messages = [{"role": "user", "content": t} for t in texts]
    return fingerprint_chain(check_messages(messages).canonical, start)


@given(st.lists(st.text(max_size=20), min_size=2, max_size=10), st.data())
def test_fingerprints_change_from_the_edit_on(texts: list[str], data: st.DataObject) -> None:
    at = data.draw(st.integers(min_value=0, max_value=len(texts) - 1))
    replacement = data.draw(st.text(max_size=20))
    assume(replacement != texts[at])
    edited = [*texts[:at], replacement, *texts[at + 1 :]]
    before, after = chain_of(texts, 0), chain_of(edited, 0)
    assert before[:at] == after[:at]
    assert all(x != y for x, y in zip(before[at:], after[at:], strict=True))


@given(st.lists(st.text(max_size=20), min_size=2, max_size=10))
def test_fingerprints_see_order_and_start(texts: list[str]) -> None:
    assume(texts[0] != texts[1])
    swapped = [texts[1], texts[0], *texts[2:]]
    assert chain_of(texts, 0)[-1] != chain_of(swapped, 0)[-1]
    assert chain_of(["x", *texts], 1) != chain_of(["y", *texts], 0)[1:]


def entry(**changes: object) -> SummaryEntry:
    values: dict[str, object] = dict(
        thread="t",
        start=1,
        end=9,
        fingerprint="f" * 32,
        summary="s",
        summary_tokens=1,
        covered_tokens=10,
        created_at=1.0,
        summarizer="m.f",
        prompt="p",
        strategy="extend",
    )
    values.update(changes)
    return SummaryEntry(**values)  # type: ignore[arg-type]


def test_entry_round_trip_and_rejections() -> None:
    good = entry()
    assert SummaryEntry.parse(good.to_json(), thread="t", start=1, end=9) == good
    data = json.loads(good.to_json())
    for bad in (
        "not json",
        json.dumps({**data, "v": 2}),
        json.dumps({**data, "format": "other"}),
        json.dumps({**data, "summary": 5}),
        json.dumps({**data, "start": True}),
        json.dumps([1, 2]),
    ):
        assert SummaryEntry.parse(bad, thread="t", start=1, end=9) is None
    assert SummaryEntry.parse(good.to_json(), thread="t", start=1, end=8) is None
    assert SummaryEntry.parse(good.to_json(), thread="u", start=1, end=9) is None


def test_index_round_trip_and_rejections() -> None:
    from slimcache import RangeRef

    index = ThreadIndex("t", (RangeRef(1, 9, "f" * 32),), entry())
    assert ThreadIndex.parse(index.to_json(), thread="t") == index
    data = json.loads(index.to_json())
    assert ThreadIndex.parse(index.to_json(), thread="other") is None
    assert ThreadIndex.parse(json.dumps({**data, "ranges": [[1, "x", "f"]]}), thread="t") is None
    assert ThreadIndex.parse(json.dumps({**data, "head": {"v": 1}}), thread="t") is None
    assert ThreadIndex.parse(json.dumps({**data, "v": 0}), thread="t") is None
