"""A local chat API on loopback: ``llm_server`` speaks OpenAI's and Anthropic's wire formats.

``POST /v1/chat/completions`` answers as OpenAI's chat completions do, ``POST /v1/messages`` as
Anthropic's Messages API, and ``GET /v1/models`` lists one model in the format of whichever SDK
asks (an ``anthropic-version`` header marks Anthropic's). Every request is recorded (method,
path, headers, JSON body) so tests assert on exactly what the official SDKs sent. Scripted
replies (:meth:`LLMServer.enqueue`) answer the next requests in order with an error status, a
dropped connection, a delay or a given text; once the script is used up, each request gets a
successful reply (the model list plays the script's status, delay and drop too).

It behaves as a real server does at its limits, counting tokens with its own approximation,
:func:`count_tokens` (four characters a token, rounded up, plus
``MESSAGE_OVERHEAD`` per message, which is what ``slimcache.approx_tokens`` and the default
message overhead count):

- ``token_scale`` counts every prompt as that many times its approximation (2.0: twice as many
  tokens, as a real tokenizer counts JSON), in the context check and in the usage it reports;
  with ``reports_usage`` off, an OpenAI reply carries no usage, as some servers send none.
- With ``context_tokens`` set, a prompt of more tokens than that is rejected with HTTP 400 and
  the body a real server gives: llama.cpp's ``exceed_context_size_error`` on the OpenAI path
  (or OpenAI's ``context_length_exceeded``, or vLLM's message: ``context_server``),
  Anthropic's ``prompt is too long`` on the Anthropic path. The request is recorded; the
  script is not consumed (a rejection depends on the request, not on the moment).
- A reply longer than the request's ``max_tokens`` (or ``max_completion_tokens``) is cut to that
  many tokens (``4 * max_tokens`` characters) and comes with ``finish_reason="length"``
  (OpenAI) or ``stop_reason="max_tokens"`` (Anthropic).
- With ``api_key`` set, a request without that key is refused with HTTP 401.
- ``limit_fields`` are the fields of an OpenAI request whose limit it obeys (both by default;
  llama.cpp's server obeys only ``max_tokens``), and a request carrying one of
  ``refused_fields`` is refused with HTTP 400 and the body OpenAI's reasoning models give for
  ``max_tokens`` (recorded, the script not consumed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "ANTHROPIC_PATH",
    "MESSAGE_OVERHEAD",
    "MODELS_PATH",
    "OPENAI_PATH",
    "LLMServer",
    "Recorded",
    "Reply",
    "count_tokens",
    "llm_server",
    "prompt_tokens",
    "system_text",
]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
MODELS_PATH = "/v1/models"
MESSAGE_OVERHEAD = 4
"""Tokens the server adds per message of the prompt (the system prompt counts as one)."""
MODEL_ID = "local-model"
"""The one model ``GET /v1/models`` lists."""


def count_tokens(text: str) -> int:
    """The server's token count of a text: four characters a token, rounded up."""
    return math.ceil(len(text) / 4)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def system_text(path: str, body: dict[str, Any]) -> str:
    """The system prompt of a request: Anthropic's ``system``, or OpenAI's system messages."""
    if path == ANTHROPIC_PATH:
        return _text_of(body.get("system"))
    return "\n".join(
        _text_of(m.get("content"))
        for m in body.get("messages", [])
        if m.get("role") in ("system", "developer")
    )


def prompt_tokens(path: str, body: dict[str, Any]) -> int:
    """The prompt's tokens as the server counts them: each message's text plus the overhead."""
    texts = [_text_of(m.get("content")) for m in body.get("messages", [])]
    if path == ANTHROPIC_PATH and body.get("system") is not None:
        texts.append(_text_of(body["system"]))
    return sum(count_tokens(text) + MESSAGE_OVERHEAD for text in texts)


