"""Message validation, token counting and transcripts."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimcache import (
    InvalidInput,
    KeepMessages,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    approx_tokens,
)
from slimcache.messages.checks import MAX_NESTING, _canonical, check_messages, ids_as_records
from slimcache.messages.tokens import (
    DEFAULT_MESSAGE_OVERHEAD,
    NON_TEXT_PART_TOKENS,
    LazyTokens,
    RememberingCounter,
    count_message_tokens,
)
from slimcache.messages.transcript import message_text, render_transcript
from slimcache.messages.types import JSON_KIND, ROLES
from tests.fakes import CountingStore, RecordingSummarizer

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("messages", "index", "rule"),
    [
        ("hello", None, "messages must be a list"),
        ([{"role": "user", "content": "hi"}, "oops"], 1, "each message must be a dict"),
        ([{"role": "robot", "content": "x"}], 0, "unknown role 'robot'"),
        ([{"content": "x"}], 0, "unknown role None"),
        ([{"role": "user"}], 0, "a user message needs 'content'"),
        ([{"role": "user", "content": None}], 0, "needs 'content'"),
        (
            [{"role": "assistant", "content": None}],
            0,
            "an? assistant message needs|needs 'content'",
        ),
        ([{"role": "user", "content": 42}], 0, "must be a string or a list of parts, got int"),
        ([{"role": "user", "content": [{"text": "no type"}]}], 0, "content part 0 must be a dict"),
        ([{"role": "user", "content": [{"type": "text"}]}], 0, "text content part 0 needs"),
        ([{"role": "user", "content": "x", "name": 5}], 0, "'name' must be a string"),
        ([{"role": "user", "content": "x", "metadata": []}], 0, "'metadata' must be a dict"),
        ([{"role": "user", "content": "x", "tool_calls": [CALL]}], 0, "only assistant messages"),
        (
            [{"role": "assistant", "content": "x", "tool_calls": {}}],
            0,
            "'tool_calls' must be a list",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"id": ""}]}],
            0,
            "non-empty string 'id'",
        ),
        ([{"role": "assistant", "tool_calls": [CALL, CALL]}], 0, "repeats the id 'c1'"),
        ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {}}]}], 0, "string 'name'"),
        ([{"role": "tool", "content": "r"}], 0, "needs a string 'tool_call_id'"),
        ([{"role": "tool", "content": "r", "tool_call_id": "zz"}], 0, "answers no tool call"),
        (
            [
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "user", "content": "interrupt"},
                {"role": "tool", "content": "r", "tool_call_id": "c1"},
            ],
            2,
            "answers no tool call",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "content": "r", "tool_call_id": "c1"},
                {"role": "tool", "content": "again", "tool_call_id": "c1"},
            ],
            2,
            "answers no tool call",
        ),
        ([{"role": "user", "content": "x", "extra": object()}], None, None),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": object()}]}], 0, "JSON"),
    ],
)
def test_bad_messages_name_index_and_rule(
    messages: Any, index: int | None, rule: str | None
) -> None:
    if rule is None:  # unknown extra keys are allowed and not hashed
        check_messages(messages)
        return
    with pytest.raises(InvalidInput, match=rule) as caught:
        check_messages(messages)
    assert caught.value.index == index
    if index is not None:
        assert str(caught.value).startswith(f"messages[{index}]: ")


def test_valid_conversation_with_parts_human_and_parallel_tools() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {
            "role": "human",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "c2"}]},
        {"role": "tool", "content": "r1", "tool_call_id": "c2"},
        {"role": "tool", "content": "r2", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done", "id": 7, "metadata": {"k": 1}},
    ]
    checked = check_messages(messages)
    assert checked.pinned == 1
    assert checked.unit_end == [0, 1, 4, 4, 4, 5]
    transcript = render_transcript(messages[1:])
    assert "user: look\n[image: https://x/y.png]" in transcript
    assert "-> calls lookup({}) [c1]" in transcript
    assert "tool result [c2]: r1" in transcript


def test_human_hashes_like_user() -> None:
    a = check_messages([{"role": "human", "content": "hi"}])
    b = check_messages([{"role": "user", "content": "hi"}])
    assert a.canonical == b.canonical


def test_ai_is_another_spelling_of_assistant() -> None:
    # LangChain's message type and synaptic's Message::ai both say "ai".
    answer: dict[str, Any] = {"role": "ai", "content": None, "tool_calls": [CALL]}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}, answer]
    messages.append({"role": "tool", "content": "r", "tool_call_id": "c1"})
    as_assistant = [messages[0], {**answer, "role": "assistant"}, messages[2]]
    assert check_messages(messages).canonical == check_messages(as_assistant).canonical
    assert check_messages(messages).unit_end == [0, 2, 2]
    assert "assistant:" in render_transcript([{"role": "ai", "content": "sure"}])
    with pytest.raises(InvalidInput, match="only assistant messages may carry 'tool_calls'"):
        check_messages([{"role": "human", "content": "x", "tool_calls": [CALL]}])


def test_token_counting() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2
    assert count_message_tokens({"role": "user", "content": "abcdefgh"}) == 2 + 4
    assert count_message_tokens({"role": "user", "content": "abcdefgh"}, len, 0) == 8
    image = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:" + "A" * 10_000}}],
    }
    assert count_message_tokens(image, overhead=0) == NON_TEXT_PART_TOKENS
    with_call = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert count_message_tokens(with_call, overhead=0) > 0


@given(st.lists(st.text(max_size=30), min_size=1, max_size=12))
def test_any_text_messages_validate_and_count(texts: list[str]) -> None:
    messages = [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(texts)]
    checked = check_messages(messages)
    assert len(checked.canonical) == len(texts)
    assert checked.tokens == [4 + approx_tokens(t) for t in texts]


@given(
    st.lists(
        st.one_of(st.integers(0, 40), st.integers(1018, 1030), st.integers(4090, 4100)),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 50),
)
def test_plain_turns_of_any_length_count_as_approx_tokens_says(
    lengths: list[int], overhead: int
) -> None:
    # Short texts are counted by table lookup, longer ones by arithmetic: both as approx_tokens.
    texts = ["\u00e9" * length for length in lengths]
    messages = [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(texts)]
    checked = check_messages(messages, approx_tokens, overhead)
    assert list(checked.tokens) == [overhead + approx_tokens(t) for t in texts]


# ---------------------------------------------------------------- nesting, cycles, odd values


def deep(depth: int) -> Any:
    """``depth`` lists nested in one another."""
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def nested_content(depth: int) -> list[Any]:
    """A content list whose lists and dicts nest exactly ``depth`` levels (the list is level 1)."""
    data: Any = "leaf"
    for _ in range(depth - 2):
        data = [data]
    return [{"type": "custom", "data": data}]


def nested_calls(depth: int) -> list[Any]:
    """Tool calls that nest ``depth`` levels: list, call dict, then lists in an extra field."""
    data: Any = 0
    for _ in range(depth - 2):
        data = {"k": data}
    return [{**CALL, "extra": data}]


def test_nesting_up_to_the_limit_is_accepted_and_every_path_handles_it() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": nested_content(MAX_NESTING)},
        {"role": "assistant", "content": None, "tool_calls": nested_calls(MAX_NESTING)},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
    ]
    checked = check_messages(messages)
    assert [old_canonical(m, m["role"], 0) for m in messages] == checked.canonical
    assert checked.tokens == [count_message_tokens(m) for m in messages]
    assert "[custom part]" in render_transcript(messages)
    assert message_text(messages[0]) == "[custom part]"


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 900, 5_000, 100_000])
@pytest.mark.parametrize(
    ("make_message", "field"),
    [
        (lambda depth: {"role": "user", "content": nested_content(depth)}, "content"),
        (
            lambda depth: {"role": "assistant", "content": None, "tool_calls": nested_calls(depth)},
            "tool_calls",
        ),
        (
            lambda depth: {"role": "assistant", "content": nested_content(depth), "name": "bot"},
            "content",
        ),
    ],
)
def test_too_deep_a_message_is_invalid_input_naming_index_and_rule(
    make_message: Any, field: str, depth: int
) -> None:
    messages = [{"role": "user", "content": "first"}, make_message(depth)]
    with pytest.raises(InvalidInput) as caught:
        check_messages(messages)
    assert caught.value.index == 1
    assert caught.value.rule == f"'{field}' nests lists and dicts deeper than {MAX_NESTING} levels"


def self_referencing_part() -> dict[str, Any]:
    part: dict[str, Any] = {"type": "custom"}
    part["again"] = [part]
    return part


def self_referencing_list() -> list[Any]:
    parts: list[Any] = [{"type": "text", "text": "x"}]
    parts[0]["all"] = parts
    return parts


def self_referencing_call() -> dict[str, Any]:
    call: dict[str, Any] = {**CALL, "function": {"name": "f", "arguments": "{}"}}
    call["function"]["caller"] = call
    return call


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "user", "content": [self_referencing_part()]}, "content"),
        ({"role": "user", "content": self_referencing_list()}, "content"),
        ({"role": "assistant", "tool_calls": [self_referencing_call()]}, "tool_calls"),
    ],
)
def test_a_reference_cycle_is_invalid_input_naming_index_and_rule(
    message: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_messages([{"role": "system", "content": "s"}, message])
    assert caught.value.index == 1
    assert caught.value.rule == f"'{field}' contains a reference cycle"


class ItemsOnly(dict[str, Any]):
    """A dict whose items() is not its storage: the JSON encoder reads items()."""

    def __init__(self, hidden: Any) -> None:
        super().__init__(stored="not what is encoded")
        self.hidden = hidden

    def items(self) -> Any:
        return [("hidden", self.hidden)]


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5_000])
def test_nesting_is_measured_on_what_the_encoder_reads(depth: int) -> None:
    deep: Any = "leaf"
    for _ in range(depth - 3):  # under the content list, the part and the dict subclass
        deep = [deep]
    message = {"role": "user", "content": [{"type": "custom", "data": ItemsOnly(deep)}]}
    with pytest.raises(InvalidInput, match="'content' nests lists and dicts deeper than"):
        check_messages([message])
    shallow = {"role": "user", "content": [{"type": "custom", "data": ItemsOnly([[1]])}]}
    assert check_messages([shallow]).canonical == [old_canonical(shallow, "user", 0)]


def test_fields_that_are_not_hashed_may_hold_anything() -> None:
    """metadata and unknown keys are handed back as given: never walked, encoded or hashed."""
    deep: Any = {}
    for _ in range(5_000):
        deep = {"d": deep}
    looped: dict[str, Any] = {}
    looped["self"] = looped
    plain: dict[str, Any] = {"role": "user", "content": "hi"}
    odd = {**plain, "metadata": {"deep": deep, "loop": looped}, "extra": [deep, looped]}
    assert check_messages([odd]).canonical == check_messages([plain]).canonical


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        (
            {"role": "user", "content": [{"type": "refusal", "refusal": ["no"]}]},
            "refusal content part 0 needs a string 'refusal'",
        ),
        (
            {"role": "assistant", "content": [{"type": "refusal", "text": "no"}]},
            "refusal content part 0 needs a string 'refusal'",
        ),
        (
            {"role": "user", "content": [{"type": "text", "text": None}]},
            "text content part 0 needs a string 'text'",
        ),
        (
            {"role": "user", "content": [{"type": "custom", "data": {1: "a", "b": 2}}]},
            "message must be JSON-serializable",
        ),
        (
            {"role": "user", "content": [{"type": "custom", "data": {(1, 2): "tuple key"}}]},
            "message must be JSON-serializable",
        ),
        (
            {"role": "user", "content": [{"type": "custom", "n": 10**5000}]},
            "message must be JSON-serializable",
        ),
        (
            {"role": "user", "content": [{"type": "custom", "b": b"bytes"}]},
            "message must be JSON-serializable",
        ),
        ({"role": "user", "content": "x", "metadata": "notes"}, "'metadata' must be a dict"),
        ({"role": "user", "content": "x", "metadata": [("k", 1)]}, "'metadata' must be a dict"),
        ({"role": "user", "content": "x", "id": True}, "'id' must be a string or an integer"),
        ({"role": "user", "content": "x", "id": 1.5}, "'id' must be a string or an integer"),
        ({"role": "user", "content": "x", "id": ["a"]}, "'id' must be a string or an integer"),
        ({"role": "user", "content": "x", "id": {"a": 1}}, "'id' must be a string or an integer"),
        ({"role": "user", "content": "x", "id": b"a"}, "'id' must be a string or an integer"),
        ({"role": "user", "content": "x", "name": ["n"]}, "'name' must be a string"),
        ({"role": "user", "content": "x", "tool_call_id": 3}, "'tool_call_id' must be a string"),
        ({"role": "user", "content": b"bytes"}, "must be a string or a list of parts, got bytes"),
        ({"role": "user", "content": ("a", "b")}, "must be a string or a list of parts, got tuple"),
        ({"role": ["user"], "content": "x"}, "unknown role <list>"),
        ({"role": deep(5_000), "content": "x"}, "unknown role <list>"),
        ({"role": 10**5000, "content": "x"}, "unknown role <int>"),
        ({"role": "r" * 10_000, "content": "x"}, "unknown role 'rrrr[r]*\\.\\.\\.' \\(expected"),
        ({"role": "\ud800", "content": "x"}, r"unknown role '\\ud800'"),
    ],
)
def test_odd_values_are_invalid_input(message: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidInput, match=rule) as caught:
        check_messages([{"role": "user", "content": "ok"}, message])
    assert caught.value.index == 1


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "lone \ud800 surrogate", "name": "\udfff"},
        {"role": "user", "content": [{"type": "text", "text": "\ud83d"}]},
        {"role": "user", "content": [{"type": "custom", "data": {1: "a", 2.5: "b", -3: 0}}]},
        {"role": "user", "content": [{"type": "custom", "data": {None: 0}, "more": {True: 1}}]},
        {"role": "user", "content": [{"type": "custom", "v": [math.nan, math.inf, -math.inf]}]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no \ud800"}]},
        {"role": "user", "content": "x", "id": 10**5000, "metadata": {"k": object()}},
        {"role": "user", "content": "x", "id": "msg_1", "metadata": None},
    ],
)
def test_odd_but_valid_values_are_accepted_and_hashed_as_before(message: dict[str, Any]) -> None:
    checked = check_messages([message])
    assert checked.canonical == [old_canonical(message, message["role"], 0)]
    assert checked.canonical == check_messages([message]).canonical
    render_transcript([message])  # every accepted message renders


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "tool_calls": [{**CALL, "id": "c" * 100_000}] * 2}],
        [{"role": "tool", "content": "r", "tool_call_id": "c" * 100_000}],
        [{"role": "r" * 100_000, "content": "x"}],
    ],
)
def test_rules_quote_long_values_briefly(messages: list[dict[str, Any]]) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_messages(messages)
    assert len(str(caught.value)) < 200


def test_refusal_parts_are_shown_and_counted() -> None:
    message = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]}
    check_messages([message])
    assert message_text(message) == "I can't."
    assert count_message_tokens(message, len, 0) == len("I can't.")


async def test_invalid_messages_write_nothing() -> None:
    store = CountingStore()
    compressor = SummarizeCompressor(
        RecordingSummarizer(), store, trigger=MessageThreshold(2), keep=KeepMessages(1)
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"m{i}"} for i in range(6)]
    messages.append({"role": "user", "content": nested_content(5_000)})
    with pytest.raises(InvalidInput, match=r"^messages\[6\]: 'content' nests"):
        await compressor.compress(messages, thread_id="t")
    assert (store.gets, store.sets, store.deletes) == (0, 0, 0)


# ---------------------------------------------------------------- canonical bytes stay the same


def old_canonical(message: Message, role: str, index: int) -> bytes:
    """The canonical encoding as every earlier version made it; stored fingerprints hash this.

    ("ai", which earlier versions refused, is encoded as the "assistant" it stands for.)
    """
    view = {
        "role": {"human": "user", "ai": "assistant"}.get(role, role),
        "content": message.get("content"),
        "name": message.get("name"),
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": message.get("tool_call_id"),
    }
    try:
        text = json.dumps(view, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"message must be JSON-serializable ({exc})", index=index) from None
    return text.encode("utf-8", "surrogatepass")


def old_tokens(message: Message, counter: Any, overhead: int) -> int:
    """Token count as every earlier version made it."""
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
        total += counter(json.dumps(tool_calls, ensure_ascii=False, sort_keys=True))
    name = message.get("name")
    if isinstance(name, str):
        total += counter(name)
    return total


class Text(str):
    """A str subclass, as some frameworks hand over."""


# Every character, lone surrogates and control characters included, plus the ones JSON escapes.
any_char = st.characters(codec=None, exclude_categories=())
any_text = st.text(any_char, max_size=40) | st.sampled_from(
    ['"', "\\", "\n\r\t\b\f", "\x00\x1f\x7f", "\u2028\u2029", "\ud800", "\udfff\ud800", "😀"]
)
text_like = any_text | any_text.map(Text)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | text_like
)
json_keys = text_like | st.integers(-5, 5) | st.floats(-2, 2) | st.booleans() | st.none()
# Values json.dumps encodes (string keys only), and values that may break it (mixed key types).
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(text_like, inner, max_size=4)
    ),
    max_leaves=12,
)
odd_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(json_keys, inner, max_size=3)
    ),
    max_leaves=12,
)
parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": text_like}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": text_like}),
    st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": any_text})}
    ),
    st.fixed_dictionaries({"type": text_like}, optional={"data": json_values, "text": json_values}),
)
calls = st.fixed_dictionaries(
    {
        "id": text_like,
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": text_like}, optional={"arguments": text_like, "extra": json_values}
        ),
    },
    optional={"extra": json_values},
)
maybe_text = st.none() | text_like
roles = st.sampled_from(sorted(ROLES)) | st.sampled_from(sorted(ROLES)).map(Text)


@st.composite
def any_message(draw: st.DrawFn) -> dict[str, Any]:
    """Plain and complex messages, and fields of odd types: anything _canonical may be given."""
    message: dict[str, Any] = {"role": draw(roles)}
    choices = {
        "content": text_like | st.lists(parts, max_size=4) | odd_values,
        "name": maybe_text | odd_values,
        "tool_call_id": maybe_text | odd_values,
        "tool_calls": st.none() | st.lists(calls, max_size=3) | odd_values,
        "metadata": odd_values,
        "id": odd_values,
    }
    plain = draw(st.booleans())
    for key, values in choices.items():
        if plain and key in ("tool_calls", "tool_call_id", "metadata", "id"):
            continue
        if draw(st.booleans()):
            message[key] = draw(text_like if plain and key == "content" else values)
    return message


@settings(max_examples=1_000, deadline=None)
@given(any_message())
def test_canonical_bytes_are_those_of_every_earlier_version(message: dict[str, Any]) -> None:
    role = message["role"]
    try:
        expected = old_canonical(message, role, 3)
    except InvalidInput:
        with pytest.raises(InvalidInput) as caught:
            _canonical(message, role, 3)
        assert caught.value.index == 3
        return
    assert _canonical(message, role, 3).encode("utf-8", "surrogatepass") == expected


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid conversations: plain turns, parts, and assistant tool calls with their results."""
    messages: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["plain", "parts", "tools"]))
        extras = draw(
            st.fixed_dictionaries(
                {}, optional={"name": maybe_text, "metadata": st.none() | st.just({"k": [1]})}
            )
        )
        if kind == "plain":
            role = draw(st.sampled_from(["system", "developer", "user", "human", "assistant"]))
            messages.append({"role": role, "content": draw(text_like), **extras})
        elif kind == "parts":
            messages.append(
                {"role": "user", "content": draw(st.lists(parts, max_size=3)), **extras}
            )
        else:
            ids = [f"call_{turn}_{n}" for n in range(draw(st.integers(1, 3)))]
            tool_calls = [{**draw(calls), "id": call_id} for call_id in ids]
            messages.append(
                {"role": "assistant", "content": draw(maybe_text), "tool_calls": tool_calls}
            )
            for call_id in draw(st.permutations(ids)):
                messages.append(
                    {"role": "tool", "content": draw(text_like), "tool_call_id": call_id}
                )
    return messages


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_checked_conversations_keep_their_bytes_and_tokens(messages: list[dict[str, Any]]) -> None:
    for counter, overhead in ((approx_tokens, DEFAULT_MESSAGE_OVERHEAD), (len, 0)):
        checked = check_messages(messages, counter, overhead)
        assert checked.messages is messages
        assert checked.canonical == [old_canonical(m, m["role"], i) for i, m in enumerate(messages)]
        assert checked.tokens == [old_tokens(m, counter, overhead) for m in messages]


