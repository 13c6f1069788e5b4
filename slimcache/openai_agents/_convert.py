"""Responses-format input items as the OpenAI-style dicts slimcache works on, and back.

A ``user``, ``system`` or ``developer`` message is one dict. The items a model produces in one
turn (its messages, ``function_call`` and other tool calls, ``reasoning``, built-in tool items)
make one ``assistant`` dict, the calls as ``tool_calls``, so a reasoning item stays with the
call it precedes. A ``function_call_output`` (or any other ``*_output`` item) answering a call
of that turn is a ``tool`` dict; one that answers none, and any item of another kind, a ``user``
dict that describes it.

Each dict records the items it came from (a ``range``), so the input sent to the model is made
of the very items given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from slimcache.frameworks.compression import Summarized
from slimcache.frameworks.settings import SummaryPlacement

__all__ = ["Placement", "from_items", "window"]

Placement = SummaryPlacement

_USER_ROLES = ("user", "system", "developer")
# Items a model produces beside its messages and calls: kept in the turn they belong to.
_TURN_ITEMS = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "compaction",
    }
)


def _fields(item: object) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if callable(dump) else {}


def _part(part: object) -> dict[str, Any] | None:
    fields = _fields(part)
    kind = fields.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(fields.get("text", ""))}
    if kind == "refusal":
        return {"type": "refusal", "refusal": str(fields.get("refusal", ""))}
    if kind == "input_image":
        url = fields.get("image_url") or fields.get("file_id") or ""
        if isinstance(url, str) and url.startswith("data:"):
            url = f"data:sha256,{hashlib.sha256(url.encode()).hexdigest()}"
        return {"type": "image_url", "image_url": {"url": str(url)}}
    if kind == "input_file":
        name = fields.get("filename") or fields.get("file_id") or fields.get("file_url")
        data = fields.get("file_data")
        file: dict[str, Any] = {"filename": str(name or "file")}
        if isinstance(data, str):
            file["sha256"] = hashlib.sha256(data.encode()).hexdigest()
        return {"type": "file", "file": file}
    return {"type": str(kind or "part")}


def _content(content: object) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return ""
    parts = [part for part in map(_part, content) if part is not None]
    return parts or ""


def _kind(fields: Mapping[str, Any]) -> str:
    kind = fields.get("type")
    if kind is None or kind == "message":
        role = fields.get("role")
        return "assistant" if role == "assistant" else "message"
    return str(kind)


def _is_turn_item(kind: str, fields: Mapping[str, Any]) -> bool:
    if kind == "assistant" or kind in _TURN_ITEMS:
        return True
    return kind.endswith("_call") and isinstance(fields.get("call_id"), str)


def _turn(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    texts: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for fields in items:
        kind = _kind(fields)
        if kind == "assistant":
            said = _content(fields.get("content"))
            texts.extend([{"type": "text", "text": said}] if isinstance(said, str) else said)
        elif kind.endswith("_call") and isinstance(fields.get("call_id"), str):
            arguments = fields.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(
                    {k: v for k, v in fields.items() if k not in ("id", "call_id", "status")},
                    sort_keys=True,
                    default=str,
                )
            name = str(fields.get("name") or kind)
            calls.append(
                {
                    "id": fields["call_id"],
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        else:
            others.append({"type": kind})
    content: Any = [*texts, *others]
    if not others and all(part.get("type") == "text" for part in texts):
        content = "\n\n".join(str(part["text"]) for part in texts)
    turn: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        turn["tool_calls"] = calls
        if content in ("", []):
            turn["content"] = None
    return turn


def _other(kind: str, fields: Mapping[str, Any], open_calls: set[str]) -> dict[str, Any]:
    if kind == "message":
        role = fields.get("role")
        return {
            "role": role if role in _USER_ROLES else "user",
            "content": _content(fields.get("content")),
        }
    call_id = fields.get("call_id")
    if kind.endswith("_output") and isinstance(call_id, str):
        output = fields.get("output")
        content = output if isinstance(output, str) else _content(output)
        if call_id in open_calls:
            open_calls.discard(call_id)
            return {"role": "tool", "tool_call_id": call_id, "content": content}
        text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
        return {"role": "user", "content": f"[{kind} {call_id}] {text}"}
    return {"role": "user", "content": [{"type": kind}]}


def from_items(items: Sequence[object]) -> tuple[list[dict[str, Any]], list[range]]:
    """The dicts for Responses-format ``items``, and the items each came from."""
    dicts: list[dict[str, Any]] = []
    spans: list[range] = []
    open_calls: set[str] = set()
    index = 0
    while index < len(items):
        fields = _fields(items[index])
        kind = _kind(fields)
        if _is_turn_item(kind, fields):
            end = index + 1
            while end < len(items) and _is_turn_item(_kind(f := _fields(items[end])), f):
                end += 1
            turn = _turn([_fields(item) for item in items[index:end]])
            open_calls = {call["id"] for call in turn.get("tool_calls", ())}
            dicts.append(turn)
            spans.append(range(index, end))
            index = end
            continue
        item = _other(kind, fields, open_calls)
        if item["role"] != "tool":
            open_calls = set()
        dicts.append(item)
        spans.append(range(index, index + 1))
        index += 1
    return dicts, spans


def window(
    items: Sequence[Any], spans: Sequence[range], done: Summarized, placement: Placement
) -> list[Any]:
    """The items sent: the pinned messages, the summary, then the items after what it covers."""
    pinned = [items[i] for span in spans[: done.pinned] for i in span]
    summary = {"role": placement, "content": done.text}
    return [*pinned, summary, *items[spans[done.end].stop :]]
