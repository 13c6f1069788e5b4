"""A local chat API on loopback: ``llm_server`` speaks OpenAI's and Anthropic's wire formats.

``POST /v1/chat/completions`` answers as OpenAI's chat completions do, ``POST /v1/messages`` as
Anthropic's Messages API. Every request is recorded (path, headers, JSON body) so tests assert
on exactly what the official SDKs sent. Scripted replies (:meth:`LLMServer.enqueue`) answer the
next requests in order with an error status, a dropped connection, a delay or an empty text;
once the script is used up, each request gets a successful reply. With ``max_prompt_tokens`` set,
a request whose prompt is longer is refused as a real server refuses it: HTTP 400 with the
context-length message (its tokens counted as ``ceil(characters / 4)`` of the texts sent).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["LLMServer", "Recorded", "Reply", "llm_server", "prompt_tokens"]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Recorded:
    """One request as received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A scripted answer to one request.

    Attributes:
        status: HTTP status; an error status gets an error body in the path's format.
        text: For a success: the reply text (``None``: the server's default text).
        headers: Extra response headers (``retry-after-ms`` keeps retry tests quick).
        delay: Seconds to wait before answering (for timeouts).
        drop: Close the connection without answering.
    """

    status: int = 200
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


def _openai_body(status: int, model: str, text: str) -> dict[str, Any]:
    if status >= 400:
        return {"error": {"message": f"scripted {status}", "type": _error_type(status)}}
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _anthropic_body(status: int, model: str, text: str) -> dict[str, Any]:
    if status >= 400:
        return {"type": "error", "error": {"type": _error_type(status), "message": "scripted"}}
    content = [{"type": "text", "text": text}] if text else []
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's tokens as this server counts them: ``ceil(characters / 4)`` of every text
    sent (the messages' contents and, for Anthropic, ``system``)."""
    texts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        texts.append(system)
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(part.get("text", "")) for part in content if isinstance(part, dict)]
    return math.ceil(sum(map(len, texts)) / 4)


def _too_long_body(path: str, tokens: int, limit: int) -> dict[str, Any]:
    if path == ANTHROPIC_PATH:
        message = f"prompt is too long: {tokens} tokens > {limit} maximum"
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def default_text(path: str, body: dict[str, Any]) -> str:
    """The default reply: names the API and the size of what was sent, so tests can tell."""
    if path == ANTHROPIC_PATH:
        sent = body["messages"][-1]["content"]
        return f"anthropic summary of {len(sent)} chars"
    sent = body["messages"][-1]["content"]
    return f"openai summary of {len(sent)} chars"


class LLMServer:
    """The running server: its URLs, the recorded requests and the reply script.

    Attributes:
        max_prompt_tokens: Refuse a longer prompt (see :func:`prompt_tokens`) with HTTP 400,
            as a model with that context does, before the script is consulted; ``None``
            accepts any.
    """

    def __init__(self) -> None:
        self.max_prompt_tokens: int | None = None
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.text: Callable[[str, dict[str, Any]], str] = default_text
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for ``openai.AsyncOpenAI`` (ends in ``/v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` for ``anthropic.AsyncAnthropic`` (the SDK adds ``/v1/messages``)."""
        return self.url

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order."""
        with self._lock:
            self.replies.extend(replies)

    def bodies(self, path: str | None = None) -> list[dict[str, Any]]:
        """The JSON bodies received (on ``path`` only, when given)."""
        return [r.body for r in self.requests if path is None or r.path == path]

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            return self.replies.pop(0) if self.replies else Reply()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                limit = server.max_prompt_tokens
                if limit is not None and (tokens := prompt_tokens(body)) > limit:
                    with server._lock:
                        server.requests.append(Recorded(self.path, headers, body))
                    self._send(400, _too_long_body(self.path, tokens, limit), {})
                    return
                reply = server._next(Recorded(self.path, headers, body))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if self.path == OPENAI_PATH:
                    make = _openai_body
                elif self.path == ANTHROPIC_PATH:
                    make = _anthropic_body
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                text = reply.text if reply.text is not None else server.text(self.path, body)
                payload = make(reply.status, str(body.get("model")), text)
                self._send(reply.status, payload, reply.headers)

            def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (its timeout) before the delayed answer was written.
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    def start(self) -> None:
        """Serve on a background thread."""
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A fresh local chat API for one test; stopped afterwards."""
    server = LLMServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
