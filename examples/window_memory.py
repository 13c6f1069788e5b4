import asyncio

from slimcache import ConversationWindowMemory, MemoryStore, TokenWindowMemory


async def main() -> None:
    # Any store: MemoryStore(), open_store("redis://localhost:6379/0"), "sqlite+aiosqlite:///c.db"
    store = MemoryStore()
    memory = ConversationWindowMemory(store, window_size=4)  # keep every message, load the last 4
    session = "user-1"
    for turn in range(1, 4):
        await memory.append(session, {"role": "user", "content": f"Message {turn}"})
        await memory.append(session, {"role": "assistant", "content": f"Reply {turn}"})

    print([m["content"] for m in await memory.load(session)])
    print(len(await memory.load_all(session)), "messages stored")

    # The same history loaded by token budget; a tool call is never split from its results.
    by_tokens = TokenWindowMemory(store, max_tokens=20)
    print([m["content"] for m in await by_tokens.load(session)])

    await memory.clear(session)
    print(await memory.load_all(session))


asyncio.run(main())
