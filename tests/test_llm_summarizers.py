"""OpenAISummarizer and AnthropicSummarizer against a local server speaking each API's format.

The official SDKs are the clients; the server on loopback records what they send and answers
with scripted errors, so the retries, the request bodies and the error paths are all real.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from slimcache import (
    DEFAULT_SUMMARIZE_PROMPT,
    ConfigurationError,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    MissingExtraError,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
)
from slimcache._install import pip_install
from slimcache.core.summarizer import summarizer_name
from slimcache.core.truncation import shorter_prompt
from slimcache.llm import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AnthropicSummarizer,
    OpenAISummarizer,
)
from slimcache.stores import SummaryEntry, ThreadKeys
from tests.servers.llm_server import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    LLMServer,
    Reply,
    count_tokens,
    system_text,
)

ROOT = Path(__file__).resolve().parent.parent
KEY = "test-key"
# A server-directed wait of one millisecond keeps the retry tests quick.
QUICK = {"retry-after-ms": "1"}

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    *({"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(8)),
]


def context(max_tokens: int = 321, previous: str | None = None) -> SummaryContext:
    return SummaryContext(
        task="extend" if previous else "summarize",
        previous_summary=previous,
        max_tokens=max_tokens,
        prompt=f"Summarize in at most {max_tokens} tokens.",
        thread_id="t",
        start=1,
        end=2,
    )


def openai_summarizer(server: LLMServer, **options: Any) -> OpenAISummarizer:
    return OpenAISummarizer("tiny", base_url=server.openai_base_url, api_key=KEY, **options)


def anthropic_summarizer(server: LLMServer, **options: Any) -> AnthropicSummarizer:
    return AnthropicSummarizer(
        "claude-tiny", base_url=server.anthropic_base_url, api_key=KEY, **options
    )


def compressor(summarizer: Any, store: MemoryStore, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(6),
        keep=KeepMessages(2),
        max_summary_tokens=77,
        **options,
    )


# ---------------------------------------------------------------- OpenAI: what is sent


async def test_openai_sends_the_chat_and_the_budget(llm_server: LLMServer) -> None:
    messages = HISTORY[1:3]
    ctx = context(previous="earlier")
    async with openai_summarizer(llm_server) as summarizer:
        text = await summarizer(messages, ctx)
    [request] = llm_server.requests
    assert request.path == OPENAI_PATH
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "tiny"
    assert request.body["messages"] == ctx.to_chat(messages)
    assert request.body["max_tokens"] == 321
    assert "temperature" not in request.body
    assert "max_completion_tokens" not in request.body
    assert text == f"openai summary of {len(ctx.to_chat(messages)[1]['content'])} chars"


async def test_openai_options_are_sent(llm_server: LLMServer) -> None:
    summarizer = openai_summarizer(
        llm_server,
        temperature=0.2,
        extra_body={"top_k": 5},
        token_limit="max_completion_tokens",
    )
    await summarizer(HISTORY[1:3], context(max_tokens=50))
    await summarizer.aclose()
    body = llm_server.requests[0].body
    assert body["temperature"] == 0.2
    assert body["top_k"] == 5
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body


async def test_openai_through_the_compressor_caches_by_model(llm_server: LLMServer) -> None:
    store = MemoryStore()
    summarizer = openai_summarizer(llm_server)
    first = await compressor(summarizer, store).compress_detailed(HISTORY, thread_id="chat-1")
    [request] = llm_server.requests
    assert request.body["messages"][0] == {
        "role": "system",
        "content": DEFAULT_SUMMARIZE_PROMPT.format(max_tokens=77),
    }
    assert "turn 0" in request.body["messages"][1]["content"]
    assert "turn 6" not in request.body["messages"][1]["content"]  # stays verbatim
    assert request.body["max_tokens"] == 77
    assert first.summary is not None
    assert first.summary.startswith("openai summary of")
    assert first.summary in first.messages[1]["content"]
    assert [m["content"] for m in first.messages[-2:]] == ["turn 6", "turn 7"]

    # A stateless second server: a new compressor on the same store makes no request.
    again = await compressor(openai_summarizer(llm_server), store).compress(
        HISTORY, thread_id="chat-1"
    )
    assert again == first.messages
    assert len(llm_server.requests) == 1

    assert first.summary_range is not None
    start, end = first.summary_range
    raw = await store.get(ThreadKeys("chat-1").summary(start, end))
    entry = SummaryEntry.parse(raw, thread="chat-1", start=start, end=end)
    assert entry is not None
    assert entry.summarizer == "slimcache.llm.openai:tiny" == summarizer_name(summarizer)
    assert summarizer.name == "openai:tiny"

    # Another model is another summarizer: the cached summary is not reused.
    other = OpenAISummarizer("bigger", base_url=llm_server.openai_base_url, api_key=KEY)
    await compressor(other, store).compress(HISTORY, thread_id="chat-1")
    assert [r.body["model"] for r in llm_server.requests] == ["tiny", "bigger"]
    await summarizer.aclose()
    await other.aclose()


async def test_openai_extends_with_only_the_new_messages(llm_server: LLMServer) -> None:
    store = MemoryStore()
    async with openai_summarizer(llm_server) as summarizer:
        first = await compressor(summarizer, store, strategy="extend").compress_detailed(
            HISTORY, thread_id="c"
        )
        longer = [*HISTORY, *({"role": "user", "content": f"new {i}"} for i in range(6))]
        await compressor(summarizer, store, strategy="extend").compress(longer, thread_id="c")
    assert len(llm_server.requests) == 2
    user = llm_server.requests[1].body["messages"][1]["content"]
    assert f"Summary so far:\n{first.summary}" in user
    assert "turn 0" not in user  # already in the summary
    assert "new 0" in user


# ---------------------------------------------------------------- OpenAI: retries and errors


async def test_openai_retries_rate_limits_and_server_errors(llm_server: LLMServer) -> None:
    llm_server.enqueue(
        Reply(429, headers=QUICK), Reply(500, headers=QUICK), Reply(503, headers=QUICK)
    )
    summarizer = openai_summarizer(llm_server, max_retries=3)
    text = await summarizer(HISTORY[1:3], context())
    await summarizer.aclose()
    assert text.startswith("openai summary of")
    assert len(llm_server.requests) == 4
    assert all(r.body == llm_server.requests[0].body for r in llm_server.requests)


async def test_openai_retries_with_backoff_without_retry_after(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(502))
    async with openai_summarizer(llm_server) as summarizer:
        assert (await summarizer(HISTORY[1:3], context())).startswith("openai summary")
    assert len(llm_server.requests) == 2


async def test_openai_retries_a_dropped_connection(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(drop=True))
    async with openai_summarizer(llm_server, max_retries=1) as summarizer:
        assert (await summarizer(HISTORY[1:3], context())).startswith("openai summary")
    assert len(llm_server.requests) == 2


async def test_openai_retries_a_timeout(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(delay=2.0))
    async with openai_summarizer(llm_server, max_retries=1, timeout=0.3) as summarizer:
        assert (await summarizer(HISTORY[1:3], context())).startswith("openai summary")
    assert len(llm_server.requests) == 2


async def test_openai_gives_up_after_max_retries(llm_server: LLMServer) -> None:
    llm_server.enqueue(*[Reply(500, headers=QUICK)] * 3)
    store = MemoryStore()
    async with openai_summarizer(llm_server, max_retries=1) as summarizer:
        with pytest.raises(SummarizerError) as caught:
            await compressor(summarizer, store).compress(HISTORY, thread_id="c")
    assert isinstance(caught.value.__cause__, openai.InternalServerError)
    assert len(llm_server.requests) == 2
    assert await store.get(ThreadKeys("c").index) is None  # nothing written


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, openai.BadRequestError), (401, openai.AuthenticationError)],
)
async def test_openai_does_not_retry_a_client_error(
    llm_server: LLMServer, status: int, error: type[Exception]
) -> None:
    llm_server.enqueue(Reply(status, headers=QUICK))
    async with openai_summarizer(llm_server) as summarizer:
        with pytest.raises(error):
            await summarizer(HISTORY[1:3], context())
    assert len(llm_server.requests) == 1


async def test_openai_empty_reply_is_a_summarizer_error(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(text=""), Reply(text="  "))
    store = MemoryStore()
    async with openai_summarizer(llm_server) as summarizer:
        with pytest.raises(SummarizerError, match="no text"):
            await summarizer(HISTORY[1:3], context())
        with pytest.raises(SummarizerError, match="no text"):
            await compressor(summarizer, store).compress(HISTORY, thread_id="c")
    assert len(llm_server.requests) == 2


# ---------------------------------------------------------------- OpenAI: the client


async def test_openai_client_settings(llm_server: LLMServer) -> None:
    built = openai_summarizer(llm_server)
    assert built.client.max_retries == DEFAULT_MAX_RETRIES
    assert built.client.timeout == DEFAULT_TIMEOUT
    await built.aclose()
    assert built.client.is_closed()

    mine = openai.AsyncOpenAI(base_url=llm_server.openai_base_url, api_key=KEY, max_retries=0)
    as_given = OpenAISummarizer("tiny", client=mine)
    assert as_given.client is mine
    tuned = OpenAISummarizer("tiny", client=mine, max_retries=1, timeout=5)
    assert tuned.client.max_retries == 1
    assert tuned.client.timeout == 5
    assert mine.max_retries == 0  # the caller's client is not changed
    llm_server.enqueue(Reply(500, headers=QUICK))
    assert (await tuned(HISTORY[1:3], context())).startswith("openai summary")
    assert len(llm_server.requests) == 2
    await as_given.aclose()
    await tuned.aclose()
    assert not mine.is_closed()  # the caller closes their own client
    await mine.close()


@pytest.mark.parametrize(
    "options",
    [
        {"model": ""},
        {"max_retries": -1},
        {"max_retries": True},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"temperature": "hot"},
        {"token_limit": "max_output_tokens"},
        {"on_truncated": "ignore"},
        {"api_key": KEY, "client": "a client"},
    ],
)
def test_openai_rejects_bad_options(options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"model": "tiny", "api_key": KEY, **options}
    with pytest.raises(ConfigurationError):
        OpenAISummarizer(**arguments)


def test_openai_without_a_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAISummarizer("tiny")


# ---------------------------------------------------------------- Anthropic


async def test_anthropic_sends_system_user_and_budget(llm_server: LLMServer) -> None:
    messages = HISTORY[1:3]
    ctx = context(previous="earlier")
    async with anthropic_summarizer(llm_server) as summarizer:
        text = await summarizer(messages, ctx)
    [request] = llm_server.requests
    chat = ctx.to_chat(messages)
    assert request.path == ANTHROPIC_PATH
    # The key travels as x-api-key or, in newer SDKs, as a bearer token.
    assert KEY in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:])
    assert request.headers["anthropic-version"]
    assert request.body["model"] == "claude-tiny"
    assert request.body["system"] == ctx.prompt
    assert request.body["messages"] == [{"role": "user", "content": chat[1]["content"]}]
    assert request.body["max_tokens"] == 321
    assert "temperature" not in request.body
    assert text == f"anthropic summary of {len(chat[1]['content'])} chars"


async def test_anthropic_options_are_sent(llm_server: LLMServer) -> None:
    async with anthropic_summarizer(
        llm_server, extra_body={"temperature": 0.0, "top_k": 3}
    ) as summarizer:
        await summarizer(HISTORY[1:3], context())
    body = llm_server.requests[0].body
    assert body["temperature"] == 0.0
    assert body["top_k"] == 3


async def test_anthropic_retries_429_500_and_529(llm_server: LLMServer) -> None:
    llm_server.enqueue(
        Reply(429, headers=QUICK), Reply(500, headers=QUICK), Reply(529, headers=QUICK)
    )
    async with anthropic_summarizer(llm_server, max_retries=3) as summarizer:
        text = await summarizer(HISTORY[1:3], context())
    assert text.startswith("anthropic summary of")
    assert len(llm_server.requests) == 4
    assert all(r.body == llm_server.requests[0].body for r in llm_server.requests)


async def test_anthropic_retries_a_dropped_connection(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(drop=True))
    async with anthropic_summarizer(llm_server, max_retries=1) as summarizer:
        assert (await summarizer(HISTORY[1:3], context())).startswith("anthropic summary")
    assert len(llm_server.requests) == 2


async def test_anthropic_gives_up_on_overload_after_max_retries(llm_server: LLMServer) -> None:
    llm_server.enqueue(*[Reply(529, headers=QUICK)] * 3)
    async with anthropic_summarizer(llm_server, max_retries=2) as summarizer:
        with pytest.raises(SummarizerError) as caught:
            await compressor(summarizer, MemoryStore()).compress(HISTORY, thread_id="c")
    assert isinstance(caught.value.__cause__, anthropic.APIStatusError)
    assert caught.value.__cause__.status_code == 529
    assert len(llm_server.requests) == 3


async def test_anthropic_does_not_retry_a_bad_request(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(400, headers=QUICK))
    async with anthropic_summarizer(llm_server) as summarizer:
        with pytest.raises(anthropic.BadRequestError):
            await summarizer(HISTORY[1:3], context())
    assert len(llm_server.requests) == 1


async def test_anthropic_empty_reply_is_a_summarizer_error(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(text=""))
    async with anthropic_summarizer(llm_server) as summarizer:
        with pytest.raises(SummarizerError, match="no text"):
            await summarizer(HISTORY[1:3], context())


async def test_anthropic_through_the_compressor(llm_server: LLMServer) -> None:
    store = MemoryStore()
    async with anthropic_summarizer(llm_server) as summarizer:
        result = await compressor(summarizer, store).compress_detailed(HISTORY, thread_id="a")
        again = await compressor(summarizer, store).compress(HISTORY, thread_id="a")
    assert again == result.messages
    [request] = llm_server.requests
    assert request.body["system"] == DEFAULT_SUMMARIZE_PROMPT.format(max_tokens=77)
    assert request.body["max_tokens"] == 77
    assert result.summary is not None
    assert result.summary.startswith("anthropic summary")
    assert summarizer_name(summarizer) == "slimcache.llm.anthropic:claude-tiny"


async def test_anthropic_client_settings(llm_server: LLMServer) -> None:
    built = anthropic_summarizer(llm_server)
    assert built.client.max_retries == DEFAULT_MAX_RETRIES
    assert built.client.timeout == DEFAULT_TIMEOUT
    await built.aclose()
    assert built.client.is_closed()
    mine = anthropic.AsyncAnthropic(base_url=llm_server.anthropic_base_url, api_key=KEY)
    tuned = AnthropicSummarizer("claude-tiny", client=mine, max_retries=0)
    assert tuned.client.max_retries == 0
    assert mine.max_retries != 0
    llm_server.enqueue(Reply(500, headers=QUICK))
    with pytest.raises(anthropic.InternalServerError):
        await tuned(HISTORY[1:3], context())
    assert len(llm_server.requests) == 1
    await tuned.aclose()
    assert not mine.is_closed()
    await mine.close()
    with pytest.raises(ConfigurationError, match="not both"):
        AnthropicSummarizer("claude-tiny", client=mine, base_url="http://127.0.0.1:1")


# ---------------------------------------------------------------- a reply cut by the budget

# Far over the compressor's budget of 77 tokens, as a small model rambling on would write.
LONG_SUMMARY = "The user planned a long trip and changed it many times. " * 40
SHORT_SUMMARY = "The user planned a trip to Lisbon."
PROVIDERS: dict[str, tuple[Callable[..., Any], str]] = {
    "openai": (openai_summarizer, OPENAI_PATH),
    "anthropic": (anthropic_summarizer, ANTHROPIC_PATH),
}


def shorter_when_asked(path: str, body: dict[str, Any]) -> str:
    """A model that rambles past the budget unless the prompt asks for a shorter summary."""
    return SHORT_SUMMARY if "Write a shorter one" in system_text(path, body) else LONG_SUMMARY


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cut_reply_is_asked_again_shorter_and_only_that_is_cached(
    llm_server: LLMServer, provider: str
) -> None:
    make, path = PROVIDERS[provider]
    llm_server.text = shorter_when_asked
    store = MemoryStore()
    async with make(llm_server) as summarizer:
        squeezer = compressor(summarizer, store)
        result = await squeezer.compress_detailed(HISTORY, thread_id="cut")
        assert result.summary == SHORT_SUMMARY
        first, retry = llm_server.bodies(path)
        prompt = DEFAULT_SUMMARIZE_PROMPT.format(max_tokens=77)
        assert system_text(path, first) == prompt
        assert system_text(path, retry) == shorter_prompt(prompt, 77)
        assert "at most 38 tokens" in system_text(path, retry).lower()
        assert first["max_tokens"] == retry["max_tokens"] == 77
        assert first["messages"][-1] == retry["messages"][-1]  # the same transcript
        stats = squeezer.stats
        assert (stats.summarizer_calls, stats.truncated_replies, stats.shorter_retries) == (1, 1, 1)
        assert (stats.truncated_accepted, stats.summarizer_errors) == (0, 0)
        # Every request the server received is counted, with the input each carried.
        assert stats.summarizer_requests == len(llm_server.bodies(path)) == 2
        assert result.summarizer_requests == 2
        assert stats.summarizer_request_tokens == 2 * stats.summarizer_input_tokens
        # The summary served from the cache is the whole one.
        again = await compressor(summarizer, store).compress_detailed(HISTORY, thread_id="cut")
    assert again.outcome == "hit"
    assert again.summary == SHORT_SUMMARY
    assert len(llm_server.bodies(path)) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_reply_cut_twice_raises_and_nothing_is_cached(
    llm_server: LLMServer, provider: str
) -> None:
    make, path = PROVIDERS[provider]
    llm_server.text = lambda path, body: LONG_SUMMARY
    store = MemoryStore()
    async with make(llm_server) as summarizer:
        squeezer = compressor(summarizer, store)
        with pytest.raises(SummarizerError) as caught:
            await squeezer.compress(HISTORY, thread_id="cut")
    cause = caught.value.__cause__
    assert isinstance(cause, SummarizerError)
    reason = "finish_reason='length'" if provider == "openai" else "stop_reason='max_tokens'"
    assert f"cut at the budget of 77 tokens ({reason})" in str(cause)
    assert "on_truncated='accept'" in str(cause)
    assert len(llm_server.bodies(path)) == 2  # one retry, no more
    assert await store.get(ThreadKeys("cut").index) is None
    stats = squeezer.stats
    assert (stats.summarizer_calls, stats.summarizer_requests) == (1, 2)  # failed, still counted
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (2, 1, 0)
    assert stats.summarizer_errors == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cut_reply_can_be_accepted_with_a_warning(
    llm_server: LLMServer, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, path = PROVIDERS[provider]
    llm_server.text = lambda path, body: LONG_SUMMARY
    store = MemoryStore()
    async with make(llm_server, on_truncated="accept") as summarizer:
        squeezer = compressor(summarizer, store)
        with caplog.at_level(logging.WARNING, logger="slimcache"):
            result = await squeezer.compress_detailed(HISTORY, thread_id="cut")
    assert result.cached
    assert result.summary == LONG_SUMMARY[: 4 * 77].strip()
    assert count_tokens(result.summary) <= 77
    assert len(llm_server.bodies(path)) == 2
    stats = squeezer.stats
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (2, 1, 1)
    [warning] = [r for r in caplog.records if "cut at the budget" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "on_truncated='accept'" in warning.getMessage()


def empty_when_asked(path: str, body: dict[str, Any]) -> str:
    """A model that rambles past the budget, and answers nothing when asked for less."""
    return "" if "Write a shorter one" in system_text(path, body) else LONG_SUMMARY


def rambling_more_when_asked(path: str, body: dict[str, Any]) -> str:
    """A model cut at the budget every time, with another text when asked for less."""
    return (
        "Shorter, then: " * 80 if "Write a shorter one" in system_text(path, body) else LONG_SUMMARY
    )


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("retry", [empty_when_asked, rambling_more_when_asked])
async def test_a_cut_reply_stays_the_answer_when_its_retry_is_worse(
    llm_server: LLMServer, provider: str, retry: Callable[[str, dict[str, Any]], str]
) -> None:
    make, path = PROVIDERS[provider]
    llm_server.text = retry
    async with make(llm_server, on_truncated="accept") as summarizer:
        squeezer = compressor(summarizer, MemoryStore())
        result = await squeezer.compress_detailed(HISTORY, thread_id="cut")
    assert result.cached
    assert result.summary == LONG_SUMMARY[: 4 * 77].strip()
    assert len(llm_server.bodies(path)) == 2
    stats = squeezer.stats
    cut = 2 if retry is rambling_more_when_asked else 1
    assert (stats.truncated_replies, stats.shorter_retries, stats.truncated_accepted) == (cut, 1, 1)
    assert stats.summarizer_errors == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_empty_retry_of_a_cut_reply_raises_as_a_cut_one_when_asked(
    llm_server: LLMServer, provider: str
) -> None:
    make, _ = PROVIDERS[provider]
    llm_server.text = empty_when_asked
    async with make(llm_server) as summarizer:
        with pytest.raises(SummarizerError) as caught:
            await compressor(summarizer, MemoryStore()).compress(HISTORY, thread_id="cut")
    message = str(caught.value.__cause__)
    assert "cut at the budget of 77 tokens" in message
    assert "the shorter retry replied with no text" in message
    assert "on_truncated='accept'" in message


async def test_a_reply_within_the_budget_is_not_retried(llm_server: LLMServer) -> None:
    llm_server.text = lambda path, body: SHORT_SUMMARY
    ctx = context(max_tokens=count_tokens(SHORT_SUMMARY))
    async with openai_summarizer(llm_server) as summarizer:
        assert await summarizer(HISTORY[1:3], ctx) == SHORT_SUMMARY
    assert len(llm_server.requests) == 1
    assert (ctx.report.truncated_replies, ctx.report.shorter_retries) == (0, 0)


def test_anthropic_rejects_a_bad_on_truncated() -> None:
    with pytest.raises(ConfigurationError, match="on_truncated must be 'raise' or 'accept'"):
        AnthropicSummarizer("claude-tiny", api_key=KEY, on_truncated="keep")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the optional SDKs


@pytest.mark.parametrize(
    ("make", "module", "extra"),
    [
        (lambda: OpenAISummarizer("tiny", api_key=KEY), "openai", "openai"),
        (lambda: AnthropicSummarizer("claude-tiny", api_key=KEY), "anthropic", "anthropic"),
    ],
)
def test_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, make: Any, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` fail
    with pytest.raises(MissingExtraError) as caught:
        make()
    assert str(caught.value).endswith(f"needs the {module} package: {pip_install(extra)}")
    assert isinstance(caught.value, ImportError)


def test_importing_slimcache_imports_no_sdk() -> None:
    code = (
        "import sys, slimcache, slimcache.llm, slimcache.langchain\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'langchain_core') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- the docs example


def run_example(env: dict[str, str]) -> str:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "llm_summarizers.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**keep, **env},
    )
    return result.stdout


def test_example_runs_with_openai(llm_server: LLMServer) -> None:
    out = run_example({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm_server.openai_base_url})
    assert "openai:gpt-4o-mini -> Summary of the earlier conversation:" in out
    assert "openai summary of" in out
    assert "same: True calls: 1" in out
    [request] = llm_server.requests
    assert request.path == OPENAI_PATH
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["max_tokens"] == 200
    assert "Sintra" in request.body["messages"][1]["content"]


def test_example_runs_with_anthropic(llm_server: LLMServer) -> None:
    out = run_example(
        {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": llm_server.anthropic_base_url}
    )
    assert "anthropic:claude-haiku-4-5 -> Summary of the earlier conversation:" in out
    assert "same: True calls: 1" in out
    [request] = llm_server.requests
    assert request.path == ANTHROPIC_PATH
    assert request.body["max_tokens"] == 200


def test_the_guide_includes_the_example() -> None:
    guide = (ROOT / "docs" / "guides" / "llm-summarizers.md").read_text()
    assert guide.startswith("# ")
    assert '```python\n--8<-- "examples/llm_summarizers.py"\n```' in guide
