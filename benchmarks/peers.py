"""Each framework's own summarizing option against slimcache's integration in that framework.

Replays chitchat conversations as a stateless server gets them (every request carries the whole
history) through, for each framework, its own summarizer and slimcache's integration, with the
same trigger and keep and the same fake summarizing model, and prints the summarizer calls and
the input tokens they were sent::

    uv run python benchmarks/peers.py              # 20 conversations of 40+ messages
    uv run python benchmarks/peers.py 50

- LangChain: ``SummarizationMiddleware`` against ``CachedSummarizationMiddleware``;
- Pydantic AI: ``summarization-pydantic-ai``'s ``SummarizationProcessor`` (through
  ``ProcessHistory``) against ``CachedSummarization``;
- the OpenAI Agents SDK: ``OpenAIResponsesCompactionSession`` (over an ``SQLiteSession``, with a
  client whose ``responses.compact`` is the fake model: its history lives in the session, so each
  request carries only the new message) against ``CachedSummarizationFilter``;
- Strands Agents: ``SummarizingConversationManager`` against
  ``CachedSummarizingConversationManager``, each request a new agent restored from a
  ``FileSessionManager`` (its history lives in the session), the agent's model overflowing past
  ``TRIGGER`` messages and ``preserve_recent_messages`` the ``KEEP``; then a second worker, with
  session files of its own (another region, a replay), serves the same conversations.
- Google ADK: ``LlmEventSummarizer`` against ``CachedEventsSummarizer``, as the summarizer of a
  sliding window of ``ADK_INTERVAL`` invocations overlapping by one, on a stateless server: each
  request builds a new in-memory session from the history it carries, then runs its turn (the
  agent answers as the dataset does, so that the next request carries its answer).
- LlamaIndex: ``FactExtractionMemoryBlock`` (LlamaIndex's own memory block that condenses what
  ``Memory`` flushes with an LLM) against ``CachedSummaryBlock``, each request a new ``Memory``
  on a shared SQLite chat store and the conversation's session id, flushing past
  ``LLAMA_LIMIT * LLAMA_RATIO`` tokens in batches of ``LLAMA_FLUSH`` (about ``TRIGGER`` and
  ``KEEP`` messages of chitchat); then two workers, requests alternating between them. A
  ``FactExtractionMemoryBlock`` keeps its facts on the object, so a worker keeps one per
  session; the fake model answers it with the batch's last message as one fact. Also printed:
  in how many requests after a flush the memory held every batch flushed so far.

The fake model counts ``ceil(characters / 4)`` input tokens of everything it is sent (prompt and
transcript) and replies with the first 600 characters of the last message it was given. The
agent's own model always answers "ok"; the next request's history is the dataset's.
"""

from __future__ import annotations

import asyncio
import math
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from slimcache.bench.datasets import BenchConversation, load_chitchat, select_conversations

TRIGGER: Final[tuple[Literal["messages"], int]] = ("messages", 20)
KEEP: Final[tuple[Literal["messages"], int]] = ("messages", 10)
MIN_MESSAGES = 40
ADK_INTERVAL = 5
REPLY_CHARS = 600
# Chitchat's messages are about 22 tokens long: Memory's chat history flushes past about
# TRIGGER's 20 messages, about KEEP's 10 at a time.
LLAMA_LIMIT = 880
LLAMA_RATIO = 0.5
LLAMA_FLUSH = 220


@dataclass
class Meter:
    """What the fake summarizing model was sent."""

    calls: int = 0
    input_tokens: int = 0
    note: str = ""  # printed under the row

    def reply(self, texts: list[str]) -> str:
        """Count one call of ``texts``, and answer it."""
        self.calls += 1
        self.input_tokens += sum(math.ceil(len(text) / 4) for text in texts)
        return (texts[-1] if texts else "")[:REPLY_CHARS] or "(nothing)"


def user_turns(conversation: BenchConversation) -> list[int]:
    """The index of each user message: a request is the history up to and with it."""
    return [i for i, m in enumerate(conversation.messages) if m["role"] in ("user", "human")]


# ---------------------------------------------------------------------- LangChain


