"""The summarizers ``slimcache bench --summarizer`` names, and the check of their endpoint.

The real models are ``slimcache.llm``'s summarizers on the official SDKs, talking to the local
chat server; the check of the endpoint goes through the same client, with its own settings.
"""

from __future__ import annotations

import socket
import sys

import pytest

from slimcache import ConfigurationError, MemoryStore, MissingExtraError, SummarizerError
from slimcache._install import pip_install
from slimcache.bench.engine import run_bench
from slimcache.bench.summarizers import OfflineSummarizer
from slimcache.cli.summarizers import (
    ModelOptions,
    check_endpoint,
    close_summarizer,
    make_summarizer,
)
from slimcache.llm import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AnthropicSummarizer,
    OpenAISummarizer,
)
from tests.bench.synthetic import SMALL, dataset
from tests.servers.llm_server import ANTHROPIC_PATH, MODELS_PATH, OPENAI_PATH, LLMServer, Reply

KEY = "test-key"
QUICK = {"retry-after-ms": "1"}


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer) -> LLMServer:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.openai_base_url)
    return llm_server


@pytest.fixture
def anthropic_env(monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer) -> LLMServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.anthropic_base_url)
    return llm_server


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# ---------------------------------------------------------------- which summarizer


def test_offline_and_unknown_values() -> None:
    assert isinstance(make_summarizer("offline"), OfflineSummarizer)
    for spec in ("gpt", "openai", "mistral:small"):
        with pytest.raises(ConfigurationError, match="'offline', 'openai:MODEL' or 'anthropic:"):
            make_summarizer(spec)
    for spec in ("openai:", "anthropic: "):
        with pytest.raises(ConfigurationError, match="needs a model name"):
            make_summarizer(spec)


async def test_openai_model_is_the_library_summarizer_with_the_options(openai_env: None) -> None:
    made = make_summarizer("openai:tiny")
    assert isinstance(made, OpenAISummarizer)
    assert made.name == "openai:tiny"
    assert (made.client.timeout, made.client.max_retries) == (DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES)
    assert made.temperature == 0.0
    tuned = make_summarizer("openai:tiny", ModelOptions(temperature=0.7, timeout=9, max_retries=1))
    assert isinstance(tuned, OpenAISummarizer)
    assert (tuned.client.timeout, tuned.client.max_retries, tuned.temperature) == (9, 1, 0.7)
    await close_summarizer(made)
    await close_summarizer(tuned)
    assert made.client.is_closed()


async def test_anthropic_model_is_the_library_summarizer(anthropic_env: None) -> None:
    made = make_summarizer("anthropic:claude-tiny", ModelOptions(timeout=7, max_retries=2))
    assert isinstance(made, AnthropicSummarizer)
    assert made.name == "anthropic:claude-tiny"
    assert (made.client.timeout, made.client.max_retries) == (7, 2)
    assert made.extra_body == {"temperature": 0.0}
    no_temperature = make_summarizer("anthropic:claude-tiny", ModelOptions(temperature=None))
    assert isinstance(no_temperature, AnthropicSummarizer)
    assert no_temperature.extra_body is None
    await close_summarizer(made)
    await close_summarizer(no_temperature)


def test_a_missing_key_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        make_summarizer("openai:tiny")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        make_summarizer("anthropic:claude-tiny")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_missing_sdk_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setitem(sys.modules, provider, None)  # makes `import <provider>` fail
    with pytest.raises(MissingExtraError) as caught:
        make_summarizer(f"{provider}:model")
    assert pip_install(f"bench,{provider}") in str(caught.value)


# ---------------------------------------------------------------- the endpoint check


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_check_lists_the_models_through_the_client(
    openai_env: LLMServer, anthropic_env: LLMServer, provider: str
) -> None:
    made = make_summarizer(f"{provider}:m")
    await check_endpoint(made)
    await close_summarizer(made)
    [request] = openai_env.requests
    assert (request.method, request.path.partition("?")[0]) == ("GET", MODELS_PATH)
    assert request.headers["x-stainless-lang"] == "python"  # the official SDK sent it
    assert ("anthropic-version" in request.headers) == (provider == "anthropic")


async def test_the_check_has_the_clients_retries_and_timeout(openai_env: LLMServer) -> None:
    openai_env.enqueue(Reply(500, headers=QUICK), Reply(503, headers=QUICK))
    made = make_summarizer("openai:m", ModelOptions(max_retries=2))
    await check_endpoint(made)  # the third try answers
    assert len(openai_env.requests) == 3
    await close_summarizer(made)

    openai_env.enqueue(Reply(delay=2.0))
    hasty = make_summarizer("openai:m", ModelOptions(timeout=0.2, max_retries=0))
    with pytest.raises(SummarizerError, match="/v1/models did not answer"):
        await check_endpoint(hasty)
    assert len(openai_env.requests) == 4  # no retry
    await close_summarizer(hasty)


async def test_the_check_names_a_refused_key_and_a_dead_endpoint(
    openai_env: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_env.api_key = "another-key"
    refused = make_summarizer("openai:m")
    with pytest.raises(SummarizerError, match="/v1/models answered HTTP 401"):
        await check_endpoint(refused)
    assert len(openai_env.requests) == 1  # a refused key is not retried
    await close_summarizer(refused)

    port = closed_port()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    dead = make_summarizer("openai:m", ModelOptions(max_retries=0))
    with pytest.raises(SummarizerError, match=f"127.0.0.1:{port}/v1/models did not answer"):
        await check_endpoint(dead)
    await close_summarizer(dead)


async def test_the_offline_summarizer_needs_no_check() -> None:
    await check_endpoint(OfflineSummarizer())
    await close_summarizer(OfflineSummarizer())


# ---------------------------------------------------------------- a replay on a real client


@pytest.mark.parametrize(
    ("provider", "path"), [("openai", OPENAI_PATH), ("anthropic", ANTHROPIC_PATH)]
)
async def test_the_replay_sends_the_budget_through_the_sdk(
    openai_env: LLMServer, anthropic_env: LLMServer, provider: str, path: str
) -> None:
    made = make_summarizer(f"{provider}:m")
    data = dataset(20, 14)
    report = await run_bench(
        data,
        data.conversations,
        store=MemoryStore(),
        store_url="memory://",
        summarizer=made,
        settings=SMALL,
        modes=["store", "second_pass"],
    )
    await close_summarizer(made)
    bodies = openai_env.bodies(path)
    assert len(bodies) == report.modes["store"].summarizer_calls > 0
    assert report.modes["second_pass"].summarizer_calls == 0
    assert {body["max_tokens"] for body in bodies} == {SMALL.summary_tokens}
    assert {body["temperature"] for body in bodies} == {0.0}
    assert report.summarizer == f"{provider}:m"
    assert list(report.modes) == ["store", "second_pass"]
