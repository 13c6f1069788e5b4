"""Fuzzing what reaches the compressor: messages, thread ids, namespaces and stored values.

Only documented exceptions may come out: :class:`InvalidInput` for a malformed message or
thread id (raised before anything is written), :class:`ConfigurationError` for a bad
constructor argument. Whatever a thread's keys hold in the store, a value slimcache cannot use
is a cache miss: the call succeeds and the summary is the one the summarizer made in that call.

Keys are always computed with :class:`ThreadKeys`, never spelled out here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import reprlib
from collections.abc import Awaitable, Coroutine, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from slimcache import (
    ConfigurationError,
    InvalidInput,
    KeepMessages,
    MemoryStore,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.messages import check_messages, render_transcript
from slimcache.stores import ThreadKeys
from tests.fakes import CountingStore, RecordingSummarizer, chat

T = TypeVar("T")

THREAD = "fuzzed-thread"
# The text of every summary planted in the store: it must never come back out.
PLANTED = "PLANTED summary, never to be served"


def fuzz(examples: int) -> settings:
    """Settings of one fuzz test: ``examples`` cases, no per-case deadline."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


@dataclass
class FreshSummarizer(RecordingSummarizer):
    """Records its calls, renders every transcript it is given, and numbers its summaries.

    Each summary names this summarizer's call that made it, so a test can tell a summary made
    in this call from anything found in the store.
    """

    returned: list[str] = field(default_factory=list)

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        render_transcript(messages)  # every accepted history must render
        summary = await super().__call__(messages, context)
        if self.result is None:
            summary = f"fresh#{len(self.returned)}: {summary}"
        self.returned.append(summary)
        return summary


