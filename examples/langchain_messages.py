import asyncio

from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from slimcache import KeepMessages, MessageThreshold, SummarizeCompressor, open_store
from slimcache.langchain import LangChainSummarizer, compress_langchain, from_langchain

# Any LangChain chat model summarizes, e.g. ChatOpenAI(model="gpt-4o-mini"); this one is canned.
model = FakeListChatModel(responses=["The user is in Lisbon (22C, sunny) and has a table at 8pm."])

history = [
    SystemMessage("You plan trips."),
    HumanMessage("What's the weather in Lisbon?"),
    AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "call_1"}]),
    ToolMessage("22C, sunny", tool_call_id="call_1"),
    AIMessage("22C and sunny."),
    HumanMessage("Book a table for two at 8pm."),
    AIMessage("Done: Taberna da Rua, 8pm."),
    HumanMessage("And a taxi at 7:30?"),
]


async def main() -> None:
    compressor = SummarizeCompressor(
        LangChainSummarizer(model),
        open_store("memory://"),  # or redis://..., sqlite+aiosqlite:///..., s3://...
        trigger=MessageThreshold(6),
        keep=KeepMessages(2),
    )
    messages = await compress_langchain(compressor, history, thread_id="trip-42")
    for message in messages:
        print(f"{type(message).__name__}: {message.content}")
    print("same objects:", messages[0] is history[0], messages[-1] is history[-1])
    print(from_langchain(history[2:4]))


asyncio.run(main())
