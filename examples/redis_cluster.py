import asyncio
from collections.abc import Sequence

from slimcache_redis import RedisStore

from slimcache import KeepMessages, Message, MessageThreshold, SummarizeCompressor, SummaryContext


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    return f"{context.task} of {len(messages)} messages"


async def main() -> None:
    url = "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002/?prefix=myapp:"
    async with RedisStore.from_url(url) as store:  # or open_store(url)
        compressor = SummarizeCompressor(
            summarize, store, trigger=MessageThreshold(6), keep=KeepMessages(4), namespace="docs"
        )
        history: list[Message] = [
            {"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(12)
        ]
        for length in (8, 8, 12):
            result = await compressor.compress_detailed(history[:length], thread_id="chat-42")
            print(length, result.outcome, result.summary_range, result.summary)

        client = store.client  # the redis.asyncio.RedisCluster the URL made
        keys = sorted([key.decode() async for key in client.scan_iter(match="myapp:docs:*")])
        for key in keys:
            print(key, "slot", client.keyslot(key))


asyncio.run(main())
