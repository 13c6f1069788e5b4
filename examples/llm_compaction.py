import asyncio
import json

from slimcache import Compaction, ToolRefusal, open_store


async def main() -> None:
    store = open_store("memory://")  # or redis://..., sqlite+aiosqlite:///chats.db
    compaction = Compaction(
        "llm",
        context_window=200,
        store=store,
        instructions="Start a new session once used_pct reaches 60.",
    )
    history = [
        {"role": "user", "content": "Refactor the parser, then add tests."},
        {"role": "assistant", "content": "Split the lexer out of parser.py into lexer.py. " * 4},
    ]
    messages = compaction.with_status(history)  # send with tools=compaction.tools("openai")
    print(messages[-1]["content"].splitlines()[0])
    print([tool["function"]["name"] for tool in compaction.tools("openai")])

    # The model calls new_session, first with an empty summary: the call is refused.
    refused = await compaction.handle_new_session(
        '{"summary": " "}', thread_id="chat-42", tool_call_id="call_1"
    )
    assert isinstance(refused, ToolRefusal)
    print(refused.openai_result())

    # It retries with a summary: the conversation continues in a new thread.
    arguments = json.dumps({"summary": "Lexer split out of parser.py. Remaining: add tests."})
    session = await compaction.handle_new_session(
        arguments, thread_id="chat-42", tool_call_id="call_2"
    )
    assert not isinstance(session, ToolRefusal)
    print(session.messages)

    # Any server sharing the store, after a restart too, finds where chat-42 went on.
    restarted = Compaction("llm", context_window=200, store=store)
    print(await restarted.current_session("chat-42") == session.thread_id)


asyncio.run(main())
