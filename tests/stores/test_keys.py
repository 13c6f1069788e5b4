"""Key encoding, fingerprints and cached envelopes."""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
import struct
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import slimcache.stores.keys as keys_module
from slimcache import InvalidInput
from slimcache.core.plan import History
from slimcache.messages import check_messages
from slimcache.stores import SummaryEntry, ThreadIndex, ThreadKeys, encode_thread_id
from slimcache.stores.keys import (
    MAX_PLAIN_ID_LENGTH,
    SUFFIXES,
    fingerprint_chain,
    fingerprint_range,
)

# Any text but a blank one (refused, see test_blank_ids_are_refused).
NASTY = st.one_of(
    st.text(min_size=1).filter(str.strip),
    st.text(alphabet=":/%~\n\r summary_thread-0123456789", min_size=1).filter(str.strip),
    st.text(min_size=1).filter(str.strip).map(lambda s: s * 400),
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


def _encoded_by_definition(thread_id: str | int) -> str:
    text = str(thread_id)
    encoded = quote(text, safe="", errors="surrogatepass").replace("~", "%7E")
    if len(encoded) > MAX_PLAIN_ID_LENGTH:
        return "~" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return encoded


@given(
    st.one_of(
        NASTY,
        # Around the plain-id fast path: only kept characters, or one other among them, at
        # lengths on both sides of the limit.
        st.text(alphabet="aZ09_.-", min_size=1, max_size=MAX_PLAIN_ID_LENGTH + 3),
        st.text(alphabet="aZ09_.-~% \n\u00e9\u0663", min_size=1, max_size=140).filter(str.strip),
        st.text(alphabet="aZ09_.-\u00e9\u0663\u212a", min_size=1, max_size=4),
        st.integers(min_value=-(2**430), max_value=2**430),
        st.sampled_from([2**421 - 1, -(2**421 - 1), 2**421, -(2**421), 10**127, -(10**127)]),
    )
)
@example("\u00e9t\u00e9")  # word characters that are not ASCII are not kept
@example("id\u0663")
@example("\u212a")  # the Kelvin sign, which matches [k] when ignoring case
@example("a\n")  # a pattern's $ would let the newline through
def test_the_plain_id_fast_path_encodes_as_the_definition_does(thread_id: str | int) -> None:
    assert encode_thread_id(thread_id) == _encoded_by_definition(thread_id)


def test_a_str_subclass_id_is_encoded_from_its_text() -> None:
    class Loud(str):
        def __str__(self) -> str:
            return "other"

    assert encode_thread_id(Loud("a-1")) == "a-1"
    assert encode_thread_id(Loud("a/1")) == "a%2F1"


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


@pytest.mark.parametrize("blank", ["  ", "\t", "\n", " \u3000 "])
def test_blank_ids_are_refused_as_empty_ones_are(blank: str) -> None:
    with pytest.raises(InvalidInput, match="thread_id must not be only whitespace"):
        ThreadKeys(blank)
    with pytest.raises(InvalidInput, match=r"^id must not be only whitespace"):
        ThreadKeys(blank, name="id")


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


def range_of(messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> str:
    checked = check_messages(messages)
    last = len(messages) - 1 if end is None else end
    return fingerprint_range(checked.kinds, checked.payloads, start, last)


def spelled_out(messages: list[dict[str, Any]], start: int) -> str:
    """The range fingerprint from its written definition, for plain turns (role and text)."""
    kinds = "".join({"human": "u", "ai": "a"}.get(m["role"], m["role"][0]) for m in messages)
    texts = [m["content"] for m in messages]
    state = hashlib.sha256(f"slimcache-fp-v3:{start}:{kinds}:".encode())
    state.update(struct.pack(f"<{len(texts)}Q", *map(len, texts)))
    state.update("".join(texts).encode("utf-8", "surrogatepass"))
    return "3:" + state.hexdigest()[:32]


_ROLE = st.sampled_from(["system", "developer", "user", "human", "assistant", "ai"])


@given(st.lists(st.tuples(_ROLE, st.text(max_size=20)), min_size=1, max_size=8), st.data())
def test_range_fingerprints_follow_their_definition_on_every_machine(
    turns: list[tuple[str, str]], data: st.DataObject
) -> None:
    # The lengths are little-endian whatever the machine: workers on different hardware share
    # the store, so they must compute the same fingerprints.
    messages = [{"role": role, "content": text} for role, text in turns]
    start = data.draw(st.integers(min_value=0, max_value=len(messages) - 1))
    assert range_of(messages, start) == spelled_out(messages[start:], start)


@given(st.lists(st.text(max_size=20), min_size=2, max_size=10), st.data())
def test_range_fingerprints_see_every_edit_split_and_role(
    texts: list[str], data: st.DataObject
) -> None:
    messages = [{"role": "user", "content": t} for t in texts]
    base = range_of(messages)
    at = data.draw(st.integers(min_value=0, max_value=len(texts) - 1))
    replacement = data.draw(st.text(max_size=20))
    assume(replacement != texts[at])
    edited = [dict(m) for m in messages]
    edited[at]["content"] = replacement
    assert range_of(edited) != base
    # Moving text across a message boundary keeps the joined text but not the lengths.
    moved = [dict(m) for m in messages]
    moved[0]["content"] = texts[0] + texts[1]
    moved[1]["content"] = ""
    if texts[1]:
        assert range_of(moved) != base
    other_role = [dict(m) for m in messages]
    other_role[at]["role"] = "assistant"
    assert range_of(other_role) != base
    # "human" is another spelling of "user", as in the canonical form.
    assert range_of([{**m, "role": "human"} for m in messages]) == base
    # So is "ai" of "assistant".
    answers = [{**m, "role": "assistant"} for m in messages]
    assert range_of([{**m, "role": "ai"} for m in messages]) == range_of(answers)
    assert range_of(messages[1:], 0) != range_of(messages, 1)


def test_a_named_or_tool_message_is_fingerprinted_by_its_canonical_json() -> None:
    plain = [{"role": "user", "content": "hi"}]
    named = [{"role": "user", "content": "hi", "name": "ann"}]
    assert check_messages(plain).kinds == "u"
    assert check_messages(named).kinds == "j"
    assert check_messages(named).payloads == [check_messages(named).canonical[0].decode()]
    assert range_of(named) != range_of(plain)
    # Unhashed fields change nothing; a name of None is no name.
    assert range_of([{**plain[0], "id": 7, "metadata": {"a": 1}, "name": None}]) == range_of(plain)


def test_history_checks_each_format_by_its_own_rule() -> None:
    messages = [{"role": "system", "content": "s"}] + [
        {"role": "user", "content": f"m{i}"} for i in range(6)
    ]
    history = History(check_messages(messages))
    assert history.matches(1, 4, history.fingerprint(4))
    assert history.fingerprint(4).startswith("3:")
    # The per-message chain of the first releases (bare hex) is still honoured.
    assert history.matches(1, 4, chain_of([m["content"] for m in messages], 1)[3])
    assert not history.matches(1, 4, chain_of([m["content"] for m in messages], 1)[2])
    # Any other prefixed format is not this version's: never a match.
    assert not history.matches(1, 4, "2:" + history.fingerprint(4)[2:])
    assert history.contradicts(1, 4, "9:" + "0" * 32)


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
    from slimcache.stores import RangeRef

    index = ThreadIndex("t", (RangeRef(1, 9, "f" * 32),), entry())
    assert ThreadIndex.parse(index.to_json(), thread="t") == index
    data = json.loads(index.to_json())
    assert ThreadIndex.parse(index.to_json(), thread="other") is None
    assert ThreadIndex.parse(json.dumps({**data, "ranges": [[1, "x", "f"]]}), thread="t") is None
    assert ThreadIndex.parse(json.dumps({**data, "head": {"v": 1}}), thread="t") is None
    assert ThreadIndex.parse(json.dumps({**data, "v": 0}), thread="t") is None


def test_an_index_read_again_is_not_parsed_again_and_unusable_ones_are_always_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from slimcache.stores import RangeRef

    index = ThreadIndex("memo", (RangeRef(1, 9, "f" * 32),), entry(thread="memo"))
    first = index.to_json()
    again = "".join(list(first))  # equal text, another string object (as each read gives)
    assert again is not first
    parsed = ThreadIndex.parse(first, thread="memo")
    assert parsed == index
    assert ThreadIndex.parse(again, thread="memo") is parsed
    assert ThreadIndex.parse(first, thread="other") is None  # the thread is part of the key
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        for _ in range(2):
            assert ThreadIndex.parse("{not json", thread="memo") is None
    assert caplog.text.count("unusable index entry for thread memo") == 2


def _every_key(keys: ThreadKeys) -> list[str]:
    """Every key ``ThreadKeys`` spells, one of each kind."""
    return [
        keys.index,
        keys.summary(3, 7),
        keys.lease,
        keys.history_head,
        keys.history_chunk("0a1b", 2),
        keys.session,
        keys.link,
        keys.wrapped.index,
        keys.wrapped.summary(0, 4),
        keys.turns,
    ]


# The grammar of slimcache.stores.keys' docstring, one alternative per kind of suffix.
_GRAMMAR = {
    "index": r"index",
    "summary:": r"summary:\d+-\d+",
    "lease": r"lease",
    "messages": r"messages(:[A-Za-z0-9]+:\d+)?",
    "session": r"session",
    "next": r"next",
    "wrapped:index": r"wrapped:index",
    "wrapped:summary:": r"wrapped:summary:\d+-\d+",
    "turns": r"turns",
}


@given(NASTY, st.sampled_from(["", "app", "app:", "a:b"]))
def test_every_key_of_a_thread_is_under_its_prefix_and_in_the_grammar(
    thread_id: str | int, namespace: str
) -> None:
    keys = ThreadKeys(thread_id, namespace)
    spelled = _every_key(keys)
    assert len(set(spelled)) == len(spelled)
    used: set[str] = set()
    for key in spelled:
        assert key.startswith(keys.prefix)
        suffix = key[len(keys.prefix) :]
        kinds = [k for k, rule in _GRAMMAR.items() if re.fullmatch(rule, suffix)]
        assert len(kinds) == 1, suffix
        used.update(kinds)
    assert used == set(_GRAMMAR) == set(SUFFIXES)


def test_the_documented_grammar_lists_exactly_the_suffixes() -> None:
    doc = keys_module.__doc__ or ""
    grammar = doc[doc.index("suffix     =") : doc.index("encoded-id =")]
    quoted = set(re.findall(r'"([^"]+)"', grammar)) - {":", "-"}
    assert quoted == set(SUFFIXES)


def test_the_keys_are_spelled_as_stored() -> None:
    # The storage format: stores written by earlier versions are read with these keys.
    assert _every_key(ThreadKeys("t-1", "ns")) == [
        "ns:thread_t-1:index",
        "ns:thread_t-1:summary:3-7",
        "ns:thread_t-1:lease",
        "ns:thread_t-1:messages",
        "ns:thread_t-1:messages:0a1b:2",
        "ns:thread_t-1:session",
        "ns:thread_t-1:next",
        "ns:thread_t-1:wrapped:index",
        "ns:thread_t-1:wrapped:summary:0-4",
        "ns:thread_t-1:turns",
    ]


# Where a word that is also a suffix is something else: a JSON field, a value compared or
# passed to a function. Anywhere else (concatenated, in an f-string, assigned, listed) it
# would be a key spelled outside the catalogue.
_NOT_A_KEY = (
    ast.Dict,
    ast.Subscript,
    ast.Compare,
    ast.Call,
    ast.keyword,
    ast.MatchValue,
    ast.arguments,  # a parameter's default: passed to a function, as a call's argument is
)


def _spells_a_suffix(text: str, parent: ast.AST | None) -> bool:
    if text == "wrapped:" or any(":" in s and s in text for s in SUFFIXES):
        return True
    if isinstance(parent, ast.JoinedStr):
        return text.strip(":") in SUFFIXES
    return text in SUFFIXES and not isinstance(parent, _NOT_A_KEY)


def _is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _suffix_literals(tree: ast.AST) -> list[tuple[int, str]]:
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text, parent = node.value, parents.get(node)
        if isinstance(parent, ast.Expr):
            continue  # a docstring
        if isinstance(parent, ast.Tuple) and any(_is_number(item) for item in parent.elts):
            continue  # a size, such as ("messages", 50)
        while isinstance(parent, (ast.Tuple, ast.List)):
            parent = parents.get(parent)  # an item of a tuple is where the tuple is
        if _spells_a_suffix(text, parent):
            found.append((node.lineno, text))
    return sorted(found)


def test_no_other_module_spells_a_key_suffix() -> None:
    package = Path(keys_module.__file__ or "").parent.parent
    offenders: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if path == Path(keys_module.__file__ or ""):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(package)}:{n}: {t!r}" for n, t in _suffix_literals(tree)]
    assert offenders == []
    # The scan finds what it looks for.
    planted = (
        'KEY = "session"\nx = prefix + "next"\ny = f"{p}messages:{e}"\nz = "wrapped:index"\n'
        'SIZE: tuple[str, int] = ("messages", 50)\nPAIR = ("messages", "x")\n'
    )
    assert [t for _, t in _suffix_literals(ast.parse(planted))] == [
        "session",
        "next",
        "messages:",
        "wrapped:index",
        "messages",  # beside no number: no size
    ]
