"""The benchmark's summarizers: the offline one and the standard-library HTTP client."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from slimcache import (
    ConfigurationError,
    MemoryStore,
    Message,
    SummarizerError,
    SummaryContext,
    approx_tokens,
)
from slimcache.bench.engine import run_bench
from slimcache.bench.summarizers import (
    HTTPChatSummarizer,
    MeteredSummarizer,
    OfflineSummarizer,
    make_summarizer,
)
from slimcache.messages import count_message_tokens
from tests.bench.synthetic import SMALL, dataset


def context(previous: str | None = None, max_tokens: int = 60) -> SummaryContext:
    if previous is None:
        return SummaryContext("summarize", None, max_tokens, "prompt", "t", 1, 2)
    return SummaryContext("extend", previous, max_tokens, "prompt", "t", 1, 2)


def test_offline_summarizer_is_extractive_and_capped() -> None:
    summarize = OfflineSummarizer()
    messages = [
        {"role": "user", "content": "Book a table for two. At eight, please!"},
        {"role": "assistant", "content": "Done?  Anything else"},
    ]
    first = summarize(messages, context())
    assert first == "- user: Book a table for two.\n- assistant: Done?"
    assert summarize(messages, context()) == first
    extended = summarize([{"role": "user", "content": "No."}], context(first))
    assert extended == first + "\n- user: No."
    many = [{"role": "user", "content": f"Sentence number {i} is here."} for i in range(200)]
    capped = summarize(many, context(max_tokens=50))
    assert approx_tokens(capped) <= 50
    assert capped.endswith("Sentence number 199 is here.")


def test_make_summarizer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_summarizer("offline"), OfflineSummarizer)
    with pytest.raises(ConfigurationError, match="offline"):
        make_summarizer("gpt")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        make_summarizer("openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    made = make_summarizer("openai:gpt-4o-mini")
    assert isinstance(made, HTTPChatSummarizer)
    assert (made.name, made.base_url) == ("openai:gpt-4o-mini", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="model"):
        make_summarizer("openai:")


@dataclass
class ChatServer:
    """A local OpenAI-compatible endpoint that records what it receives."""

    url: str
    key: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    recorded: list[dict[str, Any]] = []
    key = "test-key"

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {key}":
                return True
            self._reply(401, {"error": {"message": "bad key"}})
            return False

        def do_GET(self) -> None:
            if self._authorized():
                self._reply(200, {"data": [{"id": "tiny"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self._authorized():
                return
            recorded.append({"path": self.path, **body})
            text = f"summary of {len(body['messages'][1]['content'])} chars"
            self._reply(200, {"choices": [{"message": {"role": "assistant", "content": text}}]})

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ChatServer(f"http://127.0.0.1:{server.server_address[1]}/v1", key, recorded)
    finally:
        server.shutdown()
        server.server_close()


async def test_http_chat_summarizer_talks_to_an_endpoint(chat_server: ChatServer) -> None:
    summarizer = HTTPChatSummarizer("tiny", api_key=chat_server.key, base_url=chat_server.url)
    summarizer.preflight()
    data = dataset(20)
    report = await run_bench(
        data,
        data.conversations,
        store=MemoryStore(),
        store_url="memory://",
        summarizer=summarizer,
        settings=SMALL,
    )
    calls = sum(mode.summarizer_calls for mode in report.modes.values())
    assert calls == len(chat_server.requests) > 0
    first = chat_server.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["model"] == "tiny"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "c0 says 0." in first["messages"][1]["content"]
    assert report.summarizer == "openai:tiny"


def test_http_chat_preflight_fails_fast(chat_server: ChatServer) -> None:
    wrong_key = HTTPChatSummarizer("tiny", api_key="nope", base_url=chat_server.url)
    with pytest.raises(SummarizerError, match="HTTP 401"):
        wrong_key.preflight()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    dead = HTTPChatSummarizer("tiny", api_key="k", base_url=f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(SummarizerError, match="cannot reach"):
        dead.preflight(timeout=2.0)


async def test_metered_summarizer_counts_times_and_passes_the_context_through() -> None:
    seen: list[SummaryContext] = []

    async def inner(messages: Sequence[Message], context: SummaryContext) -> str:
        seen.append(context)
        return "summary"

    class Named:
        name = "named"

        def __call__(self, messages: Sequence[Message], context: SummaryContext) -> object:
            return inner(messages, context)

    metered = MeteredSummarizer(Named())  # type: ignore[arg-type]
    messages = [{"role": "user", "content": "one two three"}, {"role": "assistant", "content": "x"}]
    ctx = context()
    assert await metered(messages, ctx) == "summary"
    assert await metered(messages[:1], ctx) == "summary"
    assert seen == [ctx, ctx]
    assert seen[0] is ctx  # the same context, so what the summarizer reports reaches the stats
    assert metered.message_tokens == 2 * count_message_tokens(messages[0]) + count_message_tokens(
        messages[1]
    )
    assert len(metered.call_seconds) == 2
    assert all(seconds >= 0 for seconds in metered.call_seconds)