async def langchain_pair(conversations: list[BenchConversation]) -> list[tuple[str, Meter]]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models import FakeListChatModel, SimpleChatModel

    from slimcache.langchain import CachedSummarizationMiddleware, to_langchain

    class Summaries(SimpleChatModel):
        meter: Any

        @property
        def _llm_type(self) -> str:
            return "metered-fake"

        def _call(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> str:
            return str(self.meter.reply([str(m.content) for m in messages]))

    results = []
    for name in ("LangChain SummarizationMiddleware", "slimcache CachedSummarizationMiddleware"):
        meter = Meter()
        model = Summaries(meter=meter)
        middleware: Any
        if name.startswith("LangChain"):
            middleware = SummarizationMiddleware(model, trigger=TRIGGER, keep=KEEP)
        else:
            middleware = CachedSummarizationMiddleware(
                model, "memory://", trigger=TRIGGER, keep=KEEP
            )
        agent = create_agent(FakeListChatModel(responses=["ok"]), middleware=[middleware])
        for conversation in conversations:
            config: Any = {"configurable": {"thread_id": conversation.id}}
            for end in user_turns(conversation):
                history = to_langchain(conversation.messages[: end + 1])
                await agent.ainvoke({"messages": history}, config)
        results.append((name, meter))
    return results


# ---------------------------------------------------------------------- Pydantic AI


async def pydantic_ai_pair(conversations: list[BenchConversation]) -> list[tuple[str, Meter]]:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai_summarization import SummarizationProcessor

    from slimcache.pydantic_ai import CachedSummarization

    def as_pydantic_ai(messages: list[dict[str, Any]]) -> list[ModelMessage]:
        made: list[ModelMessage] = []
        for message in messages:
            text = str(message["content"])
            if message["role"] == "assistant":
                made.append(ModelResponse([TextPart(text)]))
            elif message["role"] == "system":
                made.append(ModelRequest([SystemPromptPart(text)]))
            else:
                made.append(ModelRequest([UserPromptPart(text)]))
        return made

    def metered(meter: Meter) -> FunctionModel:
        def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            texts = [str(getattr(p, "content", "")) for m in messages for p in m.parts]
            return ModelResponse([TextPart(meter.reply(texts))])

        return FunctionModel(reply)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse([TextPart("ok")])

    results = []
    for name in (
        "summarization-pydantic-ai SummarizationProcessor",
        "slimcache CachedSummarization",
    ):
        meter = Meter()
        capability: Any
        if name.startswith("summarization"):
            processor = SummarizationProcessor(model=metered(meter), trigger=TRIGGER, keep=KEEP)
            capability = ProcessHistory(processor)
        else:
            capability = CachedSummarization(
                metered(meter), "memory://", trigger=TRIGGER, keep=KEEP
            )
        agent = Agent(FunctionModel(answer), capabilities=[capability])
        for conversation in conversations:
            for end in user_turns(conversation):
                history = as_pydantic_ai(conversation.messages[:end])
                prompt = str(conversation.messages[end]["content"])
                await agent.run(prompt, message_history=history, conversation_id=conversation.id)
        results.append((name, meter))
    return results


# ---------------------------------------------------------------------- the Agents SDK


async def agents_pair(conversations: list[BenchConversation]) -> list[tuple[str, Meter]]:
    from agents import Agent, RunConfig, Runner, SQLiteSession
    from agents.items import ModelResponse
    from agents.memory import OpenAIResponsesCompactionSession
    from agents.models.interface import Model
    from agents.testing import assistant_message
    from agents.usage import Usage

    from slimcache.openai_agents import CachedSummarizationFilter

    def text_of(item: Any) -> str:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, list):
            return "".join(str(part.get("text", "")) for part in content)
        return str(content if content is not None else item.get("output", ""))

    class Metered(Model):
        def __init__(self, meter: Meter | None) -> None:
            self.meter = meter
            self.answered = 0

        async def get_response(
            self, system_instructions: Any, input: Any, *a: Any, **k: Any
        ) -> Any:
            if self.meter is None:  # the agent's answer; the compaction session needs its id
                self.answered += 1
                output = [assistant_message("ok", item_id=f"msg-{self.answered}")]
                return ModelResponse(
                    output=output, usage=Usage(), response_id=f"resp-{self.answered}"
                )
            texts = [str(system_instructions or "")] + [text_of(item) for item in input]
            said = assistant_message(self.meter.reply(texts))
            return ModelResponse(output=[said], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    class CompactingClient:
        """``client.responses.compact`` as the fake model: one summary message."""

        def __init__(self, meter: Meter) -> None:
            self.responses = self
            self.meter = meter

        async def compact(self, *, model: str, input: Any = None, **kwargs: Any) -> Any:
            summary = self.meter.reply([text_of(item) for item in input or ()])
            item = {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": summary}]}  # fmt: skip
            return type("Compacted", (), {"output": [item], "usage": None})()

    def should_compact(context: dict[str, Any]) -> bool:
        return len(context["session_items"]) >= TRIGGER[1]

    results = []
    answers = Agent("planner", model=Metered(None))
    config = RunConfig(tracing_disabled=True)
    with tempfile.TemporaryDirectory() as folder:
        meter = Meter()
        for conversation in conversations:
            inner = SQLiteSession(conversation.id, str(Path(folder) / "sessions.db"))
            for end in user_turns(conversation):
                # A worker per request: a new session object on the shared database.
                session = OpenAIResponsesCompactionSession(
                    conversation.id, inner, client=CompactingClient(meter),  # type: ignore[arg-type]
                    should_trigger_compaction=should_compact, compaction_mode="input",
                )  # fmt: skip
                text = str(conversation.messages[end]["content"])
                await Runner.run(answers, text, session=session, run_config=config)
        results.append(("Agents SDK OpenAIResponsesCompactionSession", meter))
    meter = Meter()
    for conversation in conversations:
        cached = CachedSummarizationFilter(
            Metered(meter), "memory://", thread_id=conversation.id, trigger=TRIGGER, keep=KEEP
        )
        run = RunConfig(call_model_input_filter=cached, tracing_disabled=True)
        for end in user_turns(conversation):
            history: Any = [
                {"role": m["role"], "content": str(m["content"])}
                for m in conversation.messages[: end + 1]
            ]
            await Runner.run(answers, history, run_config=run)
    results.append(("slimcache CachedSummarizationFilter", meter))
    return results


async def strands_pair(conversations: list[BenchConversation]) -> list[tuple[str, Meter]]:
    from strands import Agent
    from strands.agent.conversation_manager import SummarizingConversationManager
    from strands.models.model import Model
    from strands.session import FileSessionManager
    from strands.types.exceptions import ContextWindowOverflowException

    from slimcache import MemoryStore
    from slimcache.strands import CachedSummarizingConversationManager

    class Metered(Model):
        """The agent's model (``meter`` ``None``: answers "ok", overflowing past the trigger)
        or the summarizing one."""

        def __init__(self, meter: Meter | None) -> None:
            self.meter = meter

        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(
            self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **k: Any
        ) -> Any:
            if self.meter is None:
                if len(messages) > TRIGGER[1]:
                    raise ContextWindowOverflowException(f"{len(messages)} messages")
                reply = "ok"
            else:
                texts = [str(system_prompt or "")] + [
                    str(block.get("text", "")) for m in messages for block in m["content"]
                ]
                reply = self.meter.reply(texts)
            yield {"messageStart": {"role": "assistant"}}
            yield {"contentBlockDelta": {"delta": {"text": reply}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}

    async def replay(make: Callable[[Model], Any], summarizer: Model, folder: str) -> None:
        for conversation in conversations:
            for end in user_turns(conversation):
                # A worker per request: a new agent on the session's files.
                session = FileSessionManager(session_id=conversation.id, storage_dir=folder)
                agent = Agent(model=Metered(None), aux_model=summarizer, callback_handler=None,
                              conversation_manager=make(summarizer),
                              session_manager=session)  # fmt: skip
                await agent.invoke_async(str(conversation.messages[end]["content"]))

    results = []
    store = MemoryStore()
    for name, make in (
        ("Strands SummarizingConversationManager",
         lambda _: SummarizingConversationManager(preserve_recent_messages=KEEP[1])),
        ("slimcache CachedSummarizingConversationManager",
         lambda summarizer: CachedSummarizingConversationManager(
             summarizer, store, preserve_recent_messages=KEEP[1])),
    ):  # fmt: skip
        for worker in ("", ", second worker"):
            meter = Meter()
            with tempfile.TemporaryDirectory() as folder:
                await replay(make, Metered(meter), folder)
            results.append((name + worker, meter))
    return results


# ---------------------------------------------------------------------- Google ADK


async def adk_pair(conversations: list[BenchConversation]) -> list[tuple[str, Meter]]:
    import warnings

    from google.adk.agents import LlmAgent
    from google.adk.apps.app import App, EventsCompactionConfig
    from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
    from google.adk.events.event import Event
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    from slimcache.google_adk import CachedEventsSummarizer

    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")

    class Metered(BaseLlm):
        meter: Any = None
        answer: str = "ok"

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            texts = [str(llm_request.config.system_instruction or "")] + [
                part.text or "" for content in llm_request.contents for part in content.parts or ()
            ]
            reply = self.answer if self.meter is None else self.meter.reply(texts)
            usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=1)
            content = types.Content(role="model", parts=[types.Part(text=reply)])
            yield LlmResponse(content=content, usage_metadata=usage)

    def said(role: str, text: str) -> types.Content:
        return types.Content(role=role, parts=[types.Part(text=text)])

    results = []
    for name in ("Google ADK LlmEventSummarizer", "slimcache CachedEventsSummarizer"):
        meter = Meter()
        summarizer: Any
        plugins: list[Any] = []
        if name.startswith("Google"):
            summarizer = LlmEventSummarizer(Metered(model="summaries", meter=meter))
        else:
            summarizer = CachedEventsSummarizer(Metered(model="summaries", meter=meter), None)
            plugins = [summarizer.plugin]
        config = EventsCompactionConfig(
            summarizer=summarizer, compaction_interval=ADK_INTERVAL, overlap_size=1
        )
        answers = Metered(model="answers")
        agent = LlmAgent(name="assistant", model=answers)
        app = App(name="peers", root_agent=agent, plugins=plugins, events_compaction_config=config)
        for conversation in conversations:
            for end in user_turns(conversation):
                # A stateless worker: a new session made of the history the request carries.
                sessions = InMemorySessionService()
                session = await sessions.create_session(
                    app_name="peers", user_id="u", session_id=conversation.id
                )
                invocation = ""
                for number, message in enumerate(conversation.messages[:end]):
                    user = message["role"] in ("user", "human")
                    invocation = f"inv-{number}" if user else invocation
                    event = Event(
                        invocation_id=invocation,
                        author="user" if user else "assistant",
                        content=said("user" if user else "model", str(message["content"])),
                    )
                    await sessions.append_event(session, event)
                runner = Runner(app=app, session_service=sessions)
                text = str(conversation.messages[end]["content"])
                # The agent answers as the dataset does, so the next request carries its answer.
                following = conversation.messages[end + 1 : end + 2]
                answers.answer = str(following[0]["content"]) if following else "ok"
                async for _ in runner.run_async(
                    user_id="u", session_id=conversation.id, new_message=said("user", text)
                ):
                    pass
        results.append((name, meter))
    return results


# ---------------------------------------------------------------------- LlamaIndex


async def llama_index_pair(conversations: list[BenchConversation]) -> list[tuple[str, Meter]]:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse
    from llama_index.core.llms import CustomLLM, LLMMetadata
    from llama_index.core.memory import FactExtractionMemoryBlock, Memory
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

    from slimcache import MemoryStore
    from slimcache.llama_index import CachedSummaryBlock

    class Metered(CustomLLM):
        """The fake summarizing model; with ``facts``, its reply is one extracted fact."""

        meter: Any
        facts: bool = False

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="metered-fake")

        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            texts = [str(m.content or "") for m in messages]
            if self.facts:  # [*batch, prompt]: the batch's last message is the fact
                reply = self.meter.reply(texts[-1:] + texts[:-1])
                reply = f"<facts><fact>{reply}</fact></facts>"
            else:
                reply = self.meter.reply(texts)
            return ChatResponse(message=ChatMessage(role="assistant", content=reply))

        async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            return self.chat(messages)

        def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            return CompletionResponse(text=self.meter.reply([prompt]))

        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            raise NotImplementedError

    def tokens(text: str) -> list[int]:
        return [0] * math.ceil(len(text) / 4)

    async def replay(facts: bool, workers: int, meter: Meter, chats: Any) -> tuple[int, int]:
        """Every request, on worker ``number % workers``; returns in how many requests after a
        flush the memory held every batch flushed so far, and how many there were."""
        store = MemoryStore()  # the store every worker shares (Redis, SQL...)
        kept: list[dict[str, Any]] = [{} for _ in range(workers)]  # each worker's blocks
        whole = after = 0
        for conversation in conversations:
            started = meter.calls
            for number, end in enumerate(user_turns(conversation)):
                block = kept[number % workers].get(conversation.id)
                if block is None:
                    model = Metered(meter=meter, facts=facts)
                    block = (FactExtractionMemoryBlock(llm=model) if facts
                             else CachedSummaryBlock(model, store))  # fmt: skip
                    kept[number % workers][conversation.id] = block
                # A request: a new Memory on the shared chat store and session id.
                memory = Memory.from_defaults(
                    session_id=conversation.id, chat_store=chats, token_limit=LLAMA_LIMIT,
                    chat_history_token_ratio=LLAMA_RATIO, token_flush_size=LLAMA_FLUSH,
                    tokenizer_fn=tokens, memory_blocks=[block],
                )  # fmt: skip
                text = str(conversation.messages[end]["content"])
                await memory.aput(ChatMessage(role="user", content=text))
                sent = await memory.aget()
                flushes = meter.calls - started
                if flushes:
                    after += 1
                    system = str(sent[0].content) if sent else ""
                    if facts:
                        whole += system.count("<fact>") == flushes
                    else:
                        whole += f"<{block.name}>" in system
                # The agent answers as the dataset does.
                following = conversation.messages[end + 1 : end + 2]
                answer = str(following[0]["content"]) if following else "ok"
                await memory.aput(ChatMessage(role="assistant", content=answer))
        return whole, after

    results = []
    for name in ("LlamaIndex FactExtractionMemoryBlock", "slimcache CachedSummaryBlock"):
        for workers in (1, 2):
            meter = Meter()
            with tempfile.TemporaryDirectory() as folder:
                uri = f"sqlite+aiosqlite:///{Path(folder) / 'chat.db'}"
                chats = SQLAlchemyChatStore(table_name="chat", async_database_uri=uri)
                facts = name.startswith("LlamaIndex")
                whole, after = await replay(facts, workers, meter, chats)
            meter.note = f"every flushed batch in memory in {whole:,} of {after:,} requests"
            results.append((name if workers == 1 else f"{name}, two workers", meter))
    return results


async def main(count: int) -> None:
    dataset = load_chitchat()
    conversations = select_conversations(
        dataset.conversations, count=count, min_messages=MIN_MESSAGES
    )
    requests = sum(len(user_turns(c)) for c in conversations)
    print(f"{len(conversations)} chitchat conversations, {requests} requests each, "
          f"trigger={TRIGGER}, keep={KEEP}")  # fmt: skip
    print(f"{'framework option':<62}{'calls':>8}{'input tokens':>15}")
    pairs: list[Callable[[list[BenchConversation]], Awaitable[list[tuple[str, Meter]]]]] = [
        langchain_pair, pydantic_ai_pair, agents_pair, strands_pair, adk_pair, llama_index_pair,
    ]  # fmt: skip
    for pair in pairs:
        for name, meter in await pair(conversations):
            print(f"{name:<62}{meter.calls:>8,}{meter.input_tokens:>15,}")
            if meter.note:
                print(f"    {meter.note}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