_PLAIN_TURNS = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "developer", "user", "human", "assistant"]),
            "content": st.text(),
        }
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_PLAIN_TURNS)
def test_plain_lists_checked_in_bulk_match_the_message_by_message_path(
    messages: list[dict[str, Any]],
) -> None:
    bulk = check_messages(messages)
    # Read-only mappings that are not dicts take the message-by-message path.
    one_by_one = check_messages([MappingProxyType(m) for m in messages])
    assert bulk.canonical == one_by_one.canonical
    assert bulk.kinds == one_by_one.kinds
    assert list(bulk.payloads) == list(one_by_one.payloads)
    assert bulk.tokens == one_by_one.tokens
    assert bulk.pinned == one_by_one.pinned
    assert bulk.unit_end == one_by_one.unit_end
    counted = check_messages(messages, lambda text: len(text.split()), 2)
    assert (
        counted.tokens
        == check_messages(
            [{**m, "id": 0} for m in messages], lambda text: len(text.split()), 2
        ).tokens
    )


_TURNS_WITH_EXTRAS = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text()},
        optional={
            "id": st.one_of(st.none(), st.text(), st.integers(), st.booleans(), st.floats()),
            "metadata": st.one_of(
                st.none(),
                st.dictionaries(st.text(), st.integers()),
                st.dictionaries(st.text(), st.integers()).map(MappingProxyType),
                st.lists(st.integers()),
            ),
            # Hashed, so a list holding one must leave the bulk path.
            "name": st.text(max_size=3),
            # Neither hashed nor checked: taken by the message-by-message path only.
            "extra": st.integers(),
        },
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=300, deadline=None)
@given(_TURNS_WITH_EXTRAS)
def test_turns_with_other_keys_checked_in_bulk_match_the_message_by_message_path(
    messages: list[dict[str, Any]],
) -> None:
    def outcome(checked: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
        try:
            result = check_messages(checked)
        except InvalidInput as exc:
            return ("invalid", exc.index)
        id_kinds, id_payloads = ids_as_records(result)  # the ids the bulk check read, if it did
        return (
            result.kinds,
            list(result.payloads),
            result.tokens,
            result.pinned,
            id_kinds,
            list(id_payloads),
        )

    # Read-only mappings that are not dicts take the message-by-message path.
    assert outcome(messages) == outcome([MappingProxyType(m) for m in messages])


@pytest.mark.parametrize(
    "ids",
    [
        ["a", "b", "c", "d"],  # every message with a string id: recorded in bulk
        ["a", None, 7, "d"],  # mixed: recorded one by one
        [None, None, None, 5],
    ],
)
def test_the_ids_the_bulk_check_read_are_the_ones_recorded(ids: list[Any]) -> None:
    messages: list[dict[str, Any]] = []
    for position, message_id in enumerate(ids):
        message: dict[str, Any] = {"role": ("user", "assistant")[position % 2], "content": "x"}
        if message_id is not None:
            message["id"] = message_id
        if position == 1:
            message["metadata"] = {"seen": True}
        messages.append(message)
    bulk = check_messages(messages)
    assert bulk.ids is not None  # read by the check, handed over
    one_by_one = check_messages([MappingProxyType(m) for m in messages])
    assert one_by_one.ids is None
    kinds, payloads = ids_as_records(bulk)
    assert (kinds, list(payloads)) == (
        ids_as_records(one_by_one)[0],
        list(ids_as_records(one_by_one)[1]),
    )
    assert [p for p, i in zip(payloads, ids, strict=True) if i is not None] == [
        i if isinstance(i, str) else f"{i:x}" for i in ids if i is not None
    ]


def test_ids_and_metadata_do_not_cover_for_a_hashed_key_on_another_message() -> None:
    # Four keys beyond the roles and contents: an id, two metadata and a name. However the
    # others are counted, the name must send the list down the message-by-message path.
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi", "id": "a", "metadata": {"k": 1}},
        {"role": "assistant", "content": "hello", "name": "bot"},
        {"role": "user", "content": "bye", "metadata": None},
    ]
    checked = check_messages(messages)
    assert checked.kinds == "u" + JSON_KIND + "u"
    one_by_one = check_messages([MappingProxyType(m) for m in messages])
    assert list(checked.payloads) == list(one_by_one.payloads)
    assert checked.payloads[1] != "hello"  # the name is in what is hashed