@dataclass(frozen=True)
class Recorded:
    """One request as received (``body`` is ``{}`` for a ``GET``)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    method: str = "POST"


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


@dataclass(frozen=True)
class _Answer:
    """What one successful reply says: its text, whether the budget cut it, its token counts."""

    text: str
    cut: bool
    prompt: int
    usage: bool = True

    @classmethod
    def to(
        cls,
        body: dict[str, Any],
        text: str,
        prompt: int,
        fields: tuple[str, ...] = ("max_tokens", "max_completion_tokens"),
    ) -> _Answer:
        """The reply ``text`` as a server with the request's token budget (in one of
        ``fields``, the first found) gives it."""
        budget = next((body[name] for name in fields if name in body), None)
        if isinstance(budget, int) and count_tokens(text) > budget:
            return cls(text[: 4 * budget], True, prompt)
        return cls(text, False, prompt)


def _openai_body(status: int, model: str, answer: _Answer) -> dict[str, Any]:
    if status >= 400:
        return {"error": {"message": f"scripted {status}", "type": _error_type(status)}}
    completion = count_tokens(answer.text)
    usage = {
        "prompt_tokens": answer.prompt,
        "completion_tokens": completion,
        "total_tokens": answer.prompt + completion,
    }
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.text, "refusal": None},
                "finish_reason": "length" if answer.cut else "stop",
                "logprobs": None,
            }
        ],
        "usage": usage if answer.usage else None,
    }


def _anthropic_body(status: int, model: str, answer: _Answer) -> dict[str, Any]:
    if status >= 400:
        return {"type": "error", "error": {"type": _error_type(status), "message": "scripted"}}
    content = [{"type": "text", "text": answer.text}] if answer.text else []
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "max_tokens" if answer.cut else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": answer.prompt, "output_tokens": count_tokens(answer.text)},
    }


def context_error(
    path: str, tokens: int, context: int, server: str = "llama.cpp"
) -> dict[str, Any]:
    """The HTTP 400 body of a prompt over the context: Anthropic's, or on the OpenAI path the
    ``server``'s: llama.cpp's, OpenAI's or vLLM's."""
    if path != ANTHROPIC_PATH and server == "openai":
        message = (
            f"This model's maximum context length is {context} tokens. However, your messages "
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
    if path != ANTHROPIC_PATH and server == "vllm":
        message = (
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{tokens} tokens in the messages, Please reduce the length of the messages."
        )
        return {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
    if path == ANTHROPIC_PATH:
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {context} maximum",
            },
        }
    return {
        "error": {
            "code": 400,
            "message": (
                f"request ({tokens} tokens) exceeds the available context size "
                f"({context} tokens), try increasing it"
            ),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": context,
        }
    }


def unsupported_field_error(name: str) -> dict[str, Any]:
    """The HTTP 400 body of OpenAI's reasoning models for a field they refuse."""
    other = "max_completion_tokens" if name == "max_tokens" else "max_tokens"
    return {
        "error": {
            "message": (
                f"Unsupported parameter: '{name}' is not supported with this model. "
                f"Use '{other}' instead."
            ),
            "type": "invalid_request_error",
            "param": name,
            "code": "unsupported_parameter",
        }
    }


def _models_body(anthropic: bool) -> dict[str, Any]:
    model: dict[str, Any]
    if anthropic:
        model = {
            "type": "model",
            "id": MODEL_ID,
            "display_name": MODEL_ID,
            "created_at": "2025-01-01T00:00:00Z",
        }
        return {"data": [model], "has_more": False, "first_id": MODEL_ID, "last_id": MODEL_ID}
    model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "local"}
    return {"object": "list", "data": [model]}


