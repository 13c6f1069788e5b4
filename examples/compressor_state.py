import asyncio
import json
from collections.abc import Sequence

from slimcache import (
    ConversationCompressor,
    KeepMessages,
    Message,
    MessageThreshold,
    SummaryContext,
)


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    # Wrap your LLM here: return await llm(context.to_chat(messages))
    earlier = f"{context.previous_summary}; " if context.previous_summary else ""
    return earlier + ", ".join(str(m["content"]) for m in messages)


async def main() -> None:
    compressor = ConversationCompressor(
        summarize, trigger=MessageThreshold(6), keep=KeepMessages(2)
    )
    compressor.add_message({"role": "system", "content": "You are terse."})
    for i in range(8):  # add_message only appends; nothing is summarized yet
        compressor.add_message({"role": ("user", "assistant")[i % 2], "content": f"turn {i}"})
    for message in await compressor.get_compressed():  # over the trigger: compresses first
        print(message["role"], repr(message["content"]))

    saved = json.dumps(compressor.serialize())  # a file, a database row, a Redis key...
    restored = ConversationCompressor.deserialize(json.loads(saved), summarize)
    restored.add_message({"role": "user", "content": "I am back"})
    print(restored.get_summary(), "|", restored.get_stats().messages_compressed, "compressed")


asyncio.run(main())
