"""LangChain messages in and out of slimcache, and a LangChain chat model as the summarizer.

slimcache works on OpenAI-style message dicts; LangChain and LangGraph keep ``BaseMessage``
objects. :func:`from_langchain` and :func:`to_langchain` convert between the two (system,
developer, human, AI with tool calls, tool messages; string content or content parts), and
:func:`compress_langchain` runs a compressor on a LangChain message list and hands back
LangChain messages, the verbatim ones being the very objects given::

    from slimcache.langchain import compress_langchain

    messages = await compress_langchain(compressor, state["messages"], thread_id=thread_id)

:class:`LangChainSummarizer` makes any LangChain chat model (``ChatOpenAI``, ``ChatAnthropic``,
a local model...) a slimcache summarizer.

Needs ``langchain-core``: ``pip install "slimcache[langchain]"``. Importing this module does
not; calling its functions without it raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slimcache._exceptions import InvalidInput, MissingExtraError, SummarizerError
from slimcache.core.compressor import SummarizeCompressor
from slimcache.core.summarizer import SummaryContext
from slimcache.core.truncation import (
    OnTruncated,
    Reply,
    check_on_truncated,
    summarize_within_budget,
)
from slimcache.messages import Message, check_messages
from slimcache.recipes.trim import TrimCompressor

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.runnables import Runnable

__all__ = [
    "DEVELOPER_ROLE_KEY",
    "LangChainSummarizer",
    "compress_langchain",
    "from_langchain",
    "to_langchain",
]

DEVELOPER_ROLE_KEY = "__openai_role__"
"""The ``additional_kwargs`` key that marks a ``SystemMessage`` as a developer message.

