from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel  # or any model: "gpt-4o-mini", ...
from agents.testing import assistant_message as say

from slimcache.openai_agents import CachedSummarizationFilter

writer = ScriptedModel([[say("Ana plans a week in Lisbon.")]])
sizes = {"trigger": ("messages", 6), "keep": ("messages", 3)}
cached = CachedSummarizationFilter(writer, "memory://", thread_id="trip-42", **sizes)
agent = Agent("planner", model=ScriptedModel([[say(f"Answer {n}.")] for n in range(4)]))
config, history = RunConfig(call_model_input_filter=cached, tracing_disabled=True), []
for q in ["Lisbon in May?", "Hotels?", "Trams?", "Food?"]:
    result = Runner.run_sync(agent, [*history, {"role": "user", "content": q}], run_config=config)
    history = result.to_input_list()  # every item; the model got the summary and the recent ones
print(f"history {len(history)}, summarizer calls {cached.stats.summarizer_calls}")
cached.close()
