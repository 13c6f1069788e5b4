"""Model-driven compaction: the context status, the new_session tool, its handler and the links.

Store-backed cases run on the memory store, a real Redis server and a real SQLite file; a
"restart" is a new :class:`Compaction` on a newly opened client of the same store.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from slimcache_redis import RedisStore
from slimcache_sql import SQLStore

from slimcache import (
    Compaction,
    ConfigurationError,
    ContextStatus,
    InvalidInput,
    MemoryStore,
    NewSession,
    Store,
    StoreError,
    ToolRefusal,
)
from slimcache.messages import count_message_tokens
from slimcache.recipes.compaction import DEFAULT_SESSION_TEMPLATE, NEW_SESSION_TOOL
from slimcache.stores import ThreadKeys
from tests.fakes import CountingStore, FailingStore
from tests.servers.sqlite_files import sqlite_url

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llm_compaction.py"
GUIDE = ROOT / "docs" / "guides" / "compaction.md"


Factory = Callable[..., Awaitable[Store]]


def chars(text: str) -> int:
    """A token counter that counts characters, so expected figures are easy to state."""
    return len(text)


def llm(**options: Any) -> Compaction:
    options.setdefault("context_window", 400)
    return Compaction("llm", **options)


@pytest.fixture
def factory(make_store: Factory) -> Factory:
    """The store factory of each store the tests run on (see ``make_store``)."""
    return make_store


@asynccontextmanager
async def reopened(store: Store, factory: Factory) -> AsyncIterator[Store]:
    """A new client of the same store, as a restarted server would open it."""
    if isinstance(store, MemoryStore):
        # The data of a memory store lives in the object itself.
        yield store
    elif isinstance(store, RedisStore):
        await store.aclose()
        yield await factory(prefix=store.prefix)
    else:
        assert isinstance(store, SQLStore)
        database = store.engine.url.database
        assert database is not None
        await store.aclose()
        fresh = SQLStore.from_url(sqlite_url(Path(database)))
        try:
            yield fresh
        finally:
            await fresh.aclose()


# ---------------------------------------------------------------------- the status message


def test_status_message_states_the_figures_for_the_messages_given() -> None:
    compaction = llm(context_window=400, token_counter=chars)
    messages = [
        {"role": "system", "content": "abcd"},  # 4 + 4 overhead
        {"role": "user", "content": "x" * 40},  # 40 + 4
        {"role": "assistant", "content": "y" * 48},  # 48 + 4
    ]
    status = compaction.context_status(messages)
    assert status == ContextStatus(
        used_tokens=104, context_window=400, remaining_tokens=296, used_pct=26
    )
    message = compaction.status_message(messages)
    assert message is not None
    assert message["role"] == "system"
    first, hint = message["content"].split("\n", 1)
    assert first == (
        '<context_status>{"used_pct":26,"used_tokens":104,"remaining_tokens":296,'
        '"context_window":400}</context_status>'
    )
    assert "new_session" in hint
    assert "too full" in hint


def test_status_rounds_the_percentage_down_and_caps_it() -> None:
    assert ContextStatus.measure(399, 400).used_pct == 99
    assert ContextStatus.measure(400, 400) == ContextStatus(400, 400, 0, 100)
    assert ContextStatus.measure(900, 400) == ContextStatus(900, 400, 0, 100)
    assert ContextStatus.measure(0, 400) == ContextStatus(0, 400, 400, 0)


def test_status_counts_extra_tokens_and_follows_the_compressor_rule_by_default() -> None:
    compaction = llm(context_window=1000)
    messages = [
        {"role": "user", "content": "Please refactor the parser module."},
        {"role": "assistant", "content": "Done: the lexer now lives in lexer.py."},
    ]
    expected = sum(count_message_tokens(m) for m in messages)
    assert compaction.context_status(messages).used_tokens == expected
    assert compaction.context_status(messages, extra_tokens=50).used_tokens == expected + 50


def test_status_counts_the_content_of_anthropic_tool_blocks() -> None:
    compaction = llm(token_counter=chars, message_overhead=0)
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "abc"},
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "z" * 30}],
        },
    ]
    arguments = len(json.dumps({"q": "x"}))
    assert compaction.context_status(messages).used_tokens == 3 + 4 + arguments + 30


@pytest.mark.parametrize(
    ("messages", "extra"),
    [
        ([{"role": "wizard", "content": "hi"}], 0),
        ([{"role": "user"}], 0),
        ("not a list", 0),
        ([{"role": "user", "content": "hi"}], -1),
        ([{"role": "user", "content": "hi"}], True),
    ],
)
def test_status_rejects_malformed_input(messages: Any, extra: Any) -> None:
    with pytest.raises(InvalidInput):
        llm().context_status(messages, extra_tokens=extra)


def test_with_status_appends_the_status_and_leaves_the_input_alone() -> None:
    compaction = llm(token_counter=chars)
    messages = [{"role": "user", "content": "hello"}]
    sent = compaction.with_status(messages)
    assert sent[:-1] == messages
    assert sent[-1] == compaction.status_message(messages)
    assert messages == [{"role": "user", "content": "hello"}]


def test_auto_mode_produces_no_status_message() -> None:
    compaction = Compaction("auto", context_window=400)
    messages = [{"role": "user", "content": "hello"}]
    assert compaction.status_message(messages) is None
    assert compaction.with_status(messages) == messages
    # The figures themselves are still there for whoever wants them.
    assert compaction.context_status(messages).used_tokens > 0


def test_auto_is_the_default_mode() -> None:
    assert Compaction(context_window=10).mode == "auto"


# ---------------------------------------------------------------------- the tool definitions


def _check_schema(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"summary": "Done: A. Remaining: B."})
    assert not validator.is_valid({})
    assert not validator.is_valid({"summary": 3})
    assert not validator.is_valid({"summary": "x", "title": "y"})
    assert schema["required"] == ["summary"]
    assert schema["properties"]["summary"]["type"] == "string"


def test_openai_tool_definition() -> None:
    (tool,) = llm().tools("openai")
    assert set(tool) == {"type", "function"}
    assert tool["type"] == "function"
    function = tool["function"]
    assert set(function) == {"name", "description", "parameters"}
    assert function["name"] == NEW_SESSION_TOOL == "new_session"
    assert "<context_status>" in function["description"]
    _check_schema(function["parameters"])
    json.dumps(tool)  # sendable as is


def test_anthropic_tool_definition() -> None:
    (tool,) = llm().tools("anthropic")
    assert set(tool) == {"name", "description", "input_schema"}
    assert tool["name"] == "new_session"
    assert tool["description"] == llm().tools("openai")[0]["function"]["description"]
    _check_schema(tool["input_schema"])
    json.dumps(tool)


def test_tool_definitions_are_fresh_copies() -> None:
    compaction = llm()
    compaction.tools("openai")[0]["function"]["parameters"]["required"].append("oops")
    assert compaction.tools("openai")[0]["function"]["parameters"]["required"] == ["summary"]


def test_instructions_go_into_the_tool_description_not_the_status() -> None:
    rule = "Start a new session when fewer than 5000 tokens remain; list open TODOs."
    compaction = llm(instructions=f"  {rule}\n")
    description = compaction.tools("openai")[0]["function"]["description"]
    assert description.endswith(rule)
    assert "take precedence" in description
    assert compaction.tools("anthropic")[0]["description"] == description
    status = compaction.status_message([{"role": "user", "content": "hi"}])
    assert status is not None
    assert rule not in status["content"]
    assert rule not in llm().tool_description


def test_auto_mode_offers_no_tool() -> None:
    compaction = Compaction("auto", context_window=400)
    assert compaction.tools("openai") == []
    assert compaction.tools("anthropic") == []


def test_unknown_api_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="openai"):
        llm().tools("gemini")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"mode": "manual"}, "mode"),
        ({"mode": "LLM"}, "mode"),
        ({"context_window": 0}, "context_window"),
        ({"context_window": -100}, "context_window"),
        ({"context_window": 1.5}, "context_window"),
        ({"context_window": "8000"}, "context_window"),
        ({"context_window": True}, "context_window"),
        ({"instructions": "   "}, "instructions"),
        ({"instructions": 5}, "instructions"),
        ({"store": object()}, "store"),
        ({"namespace": "a\nb"}, "namespace"),
        ({"token_counter": "len"}, "token_counter"),
        ({"message_overhead": -1}, "message_overhead"),
        ({"session_role": "assistant"}, "session_role"),
        ({"session_template": "no placeholder"}, "session_template"),
        ({"session_template": "{summary} {oops}"}, "session_template"),
        ({"ttl": 0}, "ttl"),
        ({"store_timeout": 0}, "store_timeout"),
    ],
)
def test_bad_configuration_is_refused(options: dict[str, Any], field: str) -> None:
    arguments: dict[str, Any] = {"mode": "llm", "context_window": 1000, **options}
    mode = arguments.pop("mode")
    with pytest.raises(ConfigurationError, match=field):
        Compaction(mode, **arguments)


# ---------------------------------------------------------------------- the handler


@pytest.mark.parametrize(
    "arguments",
    [
        '{"summary": ""}',
        '{"summary": "   \\n\\t"}',
        {"summary": ""},
        {"summary": None},
        "{}",
        "",
        {},
        "not json",
        '{"summary": "unterminated',
        "[1, 2]",
        '{"summary": 3}',
        {"summary": ["a", "b"]},
        None,
        42,
    ],
)
async def test_malformed_calls_are_tool_errors_and_write_nothing(arguments: object) -> None:
    store = CountingStore()
    compaction = llm(store=store)
    result = await compaction.handle_new_session(arguments, thread_id="t", tool_call_id="c1")
    assert isinstance(result, ToolRefusal)
    assert "summary" in result.message
    assert store.sets == 0
    assert store.data == {}


async def test_empty_summary_error_asks_for_a_summary() -> None:
    result = await llm().handle_new_session('{"summary": " "}', thread_id="t")
    assert isinstance(result, ToolRefusal)
    assert "non-empty summary" in result.message


async def test_tool_error_in_both_apis_shapes() -> None:
    error = await llm().handle_new_session({"summary": ""}, thread_id="t", tool_call_id="call_9")
    assert isinstance(error, ToolRefusal)
    assert error.openai_result() == {
        "role": "tool",
        "tool_call_id": "call_9",
        "content": error.message,
    }
    assert error.anthropic_result() == {
        "type": "tool_result",
        "tool_use_id": "call_9",
        "is_error": True,
        "content": error.message,
    }
    assert error.openai_result("other")["tool_call_id"] == "other"
    assert error.anthropic_result("toolu_1")["tool_use_id"] == "toolu_1"


async def test_formatting_a_result_needs_a_call_id() -> None:
    error = await llm().handle_new_session("{}", thread_id="t")
    assert isinstance(error, ToolRefusal)
    with pytest.raises(InvalidInput, match="tool_call_id"):
        error.openai_result()
    with pytest.raises(InvalidInput, match="tool_use_id"):
        error.anthropic_result()
    with pytest.raises(InvalidInput):
        error.openai_result("")


async def test_empty_summary_then_retry_starts_a_session_stored_under_the_new_thread(
    factory: Factory,
) -> None:
    store = await factory()
    compaction = llm(store=store)
    old = ThreadKeys("chat-42")

    refused = await compaction.handle_new_session(
        '{"summary": "  "}', thread_id="chat-42", tool_call_id="call_1"
    )
    assert isinstance(refused, ToolRefusal)
    assert await store.get(old.prefix + "next") is None

    summary = "Refactored the parser (lexer.py split out). Remaining: tests for lexer.py."
    session = await compaction.handle_new_session(
        json.dumps({"summary": f"\n{summary}  "}), thread_id="chat-42", tool_call_id="call_2"
    )
    assert isinstance(session, NewSession)
    assert session.thread_id != "chat-42"
    assert session.previous_thread_id == "chat-42"
    assert session.summary == summary
    assert session.first_message == {
        "role": "user",
        "content": DEFAULT_SESSION_TEMPLATE.format(summary=summary),
    }
    assert session.messages == [session.first_message]
    assert session.messages is not session.messages  # a copy each time

    new = ThreadKeys(session.thread_id)
    raw = await store.get(new.prefix + "session")
    assert raw is not None
    record = json.loads(raw)
    assert record["format"] == "slimcache.session"
    assert record["thread_id"] == session.thread_id
    assert record["previous_thread_id"] == "chat-42"
    assert record["summary"] == summary
    assert record["first_message"] == session.first_message
    assert record["tool_call_id"] == "call_2"
    link = await store.get(old.prefix + "next")
    assert link is not None
    assert json.loads(link)["next_thread_id"] == session.thread_id
    # Nothing is stored under the old thread's session key or the new thread's link.
    assert await store.get(old.prefix + "session") is None
    assert await store.get(new.prefix + "next") is None


async def test_links_are_followed_after_a_restart(factory: Factory) -> None:
    store = await factory()
    first = llm(store=store, namespace="app")
    one = await first.handle_new_session(
        {"summary": "Part one done."}, thread_id="chat-7", tool_call_id="a"
    )
    assert isinstance(one, NewSession)
    two = await first.handle_new_session(
        {"summary": "Part two done."}, thread_id=one.thread_id, tool_call_id="b"
    )
    assert isinstance(two, NewSession)
    assert len({"chat-7", one.thread_id, two.thread_id}) == 3

    async with reopened(store, factory) as again:
        restarted = llm(store=again, namespace="app")
        assert await restarted.current_session("chat-7") == two.thread_id
        assert await restarted.current_session(one.thread_id) == two.thread_id
        assert await restarted.current_session(two.thread_id) == two.thread_id
        assert await restarted.current_session("never-continued") == "never-continued"
        record = await restarted.session(two.thread_id)
        assert record == two
        assert record is not None
        assert record.previous_thread_id == one.thread_id
        assert record.messages == two.messages
        assert await restarted.session("chat-7") is None
        # Another namespace sees none of it.
        assert await llm(store=again).current_session("chat-7") == "chat-7"


async def test_keys_follow_the_key_grammar() -> None:
    store = MemoryStore()
    compaction = llm(store=store, namespace="app")
    session = await compaction.handle_new_session(
        {"summary": "s"}, thread_id="user:1/chat", tool_call_id="c"
    )
    assert isinstance(session, NewSession)
    assert set(store.snapshot()) == {
        "app:thread_user%3A1%2Fchat:next",
        f"app:thread_{session.thread_id}:session",
    }
    assert re.fullmatch(r"session-[0-9a-f]{32}", session.thread_id)


async def test_the_same_call_handled_twice_gives_the_same_session() -> None:
    store = CountingStore()
    compaction = llm(store=store)
    first = await compaction.handle_new_session({"summary": "s"}, thread_id=5, tool_call_id="c")
    writes = store.sets
    again = await llm(store=store).handle_new_session(
        {"summary": "s"}, thread_id=5, tool_call_id="c"
    )
    assert again == first
    assert store.sets == writes
    assert isinstance(first, NewSession)
    # A later, different call from the thread that already moved on is refused: the session
    # has ended, and its link keeps pointing at the newest one.
    other = await compaction.handle_new_session({"summary": "s"}, thread_id=5, tool_call_id="d")
    assert isinstance(other, ToolRefusal)
    assert first.thread_id in other.message
    assert store.sets == writes
    assert await compaction.current_session(5) == first.thread_id


async def test_without_a_call_id_each_session_gets_a_random_thread() -> None:
    compaction = llm()
    one = await compaction.handle_new_session({"summary": "s"}, thread_id="t")
    two = await compaction.handle_new_session({"summary": "s"}, thread_id="u")
    assert isinstance(one, NewSession)
    assert isinstance(two, NewSession)
    assert one.thread_id != two.thread_id
    assert re.fullmatch(r"session-[0-9a-f]{32}", one.thread_id)
    # A second call from "t", with no call id to recognise a retry by, is a second
    # continuation: refused.
    assert isinstance(
        await compaction.handle_new_session({"summary": "s"}, thread_id="t"), ToolRefusal
    )


async def test_a_late_call_from_an_ended_session_never_re_points_it(factory: Factory) -> None:
    # Crush: the agent calls new_session, the conversation goes on in the new session, and
    # a late (or replayed) call from the old one arrives. current_session() must still reach
    # the newest session.
    store = await factory()
    compaction = llm(store=store)
    one = await compaction.handle_new_session({"summary": "a"}, thread_id="t", tool_call_id="c1")
    assert isinstance(one, NewSession)
    two = await compaction.handle_new_session(
        {"summary": "b"}, thread_id=one.thread_id, tool_call_id="c2"
    )
    assert isinstance(two, NewSession)
    late = await compaction.handle_new_session({"summary": "x"}, thread_id="t", tool_call_id="c9")
    assert isinstance(late, ToolRefusal)
    assert await compaction.current_session("t") == two.thread_id
    # The same call again still returns its session.
    again = await compaction.handle_new_session({"summary": "a"}, thread_id="t", tool_call_id="c1")
    assert again == one


async def test_two_calls_continuing_one_thread_at_once_give_one_session(factory: Factory) -> None:
    store = await factory()
    results = await asyncio.gather(
        *(
            llm(store=store).handle_new_session(
                {"summary": f"s{n}"}, thread_id="t", tool_call_id=f"c{n}"
            )
            for n in range(6)
        )
    )
    sessions = [r for r in results if isinstance(r, NewSession)]
    assert len(sessions) == 1
    assert await llm(store=store).current_session("t") == sessions[0].thread_id


async def test_a_chosen_thread_id_and_message_shape() -> None:
    compaction = llm(session_role="system", session_template="Carry on from: {summary}")
    session = await compaction.handle_new_session(
        {"summary": "step 3 of 5"}, thread_id="t", new_thread_id="t-2"
    )
    assert isinstance(session, NewSession)
    assert session.thread_id == "t-2"
    assert session.first_message == {"role": "system", "content": "Carry on from: step 3 of 5"}
    assert await compaction.current_session("t") == "t-2"


async def test_success_results_answer_the_call_in_the_old_thread() -> None:
    session = await llm().handle_new_session({"summary": "s"}, thread_id="t", tool_call_id="call_3")
    assert isinstance(session, NewSession)
    openai = session.openai_result()
    assert openai["role"] == "tool"
    assert openai["tool_call_id"] == "call_3"
    assert session.thread_id in openai["content"]
    anthropic = session.anthropic_result("toolu_3")
    assert anthropic["type"] == "tool_result"
    assert anthropic["tool_use_id"] == "toolu_3"
    assert anthropic["is_error"] is False


async def test_auto_mode_refuses_the_call_and_writes_nothing() -> None:
    store = CountingStore()
    compaction = Compaction("auto", context_window=400, store=store)
    result = await compaction.handle_new_session(
        {"summary": "a fine summary"}, thread_id="t", tool_call_id="c"
    )
    assert isinstance(result, ToolRefusal)
    assert "not available" in result.message
    assert result.openai_result()["tool_call_id"] == "c"
    assert store.sets == 0


@pytest.mark.parametrize(
    "options",
    [
        {"thread_id": ""},
        {"thread_id": 1.5},
        {"thread_id": "t", "tool_call_id": ""},
        {"thread_id": "t", "tool_call_id": 7},
        {"thread_id": "t", "new_thread_id": "t"},
        {"thread_id": "t", "new_thread_id": ""},
        {"thread_id": "t", "new_thread_id": 3},
    ],
)
async def test_bad_ids_raise_before_anything_is_written(options: dict[str, Any]) -> None:
    store = CountingStore()
    with pytest.raises(InvalidInput):
        await llm(store=store).handle_new_session({"summary": "s"}, **options)
    assert store.sets == 0


async def test_a_failed_link_write_removes_the_session_record() -> None:
    store = FailingStore(fail_writes_after=1)
    compaction = llm(store=store)
    with pytest.raises(StoreError, match="write refused"):
        await compaction.handle_new_session({"summary": "s"}, thread_id="t", tool_call_id="c")
    assert store.data == {}
    assert store.deletes == 1


async def test_unusable_stored_values_are_ignored(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    keys = ThreadKeys("t")
    await store.set(keys.prefix + "next", "{not json")
    await store.set(keys.prefix + "session", json.dumps({"format": "slimcache.session"}))
    compaction = llm(store=store)
    assert await compaction.current_session("t") == "t"
    assert await compaction.session("t") is None
    assert "unusable" in caplog.text


async def test_a_cycle_of_links_ends_the_walk() -> None:
    store = MemoryStore()
    compaction = llm(store=store)
    await compaction.handle_new_session({"summary": "s"}, thread_id="a", new_thread_id="b")
    await compaction.handle_new_session({"summary": "s"}, thread_id="b", new_thread_id="a")
    assert await compaction.current_session("a") == "b"
    assert await compaction.current_session("b") == "a"


# ---------------------------------------------------------------------- the docs and example


def test_example_runs_offline() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    ).stdout
    lines = out.splitlines()
    assert lines[0].startswith('<context_status>{"used_pct":32,"used_tokens":65,')
    assert lines[1] == "['new_session']"
    assert "'role': 'tool', 'tool_call_id': 'call_1'" in lines[2]
    assert "non-empty summary" in lines[2]
    assert "Remaining: add tests." in lines[3]
    assert "'role': 'user'" in lines[3]
    assert lines[4] == "True"


def test_the_guide_includes_the_example() -> None:
    guide = GUIDE.read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/llm_compaction.py"\n```' in guide