It is the marker ``langchain-openai`` itself reads and writes, so a developer message keeps
its role through LangChain and back.
"""


def _require_langchain() -> None:
    # The SDK is imported where it is used, so that importing slimcache never needs it.
    try:
        import langchain_core.messages  # noqa: F401
    except ImportError:
        raise MissingExtraError(
            'slimcache.langchain needs langchain-core: pip install "slimcache[langchain]"'
        ) from None


# ---------------------------------------------------------------- dicts -> LangChain


def _parse_arguments(arguments: str) -> dict[str, Any] | None:
    # An empty string is how some servers write "no arguments".
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _ai_message(message: Message, common: dict[str, Any]) -> AIMessage:
    from langchain_core.messages import AIMessage

    raw_calls = message.get("tool_calls") or []
    tool_calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in raw_calls:
        function = call["function"]
        arguments = function.get("arguments", "")
        args = _parse_arguments(arguments)
        if args is None:
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "name": function["name"],
                    "args": arguments,
                    "id": call["id"],
                    "error": "arguments are not a JSON object",
                }
            )
        else:
            tool_calls.append(
                {"type": "tool_call", "name": function["name"], "args": args, "id": call["id"]}
            )
    if raw_calls:
        # Kept as given (as langchain-openai does), so from_langchain gives back the exact
        # argument strings, and with them the same fingerprint.
        common["additional_kwargs"]["tool_calls"] = copy.deepcopy(list(raw_calls))
    content = message.get("content")
    return AIMessage(
        content=_copy_content(content) if content is not None else "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        **common,
    )


def _copy_content(content: Any) -> Any:
    return content if isinstance(content, str) else copy.deepcopy(list(content))


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """Convert OpenAI-style message dicts to LangChain messages.

    ``system`` and ``developer`` become ``SystemMessage`` (a developer message marked with
    ``additional_kwargs["__openai_role__"] = "developer"``), ``user``/``human``
    ``HumanMessage``, ``assistant`` ``AIMessage`` (tool calls parsed into ``tool_calls``, or
    ``invalid_tool_calls`` when the arguments are not a JSON object; the calls as given are
    kept in ``additional_kwargs["tool_calls"]``), ``tool`` ``ToolMessage``. ``name`` and
    ``id`` carry over, ``metadata`` goes to ``additional_kwargs["metadata"]``, and content
    parts are copied as they are.

    Args:
        messages: Chat messages as :meth:`slimcache.SummarizeCompressor.compress` takes them.

    Returns:
        One LangChain message per message, in order.

    Raises:
        InvalidInput: A message breaks a rule slimcache checks (the same checks as
            ``compress``), naming its index.
        MissingExtraError: ``langchain-core`` is not installed.
    """
    _require_langchain()
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    check_messages(messages)
    converted: list[BaseMessage] = []
    for message in messages:
        role = message["role"]
        common: dict[str, Any] = {"additional_kwargs": {}}
        if message.get("name") is not None:
            common["name"] = message["name"]
        if message.get("id") is not None:
            common["id"] = str(message["id"])
        if message.get("metadata") is not None:
            common["additional_kwargs"]["metadata"] = copy.deepcopy(dict(message["metadata"]))
        content = message.get("content")
        if role in ("system", "developer"):
            if role == "developer":
                common["additional_kwargs"][DEVELOPER_ROLE_KEY] = "developer"
            converted.append(SystemMessage(content=_copy_content(content), **common))
        elif role in ("user", "human"):
            converted.append(HumanMessage(content=_copy_content(content), **common))
        elif role == "assistant":
            converted.append(_ai_message(message, common))
        else:
            converted.append(
                ToolMessage(
                    content=_copy_content(content),
                    tool_call_id=message["tool_call_id"],
                    **common,
                )
            )
    return converted


# ---------------------------------------------------------------- LangChain -> dicts


def _role_of(message: object, index: int) -> str:
    from langchain_core.messages import (
        AIMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    if isinstance(message, SystemMessage):
        marked = message.additional_kwargs.get(DEVELOPER_ROLE_KEY) == "developer"
        return "developer" if marked else "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        role = {"human": "user", "ai": "assistant"}.get(message.role, message.role)
        if role in ("system", "developer", "user", "assistant"):
            return role
        raise InvalidInput(
            f"ChatMessage role {message.role!r} has no OpenAI equivalent", index=index
        )
    raise InvalidInput(
        f"cannot convert a {type(message).__name__} (expected a System, Human, AI, Tool or "
        "ChatMessage)",
        index=index,
    )


def _content_of(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": part} if isinstance(part, str) else copy.deepcopy(dict(part))
        for part in content
    ]


def _rebuilt_calls(message: AIMessage) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = [
        {
            "id": call.get("id"),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call["args"], ensure_ascii=False),
            },
        }
        for call in message.tool_calls
    ]
    calls.extend(
        {
            "id": call.get("id"),
            "type": "function",
            "function": {"name": call.get("name"), "arguments": call.get("args") or ""},
        }
        for call in message.invalid_tool_calls
    )
    return calls


def _raw_calls_match(raw: object, message: AIMessage) -> bool:
    """Whether ``additional_kwargs["tool_calls"]`` still says what ``message.tool_calls`` say."""
    if not isinstance(raw, list):
        return False
    expected: dict[object, tuple[object, object, bool]] = {}
    for call in message.tool_calls:
        expected[call.get("id")] = (call["name"], call["args"], True)
    for bad in message.invalid_tool_calls:
        expected[bad.get("id")] = (bad.get("name"), bad.get("args") or "", False)
    if len(raw) != len(expected) or len(expected) != (
        len(message.tool_calls) + len(message.invalid_tool_calls)
    ):
        return False
    for call in raw:
        if not isinstance(call, Mapping) or call.get("id") not in expected:
            return False
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("arguments", ""), str):
            return False
        name, args, valid = expected[call["id"]]
        arguments = function.get("arguments", "")
        if function.get("name") != name:
            return False
        if (_parse_arguments(arguments) if valid else arguments) != args:
            return False
    return True


def from_langchain(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Convert LangChain messages to the OpenAI-style dicts slimcache works on.

    The inverse of :func:`to_langchain`: ``SystemMessage`` becomes ``system`` (``developer``
    when marked so), ``HumanMessage`` ``user``, ``AIMessage`` ``assistant`` with
    ``tool_calls`` (arguments as JSON strings; ``content`` is ``None`` when it is empty and
    there are calls), ``ToolMessage`` ``tool``, and ``ChatMessage`` its own role. String
    parts of a content list become text parts; other parts are copied as they are. ``name``,
    ``id`` and ``additional_kwargs["metadata"]`` carry over.

    When ``additional_kwargs["tool_calls"]`` (set by :func:`to_langchain` and by
    ``langchain-openai``) still matches the message's tool calls, it is used as it is, so
    the argument strings come back byte for byte and the fingerprints of a conversation do
    not change across conversions.

    Args:
        messages: LangChain messages, e.g. a LangGraph state's ``"messages"``.

    Returns:
        One dict per message, in order.

    Raises:
        InvalidInput: A message of a kind with no OpenAI equivalent (``FunctionMessage``,
            ``RemoveMessage``, a ``ChatMessage`` with another role), naming its index.
        MissingExtraError: ``langchain-core`` is not installed.
    """
    _require_langchain()
    from langchain_core.messages import AIMessage, ToolMessage

    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInput(f"messages must be a list of messages, got {type(messages).__name__}")
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = _role_of(message, index)
        item: dict[str, Any] = {"role": role, "content": _content_of(message.content)}
        if message.name is not None:
            item["name"] = message.name
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            raw = message.additional_kwargs.get("tool_calls")
            calls = copy.deepcopy(raw) if _raw_calls_match(raw, message) else None
            item["tool_calls"] = calls if calls is not None else _rebuilt_calls(message)
            if item["content"] == "" or item["content"] == []:
                item["content"] = None
        if isinstance(message, ToolMessage):
            item["tool_call_id"] = message.tool_call_id
        if message.id is not None:
            item["id"] = message.id
        metadata = message.additional_kwargs.get("metadata")
        if isinstance(metadata, Mapping):
            item["metadata"] = copy.deepcopy(dict(metadata))
        converted.append(item)
    return converted


