from llama_index.core.llms import ChatMessage, MockLLM  # or any LLM: OpenAI(model=...), ...
from llama_index.core.memory import Memory

from slimcache.llama_index import CachedSummaryBlock

block = CachedSummaryBlock(MockLLM(max_tokens=40), "memory://")
memory = Memory.from_defaults(
    session_id="trip-42", token_limit=400, chat_history_token_ratio=0.5, memory_blocks=[block]
)
for turn in range(20):
    memory.put(ChatMessage(role="user", content=f"Question {turn} about Lisbon in May? " * 3))
    memory.put(ChatMessage(role="assistant", content=f"Answer {turn}: trams, hotels, food. " * 3))
sent = memory.get()  # the summary in the system message, then the recent messages
calls = block.stats.summarizer_calls
print(f"kept {len(memory.get_all())}, sent {len(sent)}, summarizer calls {calls}")
block.close()
