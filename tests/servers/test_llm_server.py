"""The local chat API at its limits, through the official SDKs: as a real server behaves.

A prompt over the context size is rejected with the body llama.cpp (OpenAI path) or Anthropic
gives; a reply over the request's token budget is cut and marked so; a wrong key is refused.
"""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.servers.llm_server import (
    ANTHROPIC_PATH,
    MESSAGE_OVERHEAD,
    MODELS_PATH,
    OPENAI_PATH,
    LLMServer,
    Reply,
    count_tokens,
    prompt_tokens,
)

KEY = "test-key"
LONG = "word " * 400  # 2,000 characters: 500 tokens as the server counts


def openai_client(server: LLMServer, key: str = KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.openai_base_url, api_key=key, max_retries=0)


def anthropic_client(server: LLMServer, key: str = KEY) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.anthropic_base_url, api_key=key, max_retries=0)


def test_the_servers_token_count() -> None:
    assert [count_tokens(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    body = {"messages": [{"role": "system", "content": "abcd"}, {"role": "user", "content": LONG}]}
    assert prompt_tokens(OPENAI_PATH, body) == 1 + 500 + 2 * MESSAGE_OVERHEAD
    anthropic_body = {"system": "abcd", "messages": [{"role": "user", "content": LONG}]}
    assert prompt_tokens(ANTHROPIC_PATH, anthropic_body) == prompt_tokens(OPENAI_PATH, body)


async def test_openai_prompt_over_the_context_is_rejected_as_llama_cpp_does(
    llm_server: LLMServer,
) -> None:
    llm_server.context_tokens = 100
    llm_server.enqueue(Reply(text="scripted"))
    async with openai_client(llm_server) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": LONG}], max_tokens=10
            )
        error = caught.value
        assert error.status_code == 400
        tokens = 500 + MESSAGE_OVERHEAD
        assert (
            f"request ({tokens} tokens) exceeds the available context size (100 tokens)"
            in error.message
        )
        assert isinstance(error.body, dict)
        assert error.body["type"] == "exceed_context_size_error"
        assert (error.body["n_prompt_tokens"], error.body["n_ctx"]) == (tokens, 100)
        # A prompt that fits is answered, and the script was not used up by the rejection.
        fits = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "short"}], max_tokens=10
        )
    assert fits.choices[0].message.content == "scripted"
    assert len(llm_server.bodies(OPENAI_PATH)) == 2


async def test_anthropic_prompt_over_the_context_is_rejected(llm_server: LLMServer) -> None:
    llm_server.context_tokens = 100
    async with anthropic_client(llm_server) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(
                model="claude-tiny",
                system="be short",
                messages=[{"role": "user", "content": LONG}],
                max_tokens=10,
            )
    tokens = 2 + 500 + 2 * MESSAGE_OVERHEAD
    assert f"prompt is too long: {tokens} tokens > 100 maximum" in caught.value.message
    assert caught.value.status_code == 400


async def test_openai_reply_over_the_budget_is_cut_with_finish_reason_length(
    llm_server: LLMServer,
) -> None:
    llm_server.enqueue(Reply(text=LONG), Reply(text="fits"))
    async with openai_client(llm_server) as client:
        cut = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=10
        )
        whole = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_completion_tokens=10
        )
    assert cut.choices[0].finish_reason == "length"
    assert cut.choices[0].message.content == LONG[:40]
    assert cut.usage is not None
    assert (cut.usage.prompt_tokens, cut.usage.completion_tokens) == (1 + MESSAGE_OVERHEAD, 10)
    assert whole.choices[0].finish_reason == "stop"
    assert whole.choices[0].message.content == "fits"


async def test_anthropic_reply_over_the_budget_is_cut_with_stop_reason_max_tokens(
    llm_server: LLMServer,
) -> None:
    llm_server.enqueue(Reply(text=LONG), Reply(text="fits"))
    async with anthropic_client(llm_server) as client:
        cut = await client.messages.create(
            model="claude-tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=10
        )
        whole = await client.messages.create(
            model="claude-tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=10
        )
    assert cut.stop_reason == "max_tokens"
    assert cut.content[0].type == "text"
    assert cut.content[0].text == LONG[:40]
    assert cut.usage.output_tokens == 10
    assert whole.stop_reason == "end_turn"


async def test_models_are_listed_in_each_sdks_format(llm_server: LLMServer) -> None:
    async with openai_client(llm_server) as client:
        assert [m.id async for m in client.models.list()] == ["local-model"]
    async with anthropic_client(llm_server) as other:
        assert [m.id async for m in other.models.list()] == ["local-model"]
    assert [(r.method, r.path.partition("?")[0]) for r in llm_server.requests] == [
        ("GET", MODELS_PATH),
        ("GET", MODELS_PATH),
    ]
    assert llm_server.bodies() == []


async def test_a_wrong_key_is_refused(llm_server: LLMServer) -> None:
    llm_server.api_key = KEY
    async with openai_client(llm_server, key="nope") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=10
            )
    async with anthropic_client(llm_server, key="nope") as other:
        with pytest.raises(anthropic.AuthenticationError):
            await other.messages.create(
                model="claude-tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=10
            )
    async with openai_client(llm_server) as right:
        assert [m.id async for m in right.models.list()] == ["local-model"]
