"""Strands models of the tests' own: an agent's model that overflows past a number of messages
and records what it was sent, and calls a tool when asked about the weather."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from strands import tool
from strands.models.model import Model
from strands.types.exceptions import ContextWindowOverflowException


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"22C in {city}"


class ScriptedModel(Model):
    """Answers each request, records it, and overflows past ``limit`` messages.

    Asked about the weather by the newest user text, it first calls the ``weather`` tool.
    ``reply`` is what it says otherwise (a summarizer's model says it as the summary).
    """

    def __init__(self, *, limit: int | None = None, reply: str = "Sure.") -> None:
        self.limit = limit
        self.reply = reply
        self.seen: list[list[dict[str, Any]]] = []
        self.overflows = 0
        self.config: dict[str, Any] = {"model_id": "scripted"}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        return self.config

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if self.limit is not None and len(messages) > self.limit:
            self.overflows += 1
            raise ContextWindowOverflowException(f"{len(messages)} messages")
        self.seen.append(json.loads(json.dumps(messages, default=str)))
        yield {"messageStart": {"role": "assistant"}}
        last = messages[-1]["content"]
        asked = " ".join(block["text"] for block in last if "text" in block)
        if "weather" in asked.lower() and tool_specs:
            call = {"toolUse": {"name": "weather", "toolUseId": f"t{len(self.seen)}"}}
            yield {"contentBlockStart": {"start": call}}
            delta = {"toolUse": {"input": json.dumps({"city": "Lisbon"})}}
            yield {"contentBlockDelta": {"delta": delta}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        yield {"contentBlockDelta": {"delta": {"text": self.reply}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}
