"""ADK events as the messages slimcache summarizes: text, thoughts, tool calls and results.

Each event with something to say is one message: the user's as ``"user"``, every other
author's (the agents, their tool calls and the tools' results) as ``"assistant"``. A function
call is written out as ``called tool name({...})`` and a function response as
``tool name returned: {...}``, so the summary knows which tools ran and what they found, where
a summarizer reading only text would drop them. Compaction events are not messages: the
summaries stand for them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from google.adk.events.event import Event

from slimcache.messages import Message

__all__ = ["is_compaction", "message_of", "messages_of", "positions"]


def is_compaction(event: Event) -> bool:
    """Whether ``event`` is a compaction (a summary of earlier events)."""
    return bool(event.actions and event.actions.compaction)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def message_of(event: Event) -> Message | None:
    """The message ``event`` is summarized as, or ``None`` when it says nothing."""
    content = event.content
    if content is None or not content.parts:
        return None
    lines: list[str] = []
    for part in content.parts:
        if part.text:
            lines.append(f"(thought) {part.text}" if part.thought else part.text)
        if part.function_call is not None:
            call = part.function_call
            lines.append(f"called tool {call.name}({_json(call.args or {})})")
        if part.function_response is not None:
            response = part.function_response
            lines.append(f"tool {response.name} returned: {_json(response.response)}")
    if not lines:
        return None
    role = "user" if event.author == "user" else "assistant"
    return {"role": role, "content": "\n".join(lines)}


def messages_of(events: Iterable[Event]) -> tuple[list[Message], list[str]]:
    """The messages of ``events`` but compactions, and the id of the event each came from."""
    messages: list[Message] = []
    ids: list[str] = []
    for event in events:
        if is_compaction(event):
            continue
        message = message_of(event)
        if message is not None:
            messages.append(message)
            ids.append(event.id)
    return messages, ids


def positions(ids: Sequence[str]) -> dict[str, int]:
    """Each event id's position among the messages."""
    found: dict[str, int] = {}
    for position, event_id in enumerate(ids):
        found.setdefault(event_id, position)
    return found
