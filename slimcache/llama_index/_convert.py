"""LlamaIndex chat messages as the OpenAI-style dicts slimcache summarizes.

A message's text is its text blocks joined (``ChatMessage.content``). An assistant's tool calls
are read from its ``ToolCallBlock`` blocks, or from ``additional_kwargs["tool_calls"]`` as
LlamaIndex's OpenAI-style LLMs keep them; a tool result (role ``"tool"``) answers the call named
by ``additional_kwargs["tool_call_id"]``. A call and its results stay a pair only when both are
in the messages given: a result whose call is not there, or a call none of whose results
follow, is rendered as text of its message (``"[tool_call lookup({...})]"``,
``"[tool result lookup] ..."``), so a batch that cuts a pair is still summarized, never refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock

from slimcache.messages import Message

__all__ = ["to_dicts"]

_ROLES = {"system", "user", "assistant", "tool", "developer"}


def _role(message: ChatMessage) -> str:
    role = str(getattr(message.role, "value", message.role))
    if role == "function":
        return "tool"
    if role == "chatbot":
        return "assistant"
    return role if role in _ROLES else "user"


def _arguments(kwargs: object) -> str:
    return kwargs if isinstance(kwargs, str) else json.dumps(kwargs, ensure_ascii=False)


def _calls(message: ChatMessage, number: int) -> list[dict[str, Any]]:
    """The tool calls of an assistant message, each with an id."""
    calls: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            name, arguments, call_id = block.tool_name, block.tool_kwargs, block.tool_call_id
            calls.append(_call(call_id or f"call_{number}_{len(calls)}", name, arguments))
    for raw in message.additional_kwargs.get("tool_calls") or []:
        found = raw if isinstance(raw, dict) else getattr(raw, "model_dump", lambda: None)()
        if not isinstance(found, dict):
            continue
        function = found.get("function") or {}
        call_id = found.get("id") or f"call_{number}_{len(calls)}"
        if any(call["id"] == call_id for call in calls):
            continue
        calls.append(_call(call_id, function.get("name", ""), function.get("arguments", "")))
    return calls


def _call(call_id: str, name: object, arguments: object) -> dict[str, Any]:
    return {
        "id": str(call_id),
        "type": "function",
        "function": {"name": str(name), "arguments": _arguments(arguments)},
    }


def _text(message: ChatMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else ""


def to_dicts(messages: Sequence[ChatMessage]) -> list[Message]:
    """``messages`` as OpenAI-style dicts, tool calls paired with their results where both are
    given (see the module docstring)."""
    roles = [_role(message) for message in messages]
    calls = [
        _calls(message, number) if role == "assistant" else []
        for number, (message, role) in enumerate(zip(messages, roles, strict=True))
    ]
    answered: dict[str, int] = {}  # a result's call id -> the assistant message making it
    pending: dict[str, int] = {}
    for number, (message, role) in enumerate(zip(messages, roles, strict=True)):
        if calls[number]:
            pending = {call["id"]: number for call in calls[number]}
        elif role == "tool":
            call_id = str(message.additional_kwargs.get("tool_call_id", ""))
            if call_id in pending:
                answered[call_id] = pending[call_id]
        else:
            pending = {}
    kept_calls = {
        number: [call for call in found if call["id"] in answered]
        for number, found in enumerate(calls)
    }
    out: list[Message] = []
    for number, (message, role) in enumerate(zip(messages, roles, strict=True)):
        text = _text(message)
        if role == "tool":
            call_id = str(message.additional_kwargs.get("tool_call_id", ""))
            if call_id in answered:
                out.append({"role": "tool", "tool_call_id": call_id, "content": text})
            else:
                name = message.additional_kwargs.get("name") or call_id or "tool"
                out.append({"role": "user", "content": f"[tool result {name}] {text}"})
            continue
        if role == "assistant":
            kept = kept_calls[number]
            loose = [call for call in calls[number] if call not in kept]
            shown = [
                f"[tool_call {c['function']['name']}({c['function']['arguments']})]" for c in loose
            ]
            body = "\n".join([text, *shown]) if text else "\n".join(shown)
            converted: dict[str, Any] = {"role": "assistant", "content": body}
            if kept:
                converted["tool_calls"] = kept
            out.append(converted)
            continue
        out.append({"role": role, "content": text})
    return out