class Counted:
    """A token counter (words) that records which texts it was asked about."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return len(text.split())


@given(
    st.lists(st.text(max_size=12), max_size=20),
    st.slices(25),
    st.integers(min_value=-25, max_value=25),
)
def test_lazy_tokens_read_as_the_list_of_the_same_counts(
    texts: list[str], window: slice, position: int
) -> None:
    counter = Counted()
    lazy = LazyTokens(texts, counter, 3)
    eager = [3 + len(text.split()) for text in texts]
    assert len(lazy) == len(eager)
    assert lazy[window] == eager[window]
    if -len(eager) <= position < len(eager):
        assert lazy[position] == eager[position]
    else:
        with pytest.raises(IndexError):
            lazy[position]
    assert list(lazy) == eager
    assert lazy == eager
    assert lazy != [*eager, 0]
    assert len(counter.texts) == len(texts)  # each text counted once, whatever was read


@given(
    st.lists(
        st.one_of(st.text(max_size=12), st.integers(1000, 1100).map("é".__mul__)), max_size=20
    ),
    st.integers(min_value=0, max_value=20),
)
def test_lazy_approx_tokens_read_all_at_once_equal_those_read_one_by_one(
    texts: list[str], overhead: int
) -> None:
    # With approx_tokens, reading every count (a sum, say) counts them all at once.
    expected = [overhead + approx_tokens(text) for text in texts]
    lazy = LazyTokens(texts, approx_tokens, overhead)
    assert [lazy[i] for i in range(len(texts))] == expected
    assert list(lazy) == expected
    assert sum(LazyTokens(texts, approx_tokens, overhead)) == sum(expected)


def test_lazy_tokens_count_only_what_is_read() -> None:
    counter = Counted()
    texts = [f"turn {i} with some words" for i in range(200)]
    lazy = LazyTokens(texts, counter, 4)
    assert sum(lazy[-12:]) == 12 * (4 + 5)
    assert lazy[0] == 9
    assert counter.texts == [*texts[-12:], texts[0]]
    with pytest.raises(TypeError):
        hash(lazy)


def test_plain_turns_with_another_counter_are_counted_when_read() -> None:
    counter = Counted()
    messages = [{"role": "user", "content": f"hello number {i}"} for i in range(50)]
    checked = check_messages(messages, counter, 2)
    assert counter.texts == []
    assert checked.tokens[49] == 5
    assert counter.texts == ["hello number 49"]
    assert checked.tokens == [5] * 50
    # approx_tokens counts a shorter history all at once, cheaper than tracking what was read.
    assert type(check_messages(messages).tokens) is list
    longer = [{"role": "user", "content": "x" * (i % 9)} for i in range(501)]
    lazily = check_messages(longer)
    assert type(lazily.tokens) is LazyTokens
    assert lazily.tokens == [DEFAULT_MESSAGE_OVERHEAD + approx_tokens(m["content"]) for m in longer]


def test_a_remembering_counter_counts_each_text_once() -> None:
    counter = Counted()
    remembering = RememberingCounter(counter)
    assert [remembering(t) for t in ["a b", "c", "a b", "c", "a b"]] == [2, 1, 2, 1, 2]
    assert counter.texts == ["a b", "c"]


def test_a_remembering_counter_forgets_everything_past_its_budget() -> None:
    counter = Counted()
    remembering = RememberingCounter(counter, max_chars=80)
    for text in ("x " * 5, "y " * 5, "x " * 5):  # 10 characters each: all kept
        remembering(text)
    assert counter.texts == ["x " * 5, "y " * 5]
    remembering("z " * 6)  # longer than an eighth of the budget: counted, never kept
    remembering("z " * 6)
    assert counter.texts[-2:] == ["z " * 6] * 2
    for i in range(8):  # 80 more characters: the budget runs out and all is forgotten
        remembering(f"w{i:08d}")
    remembering("x " * 5)
    assert counter.texts[-1] == "x " * 5


class Shifty(str):
    """A string whose hash and equality are not those of its text."""

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


def test_a_remembering_counter_keys_a_subclass_of_str_by_its_plain_text() -> None:
    counter = Counted()
    remembering = RememberingCounter(counter)
    assert remembering("one two three") == 3
    assert remembering(Shifty("four")) == 1  # not taken for "one two three"
    assert remembering(Shifty("four")) == 1
    assert remembering("four") == 1
    assert counter.texts == ["one two three", "four"]
