"""A compressor built per request checks and derives its settings once per set of arguments,
and behaves exactly as one built from scratch: see ``slimcache/core/blueprint.py``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

from slimcache import (
    CompressEvent,
    ConfigurationError,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    Prompts,
    SummarizeCompressor,
)
from tests.fakes import RecordingSummarizer, chat


@dataclass
class RecordingHook:
    """Equal to any other of its kind (a dataclass), but records its own calls."""

    events: list[Any] = field(default_factory=list)

    def __call__(self, event: CompressEvent) -> None:
        self.events.append(event)


def build(summarizer: Any, store: MemoryStore, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(summarizer, store, trigger=MessageThreshold(6), **options)


async def test_every_compressor_calls_its_own_summarizer_and_hooks() -> None:
    # Equal objects that are not the same one: each compressor uses what it was given.
    first, second = RecordingSummarizer(), RecordingSummarizer()
    first_hook, second_hook = RecordingHook(), RecordingHook()
    assert first == second
    assert first_hook == second_hook
    store = MemoryStore()
    await build(first, store, keep=KeepMessages(3), on_compress=first_hook).compress(
        chat(8), thread_id="a"
    )
    await build(second, store, keep=KeepMessages(3), on_compress=second_hook).compress(
        chat(8), thread_id="b"
    )
    assert len(first.calls) == len(second.calls) == 1
    assert [e.thread_id for e in first_hook.events] == ["a"]
    assert [e.thread_id for e in second_hook.events] == ["b"]


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ({"max_summary_tokens": 1}, {"max_summary_tokens": True}),
        ({"lock_wait": 0}, {"lock_wait": False}),
        ({"ttl": 5}, {"ttl": True}),
        ({"checkpoints": 2}, {"checkpoints": 2.0}),
    ],
)
def test_a_value_equal_to_an_accepted_one_is_still_checked(
    good: dict[str, Any], bad: dict[str, Any]
) -> None:
    # True == 1 and 2.0 == 2: an accepted value must not vouch for a different one.
    summarizer = RecordingSummarizer()
    SummarizeCompressor(summarizer, **good)
    with pytest.raises(ConfigurationError, match=next(iter(bad))):
        SummarizeCompressor(summarizer, **bad)


def test_a_rejected_setting_is_rejected_every_time() -> None:
    summarizer = RecordingSummarizer()
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="summary_role"):
            SummarizeCompressor(summarizer, summary_role="robot")


def test_settings_objects_built_anew_match_by_value() -> None:
    summarizer = RecordingSummarizer()

    def made() -> SummarizeCompressor:
        return SummarizeCompressor(
            summarizer,
            trigger=MessageThreshold(8),
            keep=KeepMessages(4),
            prompts=Prompts(summarize="Sum up in {max_tokens} tokens."),
        )

    first, second = made(), made()
    assert first._blueprint is second._blueprint
    other = SummarizeCompressor(summarizer, trigger=MessageThreshold(9), keep=KeepMessages(4))
    assert other._blueprint is not first._blueprint


async def test_compressors_built_per_request_count_each_text_once() -> None:
    # The token counter depends on the text alone: compressors given the same one share
    # what it counted, as a server building one per request needs.
    counted: list[str] = []

    def counter(text: str) -> int:
        counted.append(text)
        return len(text.split())

    summarizer, store = RecordingSummarizer(), MemoryStore()
    history = chat(12)
    for _ in range(3):
        compressor = build(summarizer, store, keep=KeepMessages(3), token_counter=counter)
        await compressor.compress(history, thread_id="t")
    contents = [str(m["content"]) for m in history]
    assert all(counted.count(text) == 1 for text in contents if text in counted)
    assert len(summarizer.calls) == 1


class SignatureCountingSummarizer:
    """A summarizer that counts how often its signature is read (``inspect.signature`` reads
    ``__signature__`` first)."""

    reads = 0

    @property
    def __signature__(self) -> inspect.Signature:
        type(self).reads += 1
        return inspect.signature(self.summarize)

    async def summarize(self, messages: Any, context: Any) -> str:
        return "summary"

    async def __call__(self, messages: Any, context: Any) -> str:
        return await self.summarize(messages, context)


def test_a_summarizer_signature_is_read_once_however_many_compressors_use_it() -> None:
    summarizer = SignatureCountingSummarizer()
    store = MemoryStore()
    for _ in range(5):
        build(summarizer, store, keep=KeepMessages(2))
    assert SignatureCountingSummarizer.reads == 1


def test_a_summarizer_without_its_context_is_refused_however_many_times_it_is_given() -> None:
    async def plain(messages: Any) -> str:
        return "summary"

    for _ in range(2):  # a refused summarizer is never remembered as checked
        with pytest.raises(ConfigurationError, match="summarizer must take two arguments"):
            build(plain, MemoryStore(), keep=KeepMessages(2))