def _authorized(headers: dict[str, str], key: str | None) -> bool:
    if key is None:
        return True
    return key in (headers.get("x-api-key"), headers.get("authorization", "")[len("Bearer ") :])


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
        requests: Every request received, in order.
        replies: The script still to play (see :meth:`enqueue`).
        text: Makes the default reply text from the path and the request body.
        context_tokens: The context size: a prompt of more tokens is rejected with HTTP 400
            (``None``: no limit).
        api_key: The key every request must carry (``None``: any or none).
        bounds_reply: ``False``: the request's ``max_tokens`` is ignored and the reply is never
            cut, as llama.cpp's servers ignore ``max_completion_tokens``.
        limit_fields: The fields of an OpenAI request whose limit cuts the reply
            (``("max_tokens",)``: as llama.cpp's server).
        refused_fields: Fields of an OpenAI request refused with HTTP 400
            (``("max_tokens",)``: as OpenAI's reasoning models).
        token_scale: How many tokens the server counts for each token of
            :func:`prompt_tokens`, in the context check and in the usage it reports (2.0: twice
            as many, as a tokenizer counts JSON against slimcache's estimate).
        reports_usage: ``False``: OpenAI replies carry no usage (``"usage": null``).
        context_server: Whose body a prompt over the context gets on the OpenAI path:
            ``"llama.cpp"`` (``exceed_context_size_error``, with ``n_prompt_tokens`` and
            ``n_ctx``), ``"openai"`` (``context_length_exceeded``) or ``"vllm"`` (a message
            naming the context, no code).
    """

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.text: Callable[[str, dict[str, Any]], str] = default_text
        self.context_tokens: int | None = None
        self.api_key: str | None = None
        self.bounds_reply = True
        self.limit_fields: tuple[str, ...] = ("max_tokens", "max_completion_tokens")
        self.refused_fields: tuple[str, ...] = ()
        self.token_scale = 1.0
        self.context_server = "llama.cpp"
        self.reports_usage = True
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
        """The JSON bodies of the ``POST`` requests received (on ``path`` only, when given)."""
        return [
            r.body for r in self.requests if r.method == "POST" and (path is None or r.path == path)
        ]

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def _next(self) -> Reply:
        with self._lock:
            return self.replies.pop(0) if self.replies else Reply()

    def counted(self, path: str, body: dict[str, Any]) -> int:
        """The prompt's tokens as this server counts them: :func:`prompt_tokens` times
        ``token_scale``, rounded up."""
        return math.ceil(prompt_tokens(path, body) * self.token_scale)

    def _over_context(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The 400 body when the prompt does not fit the context, else ``None``."""
        tokens = self.counted(path, body)
        if self.context_tokens is None or tokens <= self.context_tokens:
            return None
        return context_error(path, tokens, self.context_tokens, self.context_server)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: without this, Nagle's algorithm and the
            # client's delayed acknowledgement hold every reply back some 40 ms.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                server._record(Recorded(self.path, headers, {}, "GET"))
                if self.path.partition("?")[0] != MODELS_PATH:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                if not _authorized(headers, server.api_key):
                    self._send(401, _openai_body(401, "", _Answer("", False, 0)), {})
                    return
                reply = server._next()
                if self._delay_or_drop(reply):
                    return
                if reply.status >= 400:
                    self._send(
                        reply.status,
                        _openai_body(reply.status, "", _Answer("", False, 0)),
                        reply.headers,
                    )
                    return
                self._send(200, _models_body("anthropic-version" in headers), reply.headers)

            def _delay_or_drop(self, reply: Reply) -> bool:
                """Wait as the reply says; drop the connection (and say so) if it says that."""
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                return reply.drop

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                server._record(Recorded(self.path, headers, body))
                if self.path == OPENAI_PATH:
                    make = _openai_body
                elif self.path == ANTHROPIC_PATH:
                    make = _anthropic_body
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                if not _authorized(headers, server.api_key):
                    self._send(401, make(401, "", _Answer("", False, 0)), {})
                    return
                refused = [n for n in server.refused_fields if n in body]
                if self.path == OPENAI_PATH and refused:
                    self._send(400, unsupported_field_error(refused[0]), {})
                    return
                rejected = server._over_context(self.path, body)
                if rejected is not None:
                    self._send(400, rejected, {})
                    return
                reply = server._next()
                if self._delay_or_drop(reply):
                    return
                text = reply.text if reply.text is not None else server.text(self.path, body)
                bounded = body if server.bounds_reply else {}
                fields = server.limit_fields if self.path == OPENAI_PATH else ("max_tokens",)
                answer = _Answer.to(bounded, text, server.counted(self.path, body), fields)
                answer = dataclasses.replace(answer, usage=server.reports_usage)
                self._send(
                    reply.status, make(reply.status, str(body.get("model")), answer), reply.headers
                )

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
