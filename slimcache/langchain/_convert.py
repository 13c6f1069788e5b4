"""Conversions between LangChain messages and the OpenAI-style dicts slimcache works on."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slimcache._exceptions import InvalidInput, MissingExtraError
from slimcache._install import pip_install
from slimcache.messages import Message, check_messages

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["DEVELOPER_ROLE_KEY", "from_langchain", "require_langchain", "to_langchain"]

DEVELOPER_ROLE_KEY = "__openai_role__"
"""The ``additional_kwargs`` key that marks a ``SystemMessage`` as a developer message.

It is the marker ``langchain-openai`` itself reads and writes, so a developer message keeps
its role through LangChain and back.
"""


def require_langchain() -> None:
    # The SDK is imported where it is used, so that importing slimcache never needs it.
    try:
        import langchain_core.messages  # noqa: F401
    except ImportError:
        raise MissingExtraError(
            f"slimcache.langchain needs langchain-core: {pip_install('langchain')}"
        ) from None


# ---------------------------------------------------------------- dicts -> LangChain


def _parse_arguments(arguments: str) -> dict[str, Any] | None:
    # An empty string is how some servers write "no arguments".
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _ai_message(message: Message, common: dict[str, Any]) -> AIMessage:
    from langchain_core.messages import AIMessage

    raw_calls = message.get("tool_calls") or []
    tool_calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in raw_calls:
        function = call["function"]
        arguments = function.get("arguments", "")
        args = _parse_arguments(arguments)
        if args is None:
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "name": function["name"],
                    "args": arguments,
                    "id": call["id"],
                    "error": "arguments are not a JSON object",
                }
            )
        else:
            tool_calls.append(
                {"type": "tool_call", "name": function["name"], "args": args, "id": call["id"]}
            )
    if raw_calls:
        # Kept as given (as langchain-openai does), so from_langchain gives back the exact
        # argument strings, and with them the same fingerprint.
        common["additional_kwargs"]["tool_calls"] = copy.deepcopy(list(raw_calls))
    content = message.get("content")
    return AIMessage(
        content=_copy_content(content) if content is not None else "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        **common,
    )


def _copy_content(content: Any) -> Any:
    return content if isinstance(content, str) else copy.deepcopy(list(content))


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """Convert OpenAI-style message dicts to LangChain messages.

    ``system`` and ``developer`` become ``SystemMessage`` (a developer message marked with
    ``additional_kwargs["__openai_role__"] = "developer"``), ``user``/``human``
    ``HumanMessage``, ``assistant`` ``AIMessage`` (tool calls parsed into ``tool_calls``, or
    ``invalid_tool_calls`` when the arguments are not a JSON object; the calls as given are
    kept in ``additional_kwargs["tool_calls"]``), ``tool`` ``ToolMessage``. ``name`` and
    ``id`` carry over, ``metadata`` goes to ``additional_kwargs["metadata"]``, and content
    parts are copied as they are.

    Args:
        messages: Chat messages as :meth:`slimcache.SummarizeCompressor.compress` takes them.

    Returns:
        One LangChain message per message, in order.

    Raises:
        InvalidInput: A message breaks a rule slimcache checks (the same checks as
            ``compress``), naming its index.
        MissingExtraError: ``langchain-core`` is not installed.
    """
    require_langchain()
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    check_messages(messages)
    converted: list[BaseMessage] = []
    for message in messages:
        role = message["role"]
        common: dict[str, Any] = {"additional_kwargs": {}}
        if message.get("name") is not None:
            common["name"] = message["name"]
        if message.get("id") is not None:
            common["id"] = str(message["id"])
        if message.get("metadata") is not None:
            common["additional_kwargs"]["metadata"] = copy.deepcopy(dict(message["metadata"]))
        content = message.get("content")
        if role in ("system", "developer"):
            if role == "developer":
                common["additional_kwargs"][DEVELOPER_ROLE_KEY] = "developer"
            converted.append(SystemMessage(content=_copy_content(content), **common))
        elif role in ("user", "human"):
            converted.append(HumanMessage(content=_copy_content(content), **common))
        elif role == "assistant":
            converted.append(_ai_message(message, common))
        else:
            converted.append(
                ToolMessage(
                    content=_copy_content(content),
                    tool_call_id=message["tool_call_id"],
                    **common,
                )
            )
    return converted


# ---------------------------------------------------------------- LangChain -> dicts


def _role_of(message: object, index: int) -> str:
    from langchain_core.messages import (
        AIMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    if isinstance(message, SystemMessage):
        marked = message.additional_kwargs.get(DEVELOPER_ROLE_KEY) == "developer"
        return "developer" if marked else "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        role = {"human": "user", "ai": "assistant"}.get(message.role, message.role)
        if role in ("system", "developer", "user", "assistant"):
            return role
        raise InvalidInput(
            f"ChatMessage role {message.role!r} has no OpenAI equivalent", index=index
        )
    raise InvalidInput(
        f"cannot convert a {type(message).__name__} (expected a System, Human, AI, Tool or "
        "ChatMessage)",
        index=index,
    )


def _content_of(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": part} if isinstance(part, str) else copy.deepcopy(dict(part))
        for part in content
    ]


def _rebuilt_calls(message: AIMessage) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = [
        {
            "id": call.get("id"),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call["args"], ensure_ascii=False),
            },
        }
        for call in message.tool_calls
    ]
    calls.extend(
        {
            "id": call.get("id"),
            "type": "function",
            "function": {"name": call.get("name"), "arguments": call.get("args") or ""},
        }
        for call in message.invalid_tool_calls
    )
    return calls


def _raw_calls_match(raw: object, message: AIMessage) -> bool:
    """Whether ``additional_kwargs["tool_calls"]`` still says what ``message.tool_calls`` say."""
    if not isinstance(raw, list):
        return False
    expected: dict[object, tuple[object, object, bool]] = {}
    for call in message.tool_calls:
        expected[call.get("id")] = (call["name"], call["args"], True)
    for bad in message.invalid_tool_calls:
        expected[bad.get("id")] = (bad.get("name"), bad.get("args") or "", False)
    if len(raw) != len(expected) or len(expected) != (
        len(message.tool_calls) + len(message.invalid_tool_calls)
    ):
        return False
    for call in raw:
        if not isinstance(call, Mapping) or call.get("id") not in expected:
            return False
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("arguments", ""), str):
            return False
        name, args, valid = expected[call["id"]]
        arguments = function.get("arguments", "")
        if function.get("name") != name:
            return False
        if (_parse_arguments(arguments) if valid else arguments) != args:
            return False
    return True


def from_langchain(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Convert LangChain messages to the OpenAI-style dicts slimcache works on.

    The inverse of :func:`to_langchain`: ``SystemMessage`` becomes ``system`` (``developer``
    when marked so), ``HumanMessage`` ``user``, ``AIMessage`` ``assistant`` with
    ``tool_calls`` (arguments as JSON strings; ``content`` is ``None`` when it is empty and
    there are calls), ``ToolMessage`` ``tool``, and ``ChatMessage`` its own role. String
    parts of a content list become text parts; other parts are copied as they are. ``name``,
    ``id`` and ``additional_kwargs["metadata"]`` carry over.

    When ``additional_kwargs["tool_calls"]`` (set by :func:`to_langchain` and by
    ``langchain-openai``) still matches the message's tool calls, it is used as it is, so
    the argument strings come back byte for byte and the fingerprints of a conversation do
    not change across conversions.

    Args:
        messages: LangChain messages, e.g. a LangGraph state's ``"messages"``.

    Returns:
        One dict per message, in order.

    Raises:
        InvalidInput: A message of a kind with no OpenAI equivalent (``FunctionMessage``,
            ``RemoveMessage``, a ``ChatMessage`` with another role), naming its index.
        MissingExtraError: ``langchain-core`` is not installed.
    """
    require_langchain()
    from langchain_core.messages import AIMessage, ToolMessage

    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInput(f"messages must be a list of messages, got {type(messages).__name__}")
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = _role_of(message, index)
        item: dict[str, Any] = {"role": role, "content": _content_of(message.content)}
        if message.name is not None:
            item["name"] = message.name
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            raw = message.additional_kwargs.get("tool_calls")
            calls = copy.deepcopy(raw) if _raw_calls_match(raw, message) else None
            item["tool_calls"] = calls if calls is not None else _rebuilt_calls(message)
            if item["content"] == "" or item["content"] == []:
                item["content"] = None
        if isinstance(message, ToolMessage):
            item["tool_call_id"] = message.tool_call_id
        if message.id is not None:
            item["id"] = message.id
        metadata = message.additional_kwargs.get("metadata")
        if isinstance(metadata, Mapping):
            item["metadata"] = copy.deepcopy(dict(metadata))
        converted.append(item)
    return converted
