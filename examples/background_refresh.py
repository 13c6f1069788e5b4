import asyncio
import time
from collections.abc import Sequence

import slimcache.background
from slimcache import (
    KeepMessages,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    SummaryContext,
    open_store,
)

store = open_store("memory://")  # or "redis://localhost:6379/0": shared by every server


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    await asyncio.sleep(2)  # a model that takes its time
    return f"{context.previous_summary or ''} {len(messages)} messages about the trip".strip()


async def handle(history: list[dict[str, str]]) -> None:
    # A stateless server: a compressor per request, as in any other set-up.
    compressor = SummarizeCompressor(
        summarize,
        store,
        trigger=MessageThreshold(20),  # summarize once the window passes 20 messages...
        keep=KeepMessages(10),
        refresh="background",  # ...but not while the user waits,
        ceiling=MessageThreshold(40),  # as long as the model can take 40 of them
    )
    started = time.perf_counter()
    result = await compressor.compress_detailed(history, thread_id="chat-42")
    took = (time.perf_counter() - started) * 1000
    print(
        f"{len(history)} messages: {result.outcome} in {took:.0f} ms, summary range "
        f"{result.summary_range}, {len(result.messages)} sent, {result.stale_messages} behind"
    )


async def main() -> None:
    history = [
        {"role": ("user", "assistant")[i % 2], "content": f"turn {i} of planning the trip"}
        for i in range(30)
    ]
    await handle(history)  # stale: nothing cached yet, all 30 messages sent; a refresh starts
    history.append({"role": "user", "content": "and the hotel?"})
    await handle(history)  # still at once: its refresh is already running
    await slimcache.background.drain()  # at shutdown, or here, to see the result
    await handle(history)  # a hit


asyncio.run(main())
