"""CachedSummaryBlock in a real LlamaIndex Memory, on real stores.

The chat store is LlamaIndex's own SQLAlchemyChatStore on a SQLite file and the summaries live
in a real slimcache store; the summarizer is a recording function or LlamaIndex's ``MockLLM``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from slimcache import (
    ConfigurationError,
    MemoryStore,
    SummarizerError,
    SummaryContext,
    open_store,
)
from slimcache.core import breaker
from slimcache.llama_index import CachedSummaryBlock, LlamaIndexSummarizer
from slimcache.messages import Message
from slimcache.stores import Store

ROOT = Path(__file__).resolve().parents[2]


class Recording:
    """A summarizer that records what each call was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Message], str | None]] = []
        self.fail = False

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        if self.fail:
            raise RuntimeError("the model is down")
        self.calls.append(([dict(m) for m in messages], context.previous_summary))
        return f"summary {len(self.calls)} through {messages[-1].get('content', '')[:20]!r}"


def turn(number: int) -> list[ChatMessage]:
    """One turn: a question, and every third turn a tool call and its result before the answer."""
    words = "about the trip " * 8
    messages = [ChatMessage(role="user", content=f"question {number} {words}")]
    if number % 3 == 0:
        call = {"id": f"call-{number}", "type": "function",
                "function": {"name": "lookup", "arguments": f'{{"q": {number}}}'}}  # fmt: skip
        messages.append(
            ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [call]})
        )
        messages.append(
            ChatMessage(
                role="tool",
                content=f"result {number}",
                additional_kwargs={"tool_call_id": f"call-{number}", "name": "lookup"},
            )
        )
    messages.append(ChatMessage(role="assistant", content=f"answer {number} {words}"))
    return messages


def chat_store(path: Path) -> SQLAlchemyChatStore:
    return SQLAlchemyChatStore(
        table_name="chat", async_database_uri=f"sqlite+aiosqlite:///{path / 'chat.db'}"
    )


def memory(block: CachedSummaryBlock, chats: SQLAlchemyChatStore) -> Memory:
    return Memory.from_defaults(
        session_id="trip-42",
        token_limit=600,
        chat_history_token_ratio=0.5,
        token_flush_size=120,
        memory_blocks=[block],
        chat_store=chats,
    )


async def replay(mem: Memory, turns: int = 20) -> int:
    sent = 0
    for number in range(turns):
        for message in turn(number):
            await mem.aput(message)
            sent += 1
    return sent


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened: Any = open_store(f"sqlite+aiosqlite:///{tmp_path / 'summaries.db'}")
    yield opened
    await opened.aclose()


async def test_a_replay_compresses_what_the_model_sees_and_keeps_every_message(
    tmp_path: Path, store: Store
) -> None:
    summarizer = Recording()
    block = CachedSummaryBlock(summarizer, store, strategy="extend")
    mem = memory(block, chat_store(tmp_path))
    sent = await replay(mem)

    everything = await mem.aget_all()
    assert len(everything) == sent  # the chat store keeps every message
    seen = await mem.aget()
    assert len(seen) < sent / 3
    assert "summary" in str(seen[0].content)
    assert seen[0].role.value == "system"
    # Each call was given the summary so far and one flushed batch only.
    assert len(summarizer.calls) >= 3
    assert summarizer.calls[0][1] is None
    assert all(previous is not None for _, previous in summarizer.calls[1:])
    assert sum(len(batch) for batch, _ in summarizer.calls) == sent - (len(seen) - 1)
    # Tool pairs stay whole: every tool result follows the call it answers, in the same call.
    for batch, _ in summarizer.calls:
        for index, message in enumerate(batch):
            if message["role"] == "tool":
                before = batch[index - 1]
                assert before["role"] == "assistant"
                assert before["tool_calls"][0]["id"] == message["tool_call_id"]
    assert block.stats.summarizer_calls == len(summarizer.calls)


