"""Message validation: the checks a history passes, and what fingerprints hash of it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from json.encoder import encode_basestring
from operator import itemgetter
from typing import Any, cast

from slimcache._exceptions import InvalidInput
from slimcache.messages.tokens import (
    DEFAULT_MESSAGE_OVERHEAD,
    LazyTokens,
    approx_counts,
    approx_tokens,
    count_message_tokens,
)
from slimcache.messages.types import (
    INT_ID_KIND,
    JSON_KIND,
    PINNED_ROLES,
    PLAIN_KINDS,
    ROLE_ALIASES,
    ROLES,
    STR_ID_KIND,
    Message,
    TokenCounter,
)

__all__ = ["MAX_NESTING", "CheckedMessages", "check_messages", "ids_as_records"]

MAX_NESTING = 100
"""How many levels of lists and dicts a message's ``content`` or ``tool_calls`` may nest.

The value of the field itself is level 1 (a list of parts), a part is level 2, a dict inside a
part level 3, and so on. Deeper values, and values that contain themselves, are rejected with
:class:`InvalidInput`: encoding them would exhaust the interpreter's stack.
"""

# Built once: ``json.dumps`` with options builds a new encoder on every call, which was most
# of the cost of checking a message. The output is byte-for-byte what ``json.dumps`` gives with
# the same options.
_CANONICAL_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
# The role field of a canonical form, up to the tool call id that follows it.
_NO_CALLS: frozenset[str] = frozenset()
_ROLE_FIELD = {role: f',"role":"{ROLE_ALIASES.get(role, role)}","tool_call_id":' for role in ROLES}
_KIND_ROLE_FIELD = {kind: _ROLE_FIELD[role] for role, kind in PLAIN_KINDS.items()}


@dataclass(frozen=True)
class CheckedMessages:
    """Messages that passed validation, with what the compressor needs to know about them.

    Attributes:
        messages: The messages as given.
        tokens: Token count per message: a list, or for plain turns a :class:`LazyTokens`
            counting each message when first read (any counter but ``approx_tokens``, and
            ``approx_tokens`` past 500 turns).
        pinned: How many leading system/developer messages are pinned.
        unit_end: For each index, the last index of the atomic unit it belongs to: the
            assistant messages of a block (one with tool calls and those directly after it,
            before any result) and the tool results answering them form one unit.
        kinds: One letter per message for what fingerprints hash: a plain turn's role letter
            (``PLAIN_KINDS``), or ``JSON_KIND`` for any other message.
        payloads: Per message, the text fingerprints hash: a plain turn's content, or any
            other message's canonical JSON; always of type ``str`` itself, never a subclass.
        ids: Per message, its ``id`` (``None`` where it has none), when the check read them
            anyway; else ``None``.
    """

    messages: Sequence[Message]
    tokens: Sequence[int]
    pinned: int
    unit_end: list[int]
    kinds: str = ""
    payloads: Sequence[str] = ()
    ids: Sequence[Any] | None = None

    def __len__(self) -> int:
        return len(self.messages)

    @cached_property
    def canonical(self) -> list[bytes]:
        """One canonical JSON encoding per message, as the older per-message chain hashes it.

        Built on first use only: the range fingerprints new entries carry hash ``kinds`` and
        ``payloads`` instead.
        """
        return [
            payload.encode("utf-8", "surrogatepass")
            if kind == JSON_KIND
            else _plain_canonical(payload, None, None, _KIND_ROLE_FIELD[kind])
            for kind, payload in zip(self.kinds, self.payloads, strict=True)
        ]


def _shown(value: object) -> str:
    """A short description of a value, for an error message; never fails, however odd the value.

    Strings, ``None`` and booleans are shown as their repr (cut at 60 characters); any other
    value by its type only: a repr may be huge, recurse without end, or raise.
    """
    if value is None or isinstance(value, (str, bool)):
        text = repr(value)
        return text if len(text) <= 60 else text[:56] + "...'"
    return f"<{type(value).__name__}>"


def _fail(rule: str, index: int | None = None) -> InvalidInput:
    return InvalidInput(rule, index=index)


def _not_a_dict(message: object) -> str:
    """The rule a message that is no dict breaks, with the way in for LangChain's messages."""
    kind = type(message).__name__
    if type(message).__module__.split(".")[0].startswith("langchain"):
        return (
            f"each message must be a dict, got a LangChain {kind}: compress LangChain messages "
            "with slimcache.langchain.compress_langchain(compressor, messages, thread_id=...), "
            "or convert them with from_langchain() and back with to_langchain()"
        )
    return f"each message must be a dict, got {kind}"


