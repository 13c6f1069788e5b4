"""Pydantic AI messages as the OpenAI-style dicts slimcache works on, and back into a window.

A ``ModelRequest`` gives one dict per part: a system prompt ``system``, a user prompt ``user``
(text and multimodal content as content parts), a tool return or a retry answering a call of the
responses before it (one, or several in a row before any return) ``tool``; any other part, or a
tool return that answers none of their calls, a ``user`` dict that describes it. A
``ModelResponse`` gives one ``assistant`` dict: its text, its tool calls as ``tool_calls``, and
its other parts (thinking, built-in tools, files) described as content parts, so they stay with
the calls they precede.

The dicts record where they came from (:class:`Source`), so that the window sent to the model is
made of the very message and part objects given: a message the summary does not touch is passed
as it is; one whose first parts it covers is passed with the rest of its parts.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    UserPromptPart,
)

from slimcache.frameworks.compression import Summarized
from slimcache.frameworks.settings import SummaryPlacement

__all__ = ["Source", "from_pydantic_ai", "window"]

Placement = SummaryPlacement


@dataclass(frozen=True)
class Source:
    """Where one dict came from: a message, and one of its parts (``None``: all of them)."""

    message: int
    part: int | None


def _text_of(part: Any) -> str:
    for method in ("model_response_str", "model_response"):
        render = getattr(part, method, None)
        if callable(render):
            return str(render())
    return str(getattr(part, "content", ""))


def _content_item(item: Any) -> dict[str, Any] | None:
    """One item of a user prompt's content as a content part (``None``: sends nothing)."""
    if isinstance(item, str):
        return {"type": "text", "text": item}
    kind = type(item).__name__
    if kind == "CachePoint":
        return None
    text = getattr(item, "content", None)
    if kind == "TextContent" and isinstance(text, str):
        return {"type": "text", "text": text}
    url = getattr(item, "url", None)
    if isinstance(url, str):
        if kind == "ImageUrl":
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"filename": url}}
    data = getattr(item, "data", None)
    if isinstance(data, bytes):
        media_type = str(getattr(item, "media_type", "application/octet-stream"))
        digest = hashlib.sha256(data).hexdigest()
        if media_type.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": f"data:{media_type};sha256,{digest}"}}
        name = getattr(item, "identifier", None) or media_type
        return {"type": "file", "file": {"filename": str(name), "sha256": digest}}
    file_id = getattr(item, "file_id", None)
    if isinstance(file_id, str):
        return {"type": "file", "file": {"filename": file_id}}
    return {"type": kind}


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts = [part for part in map(_content_item, content) if part is not None]
    return parts or ""


def _assistant(message: ModelResponse) -> dict[str, Any]:
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        kind = getattr(part, "part_kind", type(part).__name__)
        if kind == "text":
            texts.append(str(getattr(part, "content", "")))
        elif kind == "tool-call":
            name = str(getattr(part, "tool_name", ""))
            arguments = part.args_as_json_str()  # type: ignore[union-attr]
            call_id = str(getattr(part, "tool_call_id", ""))
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        else:
            others.append({"type": kind})
    content: Any
    if others:
        content = [*({"type": "text", "text": text} for text in texts), *others]
    else:
        content = "\n\n".join(texts)
    item: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        item["tool_calls"] = calls
        if content in ("", []):
            item["content"] = None
    return item


def _request_part(part: Any, open_calls: set[str]) -> dict[str, Any]:
    kind = getattr(part, "part_kind", type(part).__name__)
    if kind == "system-prompt":
        return {"role": "system", "content": str(part.content)}
    if kind == "user-prompt":
        return {"role": "user", "content": _user_content(part.content)}
    call_id = getattr(part, "tool_call_id", None)
    tool_name = getattr(part, "tool_name", None)
    text = _text_of(part)
    if tool_name and isinstance(call_id, str) and call_id in open_calls:
        open_calls.discard(call_id)
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if kind in ("tool-return", "retry-prompt", "retry-feedback"):
        label = f"[{kind} {tool_name}]" if tool_name else f"[{kind}]"
        return {"role": "user", "content": f"{label} {text}"}
    return {"role": "user", "content": [{"type": kind}]}


def from_pydantic_ai(messages: Sequence[ModelMessage]) -> tuple[list[dict[str, Any]], list[Source]]:
    """The dicts for ``messages`` (see the module docstring), and where each came from."""
    dicts: list[dict[str, Any]] = []
    sources: list[Source] = []
    open_calls: set[str] = set()
    answering = False  # whether a return has answered the responses whose calls are open
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            item = _assistant(message)
            made = {call["id"] for call in item.get("tool_calls", ())}
            # Responses one after another, before any return, are one block: the returns
            # after them may answer the calls of any of them.
            open_calls = open_calls | made if open_calls and not answering else made
            answering = False
            dicts.append(item)
            sources.append(Source(index, None))
            continue
        for number, part in enumerate(message.parts):
            item = _request_part(part, open_calls)
            if item["role"] == "tool":
                answering = True
            else:
                open_calls = set()
            dicts.append(item)
            sources.append(Source(index, number))
    return dicts, sources


def window(
    messages: Sequence[ModelMessage],
    sources: Sequence[Source],
    done: Summarized,
    placement: Placement,
) -> list[ModelMessage]:
    """The messages the model is sent: the pinned system prompts and the summary, then every
    part the summary does not stand for, in the messages given."""
    pinned = [
        messages[s.message].parts[s.part] for s in sources[: done.pinned] if s.part is not None
    ]
    gone = {(s.message, s.part) for s in sources[: done.end + 1]}
    summary: Any = (
        SystemPromptPart(done.text) if placement == "system" else UserPromptPart(done.text)
    )
    head: list[Any] = [*pinned, summary]
    sent: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if (index, None) in gone:
            continue
        if isinstance(message, ModelResponse):
            kept: list[Any] | None = None
        else:
            kept = [p for n, p in enumerate(message.parts) if (index, n) not in gone]
            if not kept:
                continue
            if len(kept) == len(message.parts):
                kept = None
        if head:
            if isinstance(message, ModelRequest):
                message = _with_parts(message, [*head, *(kept or message.parts)])
                kept = None
            else:
                sent.append(ModelRequest(parts=head))
            head = []
        sent.append(message if kept is None else _with_parts(message, kept))
    if head:  # the summary stands for everything: it alone goes, as a request
        sent.append(ModelRequest(parts=head))
    return sent


def _with_parts(message: ModelMessage, parts: list[Any]) -> ModelMessage:
    """A copy of ``message`` holding ``parts``, every other field as it is."""
    copied: ModelMessage = dataclasses.replace(message, parts=parts)  # type: ignore[arg-type]
    return copied
