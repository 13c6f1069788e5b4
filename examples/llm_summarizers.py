import asyncio
import os

from slimcache import KeepMessages, MessageThreshold, SummarizeCompressor, open_store
from slimcache.llm import AnthropicSummarizer, OpenAISummarizer


def make_summarizer() -> OpenAISummarizer | AnthropicSummarizer:
    if os.environ.get("ANTHROPIC_API_KEY"):
        return AnthropicSummarizer("claude-haiku-4-5")  # reads ANTHROPIC_API_KEY
    return OpenAISummarizer("gpt-4o-mini")  # reads OPENAI_API_KEY (and OPENAI_BASE_URL)


async def main() -> None:
    async with make_summarizer() as summarizer:
        compressor = SummarizeCompressor(
            summarizer,
            open_store("memory://"),  # or redis://..., sqlite+aiosqlite:///..., s3://...
            trigger=MessageThreshold(6),
            keep=KeepMessages(2),
            max_summary_tokens=200,  # sent to the API as max_tokens
        )
        history = [
            {"role": "user", "content": "I'm planning four days in Lisbon in May."},
            {"role": "assistant", "content": "Nice! Museums, food or the coast?"},
            {"role": "user", "content": "Food first, and one day trip to Sintra."},
            {"role": "assistant", "content": "Then book the Sintra train early."},
            {"role": "user", "content": "Budget is about 900 euros, flights included."},
            {"role": "assistant", "content": "Doable: flights 250, four nights 400, food 250."},
            {"role": "user", "content": "Which neighbourhood should I stay in?"},
        ]
        messages = await compressor.compress(history, thread_id="trip-42")
        print(summarizer.name, "->", messages[0]["content"])
        again = await compressor.compress(history, thread_id="trip-42")  # from the store
        print("same:", again == messages, "calls:", compressor.stats.summarizer_calls)


asyncio.run(main())
