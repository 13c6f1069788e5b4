"""Messages come back from the front doors as the type they went in, so an SDK's own message
types pass through ``compress`` to that SDK under ``mypy --strict``.

mypy checks this file (the project's ``mypy`` runs over ``tests``): each ``assert_type`` fails
the type check when a front door returns anything else; pytest runs the same code for real.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anthropic.types import MessageParam
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from typing_extensions import assert_type

from slimcache import (
    Conversation,
    KeepMessages,
    MessageThreshold,
    SummarizeCompressor,
    SummaryContext,
    TrimCompressor,
)
from slimcache.messages import Message


async def summarize(messages: Sequence[Message], context: SummaryContext) -> str:
    return f"{len(messages)} earlier messages"


def compressor() -> SummarizeCompressor:
    return SummarizeCompressor(summarize, trigger=MessageThreshold(6), keep=KeepMessages(4))


def openai_history() -> list[ChatCompletionMessageParam]:
    history: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "Be brief."},
    ]
    for i in range(8):
        if i % 2:
            history.append({"role": "assistant", "content": f"turn {i}"})
        else:
            history.append({"role": "user", "content": f"turn {i}"})
    return history


async def send_to_openai(client: AsyncOpenAI, history: list[ChatCompletionMessageParam]) -> Any:
    """What an application writes; type-checked, never called (no network in the tests)."""
    messages = await compressor().compress(history, thread_id="t")
    return await client.chat.completions.create(model="gpt-4o-mini", messages=messages)


async def test_openai_messages_pass_through_compress_as_their_own_type() -> None:
    compressed = await compressor().compress(openai_history(), thread_id="t")
    assert_type(compressed, list[ChatCompletionMessageParam])
    assert compressed[1] == {
        "role": "system",
        "content": "Summary of the earlier conversation:\n4 earlier messages",
    }
    trimmed = await TrimCompressor(20).compress(openai_history())
    assert_type(trimmed, list[ChatCompletionMessageParam])
    assert trimmed[-1] == {"role": "assistant", "content": "turn 7"}


async def test_anthropic_messages_and_plain_dicts_keep_their_types_too() -> None:
    turns: list[MessageParam] = []
    for i in range(8):
        if i % 2:
            turns.append({"role": "assistant", "content": f"turn {i}"})
        else:
            turns.append({"role": "user", "content": f"turn {i}"})
    assert_type(await compressor().compress(turns, thread_id="a"), list[MessageParam])
    plain = [{"role": "user", "content": "hi"}]
    assert_type(await compressor().compress(plain), list[dict[str, str]])
    conversation = Conversation("c", plain)
    assert_type(await compressor().compress(conversation), Conversation)
