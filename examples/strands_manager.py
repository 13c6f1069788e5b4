from strands import Agent

from slimcache import MemoryStore
from slimcache.strands import CachedSummarizingConversationManager


async def summarize(messages, context):  # or a Strands model: BedrockModel(...), a model id
    return f"Ana plans a week in Lisbon ({len(messages)} messages)."


turns = [{"role": ["user", "assistant"][i % 2], "content": [{"text": f"{i}"}]} for i in range(30)]
store, calls = MemoryStore(), []  # your store: "redis://localhost:6379/0", ...
for _worker in ("a", "b"):  # two workers on one store: the second is served from it
    manager = CachedSummarizingConversationManager(summarize, store, thread_id="trip-42")
    agent = Agent(messages=list(turns), conversation_manager=manager, callback_handler=None)
    manager.reduce_context(agent)  # what Strands calls when the context window overflows
    calls.append(manager.stats.summarizer_calls)
print(f"{len(agent.messages)} messages, summarizer calls {calls[0]}, then {calls[1]}")