def _check_content(message: Message, index: int, role: str, has_calls: bool) -> None:
    if "content" not in message or message["content"] is None:
        if ROLE_ALIASES.get(role, role) == "assistant" and has_calls:
            return
        raise _fail(f"a {role} message needs 'content' (a string or a list of parts)", index)
    content = message["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _fail(
            f"'content' must be a string or a list of parts, got {type(content).__name__}", index
        )
    for pos, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise _fail(f"content part {pos} must be a dict with a string 'type'", index)
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise _fail(f"text content part {pos} needs a string 'text'", index)
        if part["type"] == "refusal" and not isinstance(part.get("refusal"), str):
            raise _fail(f"refusal content part {pos} needs a string 'refusal'", index)


def _check_tool_calls(message: Message, index: int, role: str) -> list[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if ROLE_ALIASES.get(role, role) != "assistant":
        raise _fail(f"only assistant messages may carry 'tool_calls', not {role}", index)
    if not isinstance(calls, list):
        raise _fail(f"'tool_calls' must be a list, got {type(calls).__name__}", index)
    ids: list[str] = []
    for pos, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise _fail(f"tool_calls[{pos}] must be a dict", index)
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise _fail(f"tool_calls[{pos}] needs a non-empty string 'id'", index)
        if call_id in ids:
            raise _fail(f"tool_calls[{pos}] repeats the id {_shown(call_id)}", index)
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise _fail(f"tool_calls[{pos}] needs a 'function' dict with a string 'name'", index)
        if not isinstance(function.get("arguments", ""), str):
            raise _fail(f"tool_calls[{pos}].function.arguments must be a JSON string", index)
        ids.append(call_id)
    return ids


def _children(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> Iterable[Any]:
    if type(value) is dict:
        return value.values()
    if isinstance(value, dict):
        # The encoder reads a non-empty dict subclass through its items().
        return [item for _, item in value.items()] if dict.__len__(value) else ()
    return value


def _nesting_problem(value: object) -> str | None:
    """Say why ``value`` cannot be encoded (a reference cycle, too deep), or return ``None``.

    Walks what the JSON encoder walks (dicts, lists, tuples) without recursion, so the check
    itself cannot run out of stack, and stops at ``MAX_NESTING`` levels.
    """
    if not isinstance(value, (dict, list, tuple)):
        return None
    path: list[object] = [value]
    pending: list[Iterator[Any]] = [iter(_children(value))]
    while pending:
        for child in pending[-1]:
            if isinstance(child, (dict, list, tuple)):
                if len(path) == MAX_NESTING:
                    # A cycle shorter than the limit has come round to one of the ancestors.
                    if any(child is ancestor for ancestor in path):
                        return "contains a reference cycle"
                    return f"nests lists and dicts deeper than {MAX_NESTING} levels"
                path.append(child)
                pending.append(iter(_children(child)))
                break
        else:
            path.pop()
            pending.pop()
    return None


def _plain_text(content: str, name: str | None, tool_call_id: str | None, role_field: str) -> str:
    # The canonical form of a message with string content and no tool calls, built directly:
    # the keys in sorted order and the string escaping json.dumps itself uses.
    encoded_name = "null" if name is None else encode_basestring(name)
    encoded_id = "null" if tool_call_id is None else encode_basestring(tool_call_id)
    return (
        f'{{"content":{encode_basestring(content)},"name":{encoded_name}'
        f'{role_field}{encoded_id},"tool_calls":null}}'
    )


def _plain_canonical(
    content: str, name: str | None, tool_call_id: str | None, role_field: str
) -> bytes:
    return _plain_text(content, name, tool_call_id, role_field).encode("utf-8", "surrogatepass")


def _structure_problem(message: Message, index: int) -> InvalidInput | None:
    for key in ("content", "tool_calls"):
        problem = _nesting_problem(message.get(key))
        if problem is not None:
            return _fail(f"'{key}' {problem}", index)
    return None


def _canonical(message: Message, role: str, index: int) -> str:
    # Only what a summary is made of is hashed: editing 'metadata' or 'id' does not invalidate.
    # The bytes are exactly those of json.dumps(view, sort_keys=True, ensure_ascii=False,
    # separators=(",", ":")) encoded with surrogatepass, as every earlier version made them:
    # the fingerprints already stored depend on them.
    content = message.get("content")
    name = message.get("name")
    tool_call_id = message.get("tool_call_id")
    role_field = _ROLE_FIELD.get(role)
    if (
        isinstance(content, str)
        and (name is None or isinstance(name, str))
        and (tool_call_id is None or isinstance(tool_call_id, str))
        and role_field is not None
        and message.get("tool_calls") is None
    ):
        return _plain_text(content, name, tool_call_id, role_field)
    view = {
        "role": ROLE_ALIASES.get(role, role),
        "content": content,
        "name": name,
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": tool_call_id,
    }
    try:
        text = _CANONICAL_ENCODER.encode(view)
    except RecursionError:
        problem = _structure_problem(message, index)
        raise problem or _fail("message is nested too deeply to encode", index) from None
    except (TypeError, ValueError) as exc:
        # A reference cycle surfaces here as the encoder's "Circular reference detected".
        problem = _structure_problem(message, index)
        raise problem or _fail(f"message must be JSON-serializable ({exc})", index) from None
    # Every list or dict writes one opening bracket (strings may add more), so with no more
    # brackets than the limit allows, no value nests too deep and the walk is not needed.
    if text.count("[") + text.count("{") > MAX_NESTING + 1:
        problem = _structure_problem(message, index)
        if problem is not None:
            raise problem
    return text


# A list of nothing but plain chat turns, the common case, is checked in bulk: every message a
# dict of exactly a role (not "tool") and string content.
_DICT_ONLY = {dict}
_STR_ONLY = {str}
_NONE_ONLY = {type(None)}
_ROLE_OF = itemgetter("role")
_ID_TYPES = frozenset({str, int, type(None)})  # bool is its own type: not an id
_PLAIN_METADATA_TYPES = frozenset({dict, type(None)})
_CONTENT_OF = itemgetter("content")
_PINNED_KINDS = "".join(sorted(PLAIN_KINDS[role] for role in PINNED_ROLES))
# Up to this many plain turns, approx_tokens counts them all at once; a longer history's are
# counted when read (a cache hit reads the pinned messages and the window only).
_COUNT_ALL_UP_TO = 500


def _unhashed_extras(
    messages: Sequence[dict[str, Any]], keys: int
) -> tuple[bool, list[Any] | None]:
    """Whether the messages' other keys are only a valid "id" and "metadata"; and the ids.

    Every message has a role and content, and ``keys`` keys in all: the others are only ids
    and metadata exactly when they number as many as the messages holding each. Counting
    them is two passes in C, where listing every key of every message was a pass per key.
    The ids (``None`` for a message without one) come back when any message has one, as
    they were read to check their types.
    """
    with_id = sum(map(dict.__contains__, messages, repeat("id")))
    with_metadata = keys - 2 * len(messages) - with_id
    if with_metadata and with_metadata != sum(map(dict.__contains__, messages, repeat("metadata"))):
        return False, None
    ids: list[Any] | None = None
    if with_id:
        ids = list(map(dict.get, messages, repeat("id")))
        if not _ID_TYPES.issuperset(map(type, ids)):
            return False, None
    if not with_metadata:
        return True, ids
    metadata = list(map(dict.get, messages, repeat("metadata")))
    if _PLAIN_METADATA_TYPES.issuperset(map(type, metadata)):
        return True, ids
    return all(meta is None or isinstance(meta, Mapping) for meta in metadata), ids


def _check_in_bulk(
    messages: Sequence[Message], counter: TokenCounter, overhead: int
) -> CheckedMessages | None:
    """Check a list of plain turns with list-wide operations; ``None`` if it is not one.

    The result is exactly the one the message-by-message path gives (a property test holds
    the two together), in a fraction of the time: a cache hit checks every message, so each
    step here is one C-level pass over the list rather than Python code per message.
    """
    count = len(messages)
    if not count or set(map(type, messages)) != _DICT_ONLY:
        return None
    try:
        # One letter per role: PLAIN_KINDS has no "tool", so a tool result ends the bulk path.
        kinds = "".join(map(PLAIN_KINDS.__getitem__, map(_ROLE_OF, messages)))
        contents: list[Any] = list(map(_CONTENT_OF, messages))
    except (KeyError, TypeError):  # a missing key, a role of no plain turn, an unhashable role
        return None
    # Every dict has a role and content; with two keys each, it has nothing else. Otherwise
    # the only other keys may be the ones never hashed: an "id" and "metadata".
    keys = sum(map(len, messages))
    ids: list[Any] | None = None
    if keys != 2 * count:
        only_unhashed, ids = _unhashed_extras(
            cast("Sequence[dict[str, Any]]", messages),  # every one is a dict, checked above
            keys,
        )
        if not only_unhashed:
            return None
    if set(map(type, contents)) != _STR_ONLY:
        return None
    tokens: Sequence[int]
    if counter is approx_tokens and count <= _COUNT_ALL_UP_TO:
        # Cheaper to count them all at once than to keep track of which were read.
        tokens = approx_counts(contents, overhead)
    else:
        tokens = LazyTokens(contents, counter, overhead)
    pinned = count - len(kinds.lstrip(_PINNED_KINDS))
    return CheckedMessages(messages, tokens, pinned, list(range(count)), kinds, contents, ids)


def ids_as_records(checked: CheckedMessages) -> tuple[str, Sequence[str]]:
    """Fingerprint records in which every message with an ``id`` is recorded by its id alone.

    For callers whose ids name one content forever (an edited message gets a new id): a
    fingerprint then hashes the ids, whatever the length of the messages. Messages without an
    id keep their own record. Returns ``(kinds, payloads)`` as in :class:`CheckedMessages`.
    """
    ids = checked.ids
    if ids is None:  # not read by the check
        ids = [message.get("id") for message in checked.messages]
    id_types = set(map(type, ids))
    if id_types == _STR_ONLY:  # every message has a string id: the common case, in bulk
        return STR_ID_KIND * len(ids), ids
    if id_types == _NONE_ONLY:
        return checked.kinds, checked.payloads
    kinds: list[str] = []
    payloads: list[str] = []
    for kind, payload, message_id in zip(checked.kinds, checked.payloads, ids, strict=True):
        if message_id is None:
            kinds.append(kind)
            payloads.append(payload)
        elif type(message_id) is str:
            kinds.append(STR_ID_KIND)
            payloads.append(message_id)
        else:  # an int: check_messages lets no other id through
            kinds.append(INT_ID_KIND)
            payloads.append(f"{message_id:x}")
    return "".join(kinds), payloads


def check_messages(
    messages: Sequence[Message],
    counter: TokenCounter = approx_tokens,
    overhead: int = DEFAULT_MESSAGE_OVERHEAD,
) -> CheckedMessages:
    """Validate messages and precompute their fingerprints' inputs, tokens and atomic units.

    Raises:
        InvalidInput: Naming the message index and the rule it breaks, for any malformed
            message, including one whose ``content`` or ``tool_calls`` contain themselves or
            nest deeper than ``MAX_NESTING`` levels.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise _fail(f"messages must be a list of dicts, got {type(messages).__name__}")
    bulk = _check_in_bulk(messages, counter, overhead)
    if bulk is not None:
        return bulk
    return _check_each(messages, counter, overhead)


def _unknown_role(role: object, index: int) -> InvalidInput:
    return _fail(f"unknown role {_shown(role)} (expected one of {', '.join(sorted(ROLES))})", index)


def _check_full(message: Message, index: int, role: str) -> list[str]:
    """Check what a message that is no plain turn may hold; return its tool calls' ids."""
    call_ids = _check_tool_calls(message, index, role)
    _check_content(message, index, role, bool(call_ids))
    for key in ("name", "tool_call_id"):
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            raise _fail(f"'{key}' must be a string", index)
    return call_ids


def _answer(open_calls: frozenset[str], tool_call_id: object, index: int) -> frozenset[str]:
    """Check that a tool result answers one of ``open_calls``; return the calls still open."""
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise _fail("a tool message needs a string 'tool_call_id'", index)
    if tool_call_id not in open_calls:
        raise _fail(
            f"tool result {_shown(tool_call_id)} answers no tool call of the assistant "
            "messages directly before it",
            index,
        )
    return open_calls - {tool_call_id}


def _joined(open_calls: frozenset[str], call_ids: list[str], index: int) -> frozenset[str]:
    """The calls of a block of assistant messages, with those of the next one in it."""
    for pos, call_id in enumerate(call_ids):
        if call_id in open_calls:
            raise _fail(
                f"tool_calls[{pos}] repeats the id {_shown(call_id)} of an assistant message "
                "of the same block",
                index,
            )
    return open_calls.union(call_ids)


def _check_each(
    messages: Sequence[Message], counter: TokenCounter, overhead: int
) -> CheckedMessages:
    """Check the messages one by one: the path for any list that is not all plain turns."""
    kinds: list[str] = []
    payloads: list[str] = []
    tokens: list[int] = []
    unit_end: list[int] = []
    pinned = 0
    # Unanswered calls of the assistant message being answered; replaced, never mutated.
    open_calls: frozenset[str] = _NO_CALLS
    answered_unit_start = -1
    # Whether a tool result has answered the block of assistant messages being answered.
    answering = False
    for index, message in enumerate(messages):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise _fail(_not_a_dict(message), index)
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _unknown_role(role, index)
        content: Any = message.get("content")
        name: Any = message.get("name")
        tool_call_id: Any = message.get("tool_call_id")
        # Most messages are plain: string content and no tool calls. They pass every check of
        # the full path below by construction, and need no canonical JSON to be fingerprinted.
        plain = (
            isinstance(content, str)
            and (name is None or isinstance(name, str))
            and (tool_call_id is None or isinstance(tool_call_id, str))
            and message.get("tool_calls") is None
        )
        call_ids = None if plain else _check_full(message, index, role)
        # Not hashed, so free to change, but of the types documented.
        metadata = message.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise _fail("'metadata' must be a dict", index)
        message_id = message.get("id")
        if message_id is not None and (
            isinstance(message_id, bool) or not isinstance(message_id, (str, int))
        ):
            raise _fail("'id' must be a string or an integer", index)

        if role == "tool":
            open_calls = _answer(open_calls, tool_call_id, index)
            for pos in range(answered_unit_start, index):
                unit_end[pos] = index
            unit_end.append(index)
            answering = True
        elif open_calls and not answering and ROLE_ALIASES.get(role, role) == "assistant":
            # Another assistant message before any result (a turn split in two, as LangChain
            # and Anthropic make it): it joins the block whose results follow.
            if call_ids:
                open_calls = _joined(open_calls, call_ids, index)
            unit_end.append(index)
        else:
            open_calls = frozenset(call_ids) if call_ids else _NO_CALLS
            answered_unit_start = index
            answering = False
            unit_end.append(index)
        if index == pinned and role in PINNED_ROLES:
            pinned += 1
        if plain:
            if name is None and tool_call_id is None and role != "tool":
                kinds.append(PLAIN_KINDS[role])
                # A str subclass is recorded as the plain text it holds, so that its own
                # __len__ or __eq__ never takes part in a fingerprint or in comparing one.
                payloads.append(content if type(content) is str else str.__str__(content))
            else:
                kinds.append(JSON_KIND)
                payloads.append(_plain_text(content, name, tool_call_id, _ROLE_FIELD[role]))
            tokens.append(overhead + counter(content) + (0 if name is None else counter(name)))
        else:
            kinds.append(JSON_KIND)
            payloads.append(_canonical(message, role, index))
            tokens.append(count_message_tokens(message, counter, overhead))
    return CheckedMessages(messages, tokens, pinned, unit_end, "".join(kinds), payloads)
