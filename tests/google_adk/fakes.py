"""An offline ADK model, an agent with one tool, and a conversation replayed turn by turn.

:class:`FakeLlm` is a ``BaseLlm`` that records every request it is sent and answers without a
network: a user turn asking to "look up" something gets a call of the ``lookup`` tool, the
tool's result gets a text answer, and any other turn a text reply. Its answers depend on the
request alone, so two processes replaying one conversation make the same events.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import Field

from slimcache.google_adk import CachedEventsSummarizer

USER = "user-1"


def lookup(query: str) -> dict[str, Any]:
    """Look ``query`` up."""
    return {"query": query, "found": f"facts about {query}"}


class FakeLlm(BaseLlm):
    """Answers offline and records the requests it is sent."""

    model: str = "fake-llm"
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        parts = llm_request.contents[-1].parts if llm_request.contents else None
        part = parts[-1] if parts else None
        if part is not None and part.function_response is not None:
            found = (part.function_response.response or {}).get("found")
            reply = types.Part(text=f"Here is what I found: {found}.")
        elif part is not None and part.text and part.text.startswith("look up "):
            call = types.FunctionCall(name="lookup", args={"query": part.text[8:]})
            reply = types.Part(function_call=call)
        else:
            reply = types.Part(text=f"I hear you: {part.text if part else ''}")
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=len(sent_texts(llm_request)), candidates_token_count=1
        )
        yield LlmResponse(content=types.Content(role="model", parts=[reply]), usage_metadata=usage)


def turn(number: int) -> str:
    """The user's message of turn ``number``: every third asks for the tool."""
    return f"look up topic {number}" if number % 3 == 2 else f"turn {number}: tell me more"


def sent_texts(request: LlmRequest) -> list[str]:
    """Every text, call and result a request holds, as lines."""
    lines: list[str] = []
    for content in request.contents:
        for part in content.parts or ():
            if part.text:
                lines.append(part.text)
            if part.function_call is not None:
                lines.append(f"call {part.function_call.id}")
            if part.function_response is not None:
                lines.append(f"result {part.function_response.id}")
    return lines


class Stack:
    """One worker: an app with the summarizer and its plugin, a runner and a session service.

    Args:
        summarizer: The slimcache summarizer of the app's compaction.
        plugin: Whether the app has the summarizer's plugin.
        config: ``EventsCompactionConfig`` settings (default: every 2 invocations, overlap 1).
    """

    def __init__(
        self, summarizer: CachedEventsSummarizer, *, plugin: bool = True, **config: Any
    ) -> None:
        self.model = FakeLlm()
        self.summarizer = summarizer
        agent = LlmAgent(name="assistant", model=self.model, tools=[lookup])
        settings = {"compaction_interval": 2, "overlap_size": 1, **config}
        self.app = App(
            name="helpdesk",
            root_agent=agent,
            plugins=[summarizer.plugin] if plugin else [],
            events_compaction_config=EventsCompactionConfig(summarizer=summarizer, **settings),
        )
        self.sessions = InMemorySessionService()
        self.runner = Runner(app=self.app, session_service=self.sessions)

    async def start(self, session_id: str) -> None:
        await self.sessions.create_session(app_name="helpdesk", user_id=USER, session_id=session_id)

    async def say(self, session_id: str, text: str) -> None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in self.runner.run_async(
            user_id=USER, session_id=session_id, new_message=message
        ):
            pass

    async def replay(self, session_id: str, turns: int) -> None:
        await self.start(session_id)
        for number in range(turns):
            await self.say(session_id, turn(number))

    async def events(self, session_id: str) -> list[Any]:
        session = await self.sessions.get_session(
            app_name="helpdesk", user_id=USER, session_id=session_id
        )
        assert session is not None
        return list(session.events)
