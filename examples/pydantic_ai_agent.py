from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel  # or any model: "openai:gpt-4o-mini", ...

from slimcache.pydantic_ai import CachedSummarization

sizes = {"trigger": ("messages", 6), "keep": ("messages", 3)}
cached = CachedSummarization(TestModel(), "memory://", **sizes)
agent, history = Agent(TestModel(), capabilities=[cached]), []
for q in ["Lisbon in May?", "Hotels?", "Trams?", "Food?"]:
    result = agent.run_sync(q, message_history=history, conversation_id="trip-42")
    history = result.all_messages()  # every message; the model got the summary and the recent ones
print(f"history {len(history)}, summarizer calls {cached.stats.summarizer_calls}")
cached.close()