# ---------------------------------------------------------------- compressing LangChain lists


def _pinned_count(messages: Sequence[Message]) -> int:
    count = 0
    while count < len(messages) and messages[count]["role"] in ("system", "developer"):
        count += 1
    return count


async def compress_langchain(
    compressor: SummarizeCompressor | TrimCompressor,
    messages: Sequence[BaseMessage],
    *,
    thread_id: str | int | None = None,
    force: bool = False,
) -> list[BaseMessage]:
    """Compress a list of LangChain messages with a slimcache compressor.

    The messages are converted with :func:`from_langchain` and compressed; the result is
    ``[pinned system messages..., summary SystemMessage, *verbatim messages]`` for a
    :class:`~slimcache.SummarizeCompressor` (``[pinned..., *most recent messages]`` for a
    :class:`~slimcache.TrimCompressor`), where every message kept is the very object given,
    with its ids, metadata and response data intact. Only the summary message is new.

    In LangGraph, call it in a node or a ``pre_model_hook`` with the state's messages and the
    thread id from ``config["configurable"]["thread_id"]``.

    Args:
        compressor: A :class:`~slimcache.SummarizeCompressor` or a
            :class:`~slimcache.TrimCompressor`.
        messages: The conversation, oldest first.
        thread_id: The thread the messages belong to; without one nothing is cached.
        force: Compress now whatever the trigger says (``SummarizeCompressor`` only; a trim
            always trims to its budget).

    Returns:
        The compressed conversation as LangChain messages.

    Raises:
        InvalidInput: A message cannot be converted or breaks a rule slimcache checks.
        SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        StoreError: The store failed (with ``on_store_error="raise"``).
        MissingExtraError: ``langchain-core`` is not installed.
    """
    originals = list(messages)
    dicts = from_langchain(originals)
    if isinstance(compressor, TrimCompressor):
        trimmed = await compressor.compress_detailed(dicts, thread_id=thread_id)
        if not trimmed.dropped:
            return originals
        for pinned in (_pinned_count(dicts), 0):
            start = pinned + trimmed.dropped
            if trimmed.messages == dicts[:pinned] + dicts[start:]:
                return originals[:pinned] + originals[start:]
        return to_langchain(trimmed.messages)
    if not isinstance(compressor, SummarizeCompressor):
        raise TypeError(
            f"compressor must be a SummarizeCompressor or a TrimCompressor, "
            f"got {type(compressor).__name__}"
        )
    result = await compressor.compress_detailed(dicts, thread_id=thread_id, force=force)
    if result.summary_range is None:
        return originals
    end = result.summary_range[1]
    pinned = len(result.messages) - 1 - (len(originals) - end - 1)
    summary = to_langchain([result.messages[pinned]])
    return originals[:pinned] + summary + originals[end + 1 :]


# ---------------------------------------------------------------- a chat model as summarizer


def _reply_text(reply: object) -> str:
    if isinstance(reply, str):
        return reply
    content = getattr(reply, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, Mapping) and part.get("type") == "text")
        )
    raise SummarizerError(f"the chat model returned a {type(reply).__name__}, not a message")


