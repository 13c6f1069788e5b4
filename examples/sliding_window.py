import asyncio
from collections.abc import Sequence

from slimcache import Message, SlidingWindow, SummaryContext, open_store


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    # Wrap your LLM here: return await llm(context.to_chat(messages))
    asked = ", ".join(str(m["content"]).split("?")[0] for m in messages if m["role"] == "user")
    earlier = f"{context.previous_summary}; " if context.previous_summary else "The user asked: "
    return earlier + asked


def compacting(evicted: int, total_tokens: int) -> None:
    print(f"compacting {evicted} messages ({total_tokens} tokens)")


def compacted(before: int, after: int, ratio: float) -> None:
    print(f"{before} -> {after} tokens ({ratio:.2f})")


async def main() -> None:
    window = SlidingWindow(
        "chat-1",  # same id and store: same history and running summary, across restarts
        window_size=4,  # messages kept verbatim
        summarizer=summarize,
        store=open_store("memory://"),  # or "redis://localhost:6379/0", "sqlite+aiosqlite:///c.db"
        summary_budget=1000,
        batch=2,  # compact when the window reaches 4 + 2 messages, back down to 4
        on_compact_start=compacting,
        on_compact_end=compacted,
    )
    for turn in range(1, 6):
        await window.push({"role": "user", "content": f"What is step {turn}? Explain it fully."})
        await window.push({"role": "assistant", "content": f"Step {turn}: " + "details. " * 6})

    for message in await window.get_messages():
        print(f"{message['role']}: {message['content']}")
    print(window.get_stats().to_dict())


asyncio.run(main())
