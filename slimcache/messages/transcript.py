"""Plain-text renderings of messages: a message's text and a transcript for a prompt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slimcache.messages.types import ROLE_ALIASES, Message

__all__ = ["message_text", "render_transcript"]


def _describe_part(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "image_url":
        url = part.get("image_url")
        target = url.get("url") if isinstance(url, Mapping) else url
        if isinstance(target, str) and not target.startswith("data:"):
            return f"[image: {target}]"
        return "[image]"
    if kind == "file":
        info = part.get("file")
        name = info.get("filename") if isinstance(info, Mapping) else None
        return f"[file: {name}]" if isinstance(name, str) else "[file]"
    if kind == "input_audio":
        return "[audio]"
    return f"[{kind} part]"


def message_text(message: Message) -> str:
    """Return a message's text: text parts joined, other parts described (``[image]``)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content:
        if part.get("type") == "text":
            pieces.append(str(part.get("text", "")))
        elif part.get("type") == "refusal":
            pieces.append(str(part.get("refusal", "")))
        else:
            pieces.append(_describe_part(part))
    return "\n".join(pieces)


def _role_label(message: Message) -> str:
    role = str(message.get("role"))
    return ROLE_ALIASES.get(role, role)


def render_transcript(messages: Sequence[Message]) -> str:
    """Render messages as a plain transcript for a summarization prompt.

    Tool calls are shown with their names and arguments, tool results with the call they answer,
    and non-text parts are described rather than dropped.
    """
    blocks: list[str] = []
    for message in messages:
        label = _role_label(message)
        name = message.get("name")
        if isinstance(name, str) and name:
            label = f"{label} ({name})"
        if message.get("role") == "tool":
            label = f"tool result [{message.get('tool_call_id')}]"
        lines = [f"{label}: {message_text(message)}".rstrip()]
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(
                f"  -> calls {function.get('name')}({function.get('arguments', '')}) "
                f"[{call.get('id')}]"
            )
        blocks.append("\n".join(lines))
    return "\n---\n".join(blocks)