# How chat models say they stopped at the token budget, in ``response_metadata``:
# langchain-openai and most OpenAI-compatible ones ``finish_reason``, langchain-anthropic and
# Bedrock ``stop_reason``, Google's ``finish_reason="MAX_TOKENS"``, Ollama's ``done_reason``.
_CUT_MARKS: dict[str, tuple[str, ...]] = {
    "finish_reason": ("length", "max_tokens", "MAX_TOKENS"),
    "stop_reason": ("max_tokens",),
    "done_reason": ("length",),
}


def _stop_reason(reply: object) -> tuple[bool, str]:
    """Whether the reply was cut at the token budget, and the stop reason as the model gave it."""
    metadata = getattr(reply, "response_metadata", None)
    if not isinstance(metadata, Mapping):
        return False, "no stop reason given"
    for key, cut_values in _CUT_MARKS.items():
        value = metadata.get(key)
        if value is not None:
            return value in cut_values, f"{key}={value!r}"
    return False, "no stop reason given"


class LangChainSummarizer:
    """Makes a LangChain chat model (or any runnable taking messages) a slimcache summarizer.

    Each call sends ``to_langchain(context.to_chat(messages))`` (a ``SystemMessage`` with the
    task's prompt and a ``HumanMessage`` with the previous summary and the transcript) through
    ``model.ainvoke`` and returns the reply's text. Retries and timeouts are the model's own
    (``ChatOpenAI(max_retries=...)``, ``.with_retry()``).

    A reply whose ``response_metadata`` says the model stopped at its token budget
    (``finish_reason="length"`` from ``ChatOpenAI`` and OpenAI-compatible models,
    ``stop_reason="max_tokens"`` from ``ChatAnthropic``, and the like) is asked for again with a
    prompt asking for a shorter summary; see ``on_truncated``. A model that reports no stop
    reason is taken at its word.

    Args:
        model: A chat model such as ``ChatOpenAI(model="gpt-4o-mini")``, or a runnable
            returning a message or a string.
        name: The id slimcache records with each cached summary. Default:
            ``"langchain:<model class>:<model name>"``.
        max_tokens_kwarg: When given (e.g. ``"max_tokens"``), the summary's token budget is
            passed to ``ainvoke`` under this keyword, which most chat models forward to their
            API. By default only the prompt states the budget.
        on_truncated: When the reply is cut at the budget (the model's own ``max_tokens``, or
            the one passed through ``max_tokens_kwarg``), the request is made once more asking
            for a shorter summary; if that reply is cut too, ``"raise"`` (default) raises
            :class:`~slimcache.SummarizerError`, so nothing is cached, and ``"accept"``
            returns the cut summary with a warning logged.

    Raises:
        ConfigurationError: ``on_truncated`` is not ``"raise"`` or ``"accept"``.
        MissingExtraError: ``langchain-core`` is not installed (on the first call).
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        *,
        name: str | None = None,
        max_tokens_kwarg: str | None = None,
        on_truncated: OnTruncated = "raise",
    ) -> None:
        self.model = model
        model_name = getattr(model, "model_name", None) or getattr(model, "model", None)
        default = f"langchain:{type(model).__name__}"
        if isinstance(model_name, str) and model_name:
            default = f"{default}:{model_name}"
        self.name = name or default
        # slimcache records "<module>.<__qualname__>" with each summary; see slimcache.llm.
        self.__qualname__ = self.name
        self.max_tokens_kwarg = max_tokens_kwarg
        self.on_truncated = check_on_truncated(on_truncated)

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Summarize ``messages`` as ``context`` asks; see :class:`slimcache.SummaryContext`.

        Raises:
            SummarizerError: The reply has no text, or it is cut at the budget even when asked
                for a shorter summary (with ``on_truncated="raise"``).
        """
        chat = context.to_chat(messages)
        options: dict[str, Any] = {}
        if self.max_tokens_kwarg:
            options[self.max_tokens_kwarg] = context.max_tokens

        async def complete(prompt: str) -> Reply:
            sent = to_langchain([{"role": "system", "content": prompt}, *chat[1:]])
            reply = await self.model.ainvoke(sent, **options)
            cut, reason = _stop_reason(reply)
            return Reply(_reply_text(reply), cut, reason)

        return await summarize_within_budget(
            complete, context, on_truncated=self.on_truncated, name=self.name
        )

    def __repr__(self) -> str:
        return f"LangChainSummarizer({self.model!r})"
