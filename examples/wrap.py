import asyncio
from typing import Any

from slimcache import cached_summarizer, open_store

calls: list[list[str]] = []


@cached_summarizer(open_store("memory://"))  # or redis://..., sqlite+aiosqlite:///..., s3://...
def summarize(messages: list[dict[str, Any]]) -> str:  # your existing function (an LLM call)
    calls.append([m["content"] for m in messages])
    return " / ".join(m["content"] for m in messages)


async def main() -> None:
    history = [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(6)]
    print(await summarize(history[:4], thread_id="chat-42"))
    print(await summarize(history[:4], thread_id="chat-42"))  # from the store: no call
    print(await summarize(history, thread_id="chat-42"))  # sends the summary and 2 new turns
    print("calls:", calls)


asyncio.run(main())