async def test_a_memory_built_again_in_another_process_reads_the_summary_with_no_call(
    tmp_path: Path, store: Store
) -> None:
    summarizer = Recording()
    block = CachedSummaryBlock(summarizer, store)
    mem = memory(block, chat_store(tmp_path))
    await replay(mem)
    seen = await mem.aget()
    await block.aclose()

    script = textwrap.dedent(f"""
        import asyncio
        from llama_index.core.memory import Memory
        from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
        from slimcache.llama_index import CachedSummaryBlock

        calls = []
        async def summarize(messages, context):
            calls.append(messages)
            return "made again"

        async def main():
            block = CachedSummaryBlock(summarize, "sqlite+aiosqlite:///{tmp_path / "summaries.db"}")
            chats = SQLAlchemyChatStore(
                table_name="chat", async_database_uri="sqlite+aiosqlite:///{tmp_path / "chat.db"}"
            )
            mem = Memory.from_defaults(session_id="trip-42", token_limit=600,
                chat_history_token_ratio=0.5, memory_blocks=[block], chat_store=chats)
            seen = await mem.aget()
            print(repr(seen[0].content))
            print("calls", len(calls), block.stats.summarizer_calls)
            await block.aclose()

        asyncio.run(main())
    """)
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == repr(seen[0].content)
    assert "calls 0 0" in result.stdout


async def test_a_failing_summarizer_never_fails_memory_and_its_batch_joins_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    summarizer = Recording()
    block = CachedSummaryBlock(summarizer, MemoryStore())
    mem = memory(block, chat_store(tmp_path))
    await replay(mem, 8)
    before = len(summarizer.calls)
    summary = (await mem.aget())[0].content
    summarizer.fail = True
    for number in range(8, 12):
        for message in turn(number):
            await mem.aput(message)  # does not raise
    assert block.stats.summarizer_errors >= 1
    assert "the summarizer failed" in caplog.text
    assert (await mem.aget())[0].content == summary  # the summary it had is served
    summarizer.fail = False
    breaker.cool_downs_over()  # the model is back: its breaker lets the next call probe it
    for number in range(12, 16):
        for message in turn(number):
            await mem.aput(message)
    flushed = sum(len(batch) for batch, _ in summarizer.calls)
    active = [m for m in await mem.aget() if m.role.value != "system"]
    assert flushed == len(await mem.aget_all()) - len(active)  # no flushed message was lost
    assert len(summarizer.calls) > before


async def test_raise_lets_the_failure_out() -> None:
    summarizer = Recording()
    summarizer.fail = True
    block = CachedSummaryBlock(summarizer, MemoryStore(), on_summarizer_error="raise")
    with pytest.raises(SummarizerError):
        await block.aput([ChatMessage(role="user", content="hi")], session_id="s")


async def test_concurrent_flushes_of_one_session_lose_no_batch() -> None:
    store = MemoryStore()
    summarizer = Recording()
    blocks = [CachedSummaryBlock(summarizer, store) for _ in range(4)]
    batches = [
        [ChatMessage(role="user", content=f"batch {n} message {i}") for i in range(3)]
        for n in range(4)
    ]
    await asyncio.gather(
        *(block.aput(batch, session_id="s") for block, batch in zip(blocks, batches, strict=True))
    )
    raw = await store.get("thread_s:batches")
    assert raw is not None
    assert '"count":12' in raw
    assert '"end":11' in raw


def test_memory_decides_when_so_sizes_are_refused_before_the_store_is_opened(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'never.db'}"
    for setting, value in [("trigger", ("messages", 5)), ("keep", ("messages", 2))]:
        with pytest.raises(ConfigurationError, match=setting):
            CachedSummaryBlock(Recording(), url, **{setting: value})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_summary_tokens"):
        CachedSummaryBlock(Recording(), url, max_summary_tokens=-1)
    with pytest.raises(ConfigurationError, match="model"):
        CachedSummaryBlock(42, url)  # type: ignore[arg-type]
    assert not (tmp_path / "never.db").exists()


async def test_a_llama_index_llm_summarizes_and_a_setting_reaches_it() -> None:
    block = CachedSummaryBlock(MockLLM(max_tokens=20), MemoryStore(), max_summary_tokens=300)
    await block.aput([ChatMessage(role="user", content="Lisbon in May?")], session_id="s")
    assert await block.aget(session_id="s")
    assert block.stats.summarizer_calls == 1
    assert LlamaIndexSummarizer(MockLLM()).provider is None


def test_the_guide_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "llama_index_memory.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "kept 40, sent 5" in result.stdout
    guide = (ROOT / "docs" / "guides" / "llama-index.md").read_text()
    assert '```python\n--8<-- "examples/llama_index_memory.py"\n```' in guide