def make(summarizer: Any, store: Any, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(4), keep=KeepMessages(2), **options
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def rejected_or(call: Awaitable[T]) -> T | InvalidInput:
    """The call's result, or the InvalidInput it raised (any other exception propagates)."""
    try:
        return await call
    except InvalidInput as exc:
        return exc


class _SafeRepr(reprlib.Repr):
    """Shows fuzzed values briefly: deep, self-referencing or huge values included."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 5
        self.maxstring = 1_000
        self.maxother = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:
            return f"<int of {x.bit_length()} bits>"
        return repr(x)


_show = _SafeRepr().repr


class Case:
    """One fuzzed input, shown briefly when a test fails (deep or huge values included)."""

    def __init__(self, value: Any, note: str = "") -> None:
        self.value = value
        self.note = note

    def __repr__(self) -> str:
        return f"Case({_show(self.value)}{', ' + self.note if self.note else ''})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


# ---------------------------------------------------------------- value strategies

# Every character: lone surrogates, control characters, NUL, non-BMP.
any_char = st.characters(codec=None, exclude_categories=())
texts = st.text(any_char, max_size=24) | st.sampled_from(
    ["", "\x00", "\n", "\ud800", "\udfff\ud800", ":", "~", "%", "%7E", "😀", '"\\']
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | texts
    | st.binary(max_size=4)
    | st.builds(lambda: 10**5000)  # built on demand: strategies are shown with repr()
    | st.builds(object)
)
odd_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(texts, inner, max_size=3)
        | st.dictionaries(st.integers(-2, 2) | st.none() | st.booleans() | texts, inner, max_size=3)
    ),
    max_leaves=8,
)


def deep(depth: int, leaf: Any = "leaf") -> Any:
    """``depth`` lists nested in one another."""
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def cyclic_part() -> dict[str, Any]:
    part: dict[str, Any] = {"type": "custom"}
    part["self"] = [part]
    return part


def cyclic_call() -> dict[str, Any]:
    call: dict[str, Any] = {"id": "c-loop", "function": {"name": "f", "arguments": "{}"}}
    call["function"]["caller"] = call
    return call


odd_fields = (
    odd_values
    | st.sampled_from([50, 98, 99, 100, 101, 5_000, 100_000]).map(deep)
    | st.builds(lambda: [cyclic_part()])
    | st.builds(lambda: [cyclic_call()])
)


# ---------------------------------------------------------------- (a) messages


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid conversation: plain turns, content parts, tool calls and their results."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": "s"})
    for turn in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["plain", "plain", "parts", "tools"]))
        if kind == "plain":
            role = draw(st.sampled_from(["user", "human", "assistant"]))
            message: dict[str, Any] = {"role": role, "content": draw(texts)}
            if draw(st.booleans()):
                message["name"] = draw(texts)
            if draw(st.booleans()):
                message["metadata"] = {"seen": draw(texts)}
            messages.append(message)
        elif kind == "parts":
            parts = draw(
                st.lists(
                    st.sampled_from(["text", "refusal", "image_url", "input_audio"]), max_size=3
                )
            )
            content: list[dict[str, Any]] = []
            for part_type in parts:
                if part_type in ("text", "refusal"):
                    content.append({"type": part_type, part_type: draw(texts)})
                elif part_type == "image_url":
                    content.append({"type": part_type, "image_url": {"url": draw(texts)}})
                else:
                    content.append({"type": part_type, "input_audio": {"data": "AAAA"}})
            messages.append(
                {"role": draw(st.sampled_from(["user", "assistant"])), "content": content}
            )
        else:
            ids = [f"call_{turn}_{n}" for n in range(draw(st.integers(1, 3)))]
            calls = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": draw(texts), "arguments": draw(texts)},
                }
                for call_id in ids
            ]
            messages.append(
                {"role": "assistant", "content": draw(st.none() | texts), "tool_calls": calls}
            )
            for call_id in draw(st.permutations(ids)):
                messages.append({"role": "tool", "content": draw(texts), "tool_call_id": call_id})
    return messages


MESSAGE_FIELDS = ["role", "content", "name", "tool_calls", "tool_call_id", "metadata", "id"]


def _mutate(draw: st.DrawFn, messages: list[Any]) -> str:
    """Break one message of ``messages`` in place; return what was done."""
    index = draw(st.integers(0, len(messages) - 1))
    message = messages[index]
    kind = draw(
        st.sampled_from(
            ["replace", "set", "set", "drop", "part", "part", "call", "call", "mapping"]
        )
    )
    if not isinstance(message, dict):  # broken already
        kind = "replace"
    if kind == "replace":
        messages[index] = draw(odd_values)
    elif kind == "set":
        message[draw(st.sampled_from([*MESSAGE_FIELDS, "type", "text"]))] = draw(odd_fields)
    elif kind == "drop":
        message.pop(draw(st.sampled_from(MESSAGE_FIELDS)), None)
    elif kind == "part":
        content = message.get("content")
        if isinstance(content, list) and content:
            pos = draw(st.integers(0, len(content) - 1))
            part = content[pos]
            key = draw(st.sampled_from(["type", "text", "refusal", "image_url", "data"]))
            if isinstance(part, dict):
                part[key] = draw(odd_fields)
            else:
                content[pos] = draw(odd_fields)
        else:
            message["content"] = [{"type": draw(texts), draw(texts): draw(odd_fields)}]
    elif kind == "call":
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            pos = draw(st.integers(0, len(calls) - 1))
            call = calls[pos]
            target = draw(st.sampled_from(["id", "function", "name", "arguments", "extra"]))
            if not isinstance(call, dict):
                calls[pos] = draw(odd_fields)
            elif target in ("name", "arguments") and isinstance(call.get("function"), dict):
                call["function"][target] = draw(odd_fields)
            else:
                call[target] = draw(odd_fields)
        else:
            message["tool_calls"] = draw(odd_fields)
    else:
        messages[index] = MappingProxyType(message)
    return f"{kind} at {index}"


@st.composite
def message_lists(draw: st.DrawFn) -> Case:
    """A valid conversation, often broken in one to three places, sometimes not a list at all."""
    messages: list[Any] = draw(conversations())
    if draw(st.integers(0, 19)) == 0:
        return Case(
            draw(odd_values | st.builds(lambda: (m for m in [{"role": "user"}]))), "not a list"
        )
    done = [_mutate(draw, messages) for _ in range(draw(st.integers(0, 3))) if messages]
    return Case(messages, "; ".join(done) if done else "valid")


@fuzz(500)
@given(message_lists())
def test_fuzzed_messages_are_compressed_or_rejected_before_any_write(case: Case) -> None:
    messages = case.value
    store = CountingStore()
    summarizer = FreshSummarizer()
    compressor = make(summarizer, store)
    out = run(rejected_or(compressor.compress(messages, thread_id=THREAD)))
    if isinstance(out, InvalidInput):
        assert case.note != "valid", f"a valid conversation was rejected: {out}"
        assert (store.sets, store.deletes) == (0, 0)
        assert out.index is None or 0 <= out.index < len(messages)
        return
    assert isinstance(out, list)
    assert all(isinstance(m, dict) for m in out)
    pinned = check_messages(messages).pinned
    calls = len(summarizer.calls)
    if calls:
        assert summarizer.returned[-1] in out[pinned]["content"]
    again = run(compressor.compress(messages, thread_id=THREAD))
    assert len(summarizer.calls) == calls, "replaying the same request summarized again"
    assert len(again) == len(out)
    if calls:
        assert again[pinned] == out[pinned]


# ---------------------------------------------------------------- (b) thread ids

huge_ints = st.builds(
    lambda sign, digits: sign * (10**digits + 7),
    st.sampled_from([1, -1]),
    st.sampled_from([999, 1_000, 1_001, 4_300, 4_301, 6_000]),
)
thread_ids = st.one_of(
    texts,
    st.text(any_char, min_size=1, max_size=6).map(lambda s: s * 40),  # long: digested
    st.integers(),
    huge_ints,
    st.builds(str, huge_ints.filter(lambda n: abs(n) < 10**4300)),
    st.booleans(),
    st.floats(),
    st.none(),
    st.binary(max_size=8),
    st.lists(texts, max_size=2),
    st.builds(object),
)


def documented_thread_id_type(value: object) -> bool:
    return value is None or (isinstance(value, (str, int)) and not isinstance(value, bool))


@fuzz(600)
@example(Case(10**5000))
@example(Case(-(10**4301)))
@example(Case("\ud800"))
@example(Case(""))
@given(st.builds(Case, thread_ids))
def test_fuzzed_thread_ids_are_cached_under_or_rejected(case: Case) -> None:
    thread_id = case.value
    store = CountingStore()
    summarizer = FreshSummarizer()
    compressor = make(summarizer, store)
    try:
        out = run(compressor.compress(chat(8), thread_id=thread_id))
    except InvalidInput:
        assert (store.sets, store.deletes) == (0, 0)
        return
    assert documented_thread_id_type(thread_id), "an id of an undocumented type was accepted"
    assert len(summarizer.calls) == 1
    assert summarizer.returned[-1] in out[1]["content"]
    again = run(compressor.compress(chat(8), thread_id=thread_id))
    if thread_id is None:  # nothing is cached without a thread id
        assert store.sets == 0
        assert len(summarizer.calls) == 2
    else:
        assert len(summarizer.calls) == 1, "replaying the same thread summarized again"
        assert again[1] == out[1]


def same_thread(a: str | int, b: str | int) -> bool:
    """Ids name the same thread when their text is the same (7 and "7" do)."""
    return str(a) == str(b)


def same_namespace(a: str, b: str) -> bool:
    """A namespace given without its trailing ``:`` gets one: "app" and "app:" are the same."""

    def with_colon(namespace: str) -> str:
        return namespace if not namespace or namespace.endswith(":") else namespace + ":"

    return with_colon(a) == with_colon(b)


def isolated(
    first: tuple[str, str | int], second: tuple[str, str | int]
) -> tuple[list[Any], list[Any], FreshSummarizer, FreshSummarizer] | None:
    """Compress one conversation for two (namespace, thread id) pairs sharing one store.

    Returns the outputs and summarizers after checking that each pair summarized for itself
    and that the first pair's cache survived the second pair's writes; ``None`` when either
    pair is rejected.
    """
    store = MemoryStore()
    summarizers = FreshSummarizer(), FreshSummarizer()
    try:
        compressors = [
            make(summarizer, store, namespace=namespace)
            for summarizer, (namespace, _) in zip(summarizers, (first, second), strict=True)
        ]
    except ConfigurationError:
        return None
    messages = chat(8)
    outs: list[list[Any]] = []
    for compressor, (_, thread_id) in zip(compressors, (first, second), strict=True):
        try:
            outs.append(run(compressor.compress(messages, thread_id=thread_id)))
        except InvalidInput:
            return None
    for summarizer, out in zip(summarizers, outs, strict=True):
        assert len(summarizer.calls) == 1, "served a summary cached for another thread"
        assert summarizer.returned[-1] in out[1]["content"]
    again = run(compressors[0].compress(messages, thread_id=first[1]))
    assert len(summarizers[0].calls) == 1, "another thread's writes destroyed this thread's cache"
    assert again[1] == outs[0][1]
    return outs[0], outs[1], summarizers[0], summarizers[1]


ids_for_isolation = (
    texts.filter(bool)
    | st.integers(-(10**30), 10**30)
    | st.text(any_char, min_size=1, max_size=4).map(lambda s: s * 50)
    | st.sampled_from(["7", 7, "a", "a:", "thread_a", "thread_a:index", "%61", "~", "%7E"])
)


@fuzz(300)
@given(st.builds(Case, ids_for_isolation), st.builds(Case, ids_for_isolation))
def test_distinct_thread_ids_never_share_a_summary(first: Case, second: Case) -> None:
    assume(not same_thread(first.value, second.value))
    isolated(("", first.value), ("", second.value))


# ---------------------------------------------------------------- (c) namespaces

# Pieces that make namespaces and ids run into each other's key grammar.
key_pieces = st.sampled_from(
    ["", ":", "::", "thread_", "a", "b", "_", "-", ".", "%", "%3A", "~", "index", "summary:1-6"]
)
joined = st.lists(key_pieces, max_size=4).map("".join)
namespaces = st.one_of(
    texts,
    joined,
    st.text(any_char, min_size=1, max_size=8).map(lambda s: s * 30),
    st.none(),
    st.integers(),
    st.binary(max_size=4),
    st.lists(texts, max_size=2),
)


@fuzz(400)
@given(st.builds(Case, namespaces))
def test_fuzzed_namespaces_work_or_are_configuration_errors(case: Case) -> None:
    namespace = case.value
    summarizer = FreshSummarizer()
    store = MemoryStore()
    try:
        compressor = make(summarizer, store, namespace=namespace)
    except ConfigurationError:
        return
    assert isinstance(namespace, str), "a namespace that is not a string was accepted"
    out = run(compressor.compress(chat(8), thread_id=THREAD))
    assert summarizer.returned[-1] in out[1]["content"]
    again = run(compressor.compress(chat(8), thread_id=THREAD))
    assert len(summarizer.calls) == 1, "replaying the same request summarized again"
    assert again[1] == out[1]


pairs = st.tuples(
    joined | texts | st.sampled_from(["app", "app:", "thread_", "thread_a:"]),
    joined.filter(bool) | texts.filter(bool) | st.integers(-5, 5),
)


def distinct(first: tuple[str, str | int], second: tuple[str, str | int]) -> bool:
    return not (same_namespace(first[0], second[0]) and same_thread(first[1], second[1]))


@fuzz(600)
@example(("", "thread_b"), ("thread_", "b"))
@example(("a", "b"), ("", "a:thread_b"))
@example(("x:", "y"), ("x:thread_y:", "z"))
@given(pairs, pairs)
def test_distinct_namespace_and_thread_pairs_have_disjoint_keys(
    first: tuple[str, str | int], second: tuple[str, str | int]
) -> None:
    assume(distinct(first, second))
    try:
        keys = [ThreadKeys(thread_id, namespace) for namespace, thread_id in (first, second)]
    except (ConfigurationError, InvalidInput):
        return
    ranges = [(0, 0), (1, 6), (1, 10), (0, 12)]
    owned = [{k.index, *(k.summary(s, e) for s, e in ranges)} for k in keys]
    assert owned[0].isdisjoint(owned[1])


@fuzz(200)
@example(("", "thread_b"), ("thread_", "b"))
@example(("a", "b"), ("", "a:thread_b"))
@given(pairs, pairs)
def test_distinct_namespace_and_thread_pairs_never_share_a_summary(
    first: tuple[str, str | int], second: tuple[str, str | int]
) -> None:
    assume(distinct(first, second))
    isolated(first, second)


def test_equal_namespaces_share_the_cache() -> None:
    """The other side of the isolation tests: "app" and "app:" are one namespace."""
    store = MemoryStore()
    first, second = FreshSummarizer(), FreshSummarizer()
    run(make(first, store, namespace="app").compress(chat(8), thread_id=7))
    out = run(make(second, store, namespace="app:").compress(chat(8), thread_id="7"))
    assert second.calls == []
    assert first.returned[-1] in out[1]["content"]


# ---------------------------------------------------------------- (d) stored values


@dataclass(frozen=True)
class Reference:
    """What a clean run stores for ``chat(8)`` under THREAD, its summary being PLANTED."""

    index_raw: str
    range_raw: str
    span: tuple[int, int]


@functools.cache
def reference() -> Reference:
    store = MemoryStore()
    compressor = make(FreshSummarizer(result=PLANTED), store)
    result = run(compressor.compress_detailed(chat(8), thread_id=THREAD))
    assert result.summary == PLANTED
    assert result.summary_range is not None
    start, end = result.summary_range
    keys = ThreadKeys(THREAD)
    index_raw = run(store.get(keys.index))
    range_raw = run(store.get(keys.summary(start, end)))
    assert index_raw is not None
    assert range_raw is not None
    return Reference(index_raw, range_raw, (start, end))


def family(value: object) -> str:
    """JSON type of a value; ints and floats are both numbers."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(any_char, max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value``, the root excluded."""
    found: list[tuple[Any, ...]] = []
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in items:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


@st.composite
def envelopes_with_a_wrong_type(draw: st.DrawFn) -> str:
    """A stored envelope made valid, whose one field then gets a value of another JSON type."""
    raw = draw(st.sampled_from([reference().index_raw, reference().range_raw]))
    data = json.loads(raw)
    path = draw(st.sampled_from(paths(data)))
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    old = parent[path[-1]]
    parent[path[-1]] = draw(json_values.filter(lambda new: family(new) != family(old)))
    return json.dumps(data, ensure_ascii=False)


@st.composite
def truncated_envelopes(draw: st.DrawFn) -> str:
    raw = draw(st.sampled_from([reference().index_raw, reference().range_raw]))
    return raw[: draw(st.integers(0, len(raw) - 1))]


@st.composite
def envelope_shaped_json(draw: st.DrawFn) -> str:
    """JSON objects that start like an envelope and go wrong anywhere after."""
    formats = [
        json.loads(reference().index_raw)["format"],
        json.loads(reference().range_raw)["format"],
    ]
    data = {
        "format": draw(st.sampled_from(formats) | st.text(max_size=5)),
        "v": draw(st.sampled_from([1, 2, 0, -1, "1", None])),
        "thread": draw(st.sampled_from([ThreadKeys(THREAD).encoded, THREAD, ""])),
        **draw(
            st.dictionaries(st.sampled_from(sorted(json.loads(reference().index_raw))), json_values)
        ),
        **draw(
            st.dictionaries(st.sampled_from(sorted(json.loads(reference().range_raw))), json_values)
        ),
    }
    return json.dumps(data, ensure_ascii=False)


DEEP_VALUES = [
    "[" * 100_000,
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 100_000,
    '{"format":"slimcache.index","v":1,"ranges":' + "[" * 100_000,
    "[" * 5_000 + "]" * 5_000,
    "9" * 5_000,
    '{"v":1,"start":' + "9" * 5_000 + "}",
]

stored_values = st.one_of(
    st.text(any_char, max_size=80),
    truncated_envelopes(),
    st.sampled_from(DEEP_VALUES),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
    envelope_shaped_json(),
    envelopes_with_a_wrong_type(),
)


async def _plant_and_compress(
    index_raw: str | None, range_raw: str | None
) -> tuple[list[dict[str, Any]], FreshSummarizer]:
    store = MemoryStore()
    keys = ThreadKeys(THREAD)
    messages = chat(8)
    if index_raw is not None:
        await store.set(keys.index, index_raw)
    if range_raw is not None:
        for end in range(1, len(messages)):
            await store.set(keys.summary(1, end), range_raw)
    summarizer = FreshSummarizer()
    out = await make(summarizer, store).compress(messages, thread_id=THREAD)
    return out, summarizer


def assert_summarized_here(out: list[dict[str, Any]], summarizer: FreshSummarizer) -> None:
    assert summarizer.returned, "a stored value was served instead of summarizing"
    assert summarizer.returned[-1] in out[1]["content"]
    assert PLANTED not in out[1]["content"]


@fuzz(500)
@example(Case("[" * 100_000), Case(None))
@example(Case(None), Case("[" * 100_000))
@given(st.builds(Case, st.none() | stored_values), st.builds(Case, st.none() | stored_values))
def test_unusable_stored_values_are_misses(index_raw: Case, range_raw: Case) -> None:
    out, summarizer = run(_plant_and_compress(index_raw.value, range_raw.value))
    assert_summarized_here(out, summarizer)


@fuzz(200)
@given(
    st.builds(Case, envelopes_with_a_wrong_type()), st.builds(Case, envelopes_with_a_wrong_type())
)
def test_envelopes_with_a_wrong_type_are_misses(index_raw: Case, range_raw: Case) -> None:
    out, summarizer = run(_plant_and_compress(index_raw.value, range_raw.value))
    assert_summarized_here(out, summarizer)


# One value of each JSON type: for every field, those of another type than its own are tried.
ONE_OF_EACH_TYPE = [None, True, False, 0, 1, 1.0, -1.5, "", "1", [], [1], {}, {"v": 1}]


def every_field_with_a_wrong_type(raw: str) -> list[tuple[str, Any, str]]:
    """Copies of envelope ``raw``, each with one field replaced by a value of another type.

    Returns ``(field path, value put there, the copy)`` triples.
    """
    variants: list[tuple[str, Any, str]] = []
    for path in paths(json.loads(raw)):
        for value in ONE_OF_EACH_TYPE:
            data = json.loads(raw)
            parent = data
            for key in path[:-1]:
                parent = parent[key]
            if family(value) != family(parent[path[-1]]):
                parent[path[-1]] = value
                where = ".".join(map(str, path))
                variants.append((where, value, json.dumps(data, ensure_ascii=False)))
    return variants


@pytest.mark.parametrize("where", ["index", "range"])
def test_every_field_of_an_envelope_with_a_wrong_type_is_a_miss(where: str) -> None:
    ref = reference()
    raw = ref.index_raw if where == "index" else ref.range_raw
    variants = every_field_with_a_wrong_type(raw)
    assert len(variants) > 50
    served: list[tuple[str, Any]] = []
    for path, value, variant in variants:
        index_raw, range_raw = (variant, None) if where == "index" else (None, variant)
        out, summarizer = run(_plant_and_compress(index_raw, range_raw))
        if not summarizer.returned or PLANTED in out[1]["content"]:
            served.append((path, value))
    assert served == [], "envelopes served although these fields had the wrong type"


@pytest.mark.parametrize("where", ["index", "range"])
def test_a_valid_planted_envelope_is_served(where: str) -> None:
    """The other side of the tests above: planting reaches the keys the compressor reads."""
    ref = reference()
    index_raw = ref.index_raw if where == "index" else None
    range_raw = ref.range_raw if where == "range" else None
    store = MemoryStore()
    keys = ThreadKeys(THREAD)
    if index_raw is not None:
        run(store.set(keys.index, index_raw))
    if range_raw is not None:
        run(store.set(keys.summary(*ref.span), range_raw))
    summarizer = FreshSummarizer()
    out = run(make(summarizer, store).compress(chat(8), thread_id=THREAD))
    assert summarizer.calls == []
    assert PLANTED in out[1]["content"]
