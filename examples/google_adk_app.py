import asyncio
import warnings

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from slimcache.google_adk import CachedEventsSummarizer

warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")  # ADK marks compaction so


class Noted(BaseLlm):  # stands in for "gemini-2.5-flash" and the like
    async def generate_content_async(self, llm_request, stream=False):  # type: ignore[no-untyped-def]
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=9)
        reply = types.Content(role="model", parts=[types.Part(text="Noted.")])
        yield LlmResponse(content=reply, usage_metadata=usage)


summarizer = CachedEventsSummarizer(Noted(model="noted"), "memory://")  # your Redis, SQL, S3...
config = EventsCompactionConfig(summarizer=summarizer, compaction_interval=2, overlap_size=1)
agent = LlmAgent(name="assistant", model=Noted(model="noted"))
app = App(
    name="trip", root_agent=agent, plugins=[summarizer.plugin], events_compaction_config=config
)


async def main() -> None:
    runner = InMemoryRunner(app=app)
    session = await runner.session_service.create_session(app_name="trip", user_id="me")
    for text in ["Lisbon in May?", "Hotels?", "Trams?", "Food?"]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="me", session_id=session.id, new_message=message):
            pass
    kept = await runner.session_service.get_session(
        app_name="trip", user_id="me", session_id=session.id
    )
    print(f"events {len(kept.events)}, summarizer calls {summarizer.stats.summarizer_calls}")
    await summarizer.aclose()


asyncio.run(main())
