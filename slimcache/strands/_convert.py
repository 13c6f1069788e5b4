"""Strands messages as the OpenAI-style dicts slimcache works on.

A Strands ``Message`` is ``{"role": "user" | "assistant", "content": [ContentBlock, ...]}``.
An assistant message is one ``assistant`` dict, its ``toolUse`` blocks as ``tool_calls`` (the
input as JSON arguments) and its ``reasoningContent`` as a part of its own. A user message's
``toolResult`` blocks answering a call of the assistant message before it are ``tool`` dicts,
one each; a result that answers no such call (a stray one) and every other block make one
``user`` dict after them, which describes the stray result in words. Images, documents and
other media are parts naming their kind and a digest of their bytes, so that an edited
attachment changes the fingerprint.

"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["from_strands"]


def _digest(value: object) -> str:
    data = value if isinstance(value, bytes) else json.dumps(value, sort_keys=True, default=str)
    raw = data if isinstance(data, bytes) else data.encode()
    return hashlib.sha256(raw).hexdigest()


def _part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A content part for a block that is neither text, a tool use nor a tool result."""
    if "cachePoint" in block:
        return None
    for kind in ("image", "document", "video", "audio"):
        if kind in block:
            media = block[kind]
            source = media.get("source", {}) if isinstance(media, Mapping) else {}
            return {"type": kind, "format": str(media.get("format", "")), "sha256": _digest(source)}
    if "reasoningContent" in block:
        text = block["reasoningContent"].get("reasoningText", {}).get("text", "")
        return {"type": "reasoning", "text": str(text)}
    if "citationsContent" in block:
        cited = block["citationsContent"].get("content", [])
        return {"type": "text", "text": "".join(str(part.get("text", "")) for part in cited)}
    if "guardContent" in block:
        return {"type": "text", "text": str(block["guardContent"].get("text", {}).get("text", ""))}
    return {"type": next(iter(block), "part")}


def _content(parts: list[dict[str, Any]]) -> Any:
    """``parts`` as a dict's content: one string when they are all text."""
    if all(part["type"] == "text" for part in parts):
        return "\n".join(str(part["text"]) for part in parts)
    return parts


def _said(blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if "text" in block:
            parts.append({"type": "text", "text": str(block["text"])})
        elif "toolUse" not in block and "toolResult" not in block:
            part = _part(block)
            if part is not None:
                parts.append(part)
    return parts


def _result_text(result: Mapping[str, Any]) -> str:
    texts: list[str] = []
    for block in result.get("content", ()):
        if "text" in block:
            texts.append(str(block["text"]))
        elif "json" in block:
            texts.append(json.dumps(block["json"], sort_keys=True, default=str))
        else:
            part = _part(block)
            if part is not None:
                texts.append(json.dumps(part, sort_keys=True))
    status = result.get("status")
    text = "\n".join(texts)
    return f"[{status}] {text}" if status == "error" else text


def _assistant(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    calls = [
        {
            "id": str(block["toolUse"]["toolUseId"]),
            "type": "function",
            "function": {
                "name": str(block["toolUse"].get("name", "tool")),
                "arguments": json.dumps(
                    block["toolUse"].get("input", {}), sort_keys=True, default=str
                ),
            },
        }
        for block in blocks
        if "toolUse" in block
    ]
    parts = _said(blocks)
    turn: dict[str, Any] = {"role": "assistant", "content": _content(parts)}
    if calls:
        turn["tool_calls"] = calls
        if not parts:
            turn["content"] = None
    return turn


def _user(blocks: Sequence[Mapping[str, Any]], open_calls: set[str]) -> list[dict[str, Any]]:
    dicts: list[dict[str, Any]] = []
    strays: list[dict[str, Any]] = []
    for block in blocks:
        if "toolResult" not in block:
            continue
        result = block["toolResult"]
        call_id = str(result.get("toolUseId", ""))
        if call_id in open_calls:
            open_calls.discard(call_id)
            dicts.append({"role": "tool", "tool_call_id": call_id, "content": _result_text(result)})
        else:
            text = f"[tool result {call_id}] {_result_text(result)}"
            strays.append({"type": "text", "text": text})
    parts = strays + _said(blocks)
    if parts or not dicts:
        dicts.append({"role": "user", "content": _content(parts)})
    return dicts


def from_strands(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The dicts for Strands ``messages``."""
    dicts: list[dict[str, Any]] = []
    open_calls: set[str] = set()
    for message in messages:
        blocks = message.get("content") or ()
        if message.get("role") == "assistant":
            turn = _assistant(blocks)
            open_calls = {call["id"] for call in turn.get("tool_calls", ())}
            dicts.append(turn)
        else:
            dicts.extend(_user(blocks, open_calls))
            open_calls = set()
    return dicts
