from langchain.agents import create_agent
from langchain_core.language_models import FakeListChatModel
from langgraph.checkpoint.memory import InMemorySaver

from slimcache.langchain import CachedSummarizationMiddleware

# Any chat model, or a model string such as "openai:gpt-4o-mini"; these two are canned.
summarizer = FakeListChatModel(responses=["Ana is planning a week in Lisbon in May."])
model = FakeListChatModel(responses=[f"Answer {n}." for n in range(1, 9)])

middleware = CachedSummarizationMiddleware(
    summarizer,
    "memory://",  # or redis://..., postgresql+asyncpg://..., s3://...: shared by every worker
    trigger=("messages", 6),
    keep=("messages", 3),
)
agent = create_agent(
    model, system_prompt="You plan trips.", middleware=[middleware], checkpointer=InMemorySaver()
)

run = {"configurable": {"thread_id": "trip-42"}}
for question in ["Lisbon in May?", "Hotels?", "Trams?", "Food?", "Day trips?", "Budget?"]:
    state = agent.invoke({"messages": [{"role": "user", "content": question}]}, run)

print("the state keeps", len(state["messages"]), "messages")
stats = middleware.stats
print(f"requests {stats.requests}, summarizer calls {stats.summarizer_calls}", end=", ")
print(f"hits {stats.cache_hits}")
