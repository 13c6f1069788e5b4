"""A compressor's settings: one object built by keyword, checked and derived once per set of
arguments, so a compressor built per request behaves exactly as one built from scratch: see
``slimcache/core/settings/compressor.py``."""

from __future__ import annotations

import dataclasses
import inspect
import typing
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
from slimcache.core.settings.compressor import CompressorOptions, CompressorSettings
from slimcache.testing import clear_process_caches, process_caches
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
    assert first._derived is second._derived
    other = SummarizeCompressor(summarizer, trigger=MessageThreshold(9), keep=KeepMessages(4))
    assert other._derived is not first._derived


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


def test_the_keywords_are_the_settings_with_their_types() -> None:
    fields = {f.name: f for f in dataclasses.fields(CompressorSettings)}
    options = typing.get_type_hints(CompressorOptions)
    settings = typing.get_type_hints(CompressorSettings)
    assert set(options) == set(fields) - {"summarizer"}
    assert {name: settings[name] for name in options} == options
    shown = inspect.signature(SummarizeCompressor).parameters
    assert list(shown) == ["summarizer", "store", *(f for f in fields if f != "summarizer")]
    assert all(shown[name].default == fields[name].default for name in options)


async def test_each_setting_reaches_its_use_by_name() -> None:
    # Settings of one type given different values: a swap of any two would show.
    store = MemoryStore()
    compressor = SummarizeCompressor(
        RecordingSummarizer(),
        store,
        lock_wait=3,
        lease_ttl=7,
        summarizer_timeout=11,
        store_timeout=13,
        max_summary_tokens=17,
        message_overhead=19,
        checkpoints=23,
    )
    settings = compressor._settings
    assert (settings.lock_wait, settings.lease_ttl) == (3.0, 7.0)
    assert isinstance(settings.lease_ttl, float)
    assert compressor._derived.producer.timeout == 11.0
    assert compressor._io.timeout == 13.0
    assert compressor._derived.producer.max_tokens == 17
    assert compressor._derived.producer.overhead == 19
    assert compressor._derived.writer.checkpoints == 23
    assert compressor._derived.rules.keep == KeepMessages(10)


def test_a_keyword_that_is_no_setting_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="'lease_tll'"):
        SummarizeCompressor(RecordingSummarizer(), lease_tll=5)  # type: ignore[call-arg]


def test_keywords_given_in_another_order_make_the_same_settings() -> None:
    summarizer = RecordingSummarizer()
    first = SummarizeCompressor(summarizer, lock_wait=2.0, lease_ttl=4.0)
    second = SummarizeCompressor(summarizer, lease_ttl=4.0, lock_wait=2.0)
    assert first._settings == second._settings
    assert first._derived.bound == second._derived.bound


def test_clearing_the_process_caches_forgets_checked_settings() -> None:
    summarizer = RecordingSummarizer()
    first = SummarizeCompressor(summarizer, trigger=MessageThreshold(18))
    assert SummarizeCompressor(summarizer, trigger=MessageThreshold(18))._derived is first._derived
    clear_process_caches()
    again = SummarizeCompressor(summarizer, trigger=MessageThreshold(18))
    assert again._derived is not first._derived
    assert again._settings == first._settings


def test_every_process_cache_is_listed_in_one_place() -> None:
    import slimcache._process

    registered = {(cache.module, cache.name) for cache in process_caches()}
    documented = slimcache._process.__doc__ or ""
    for module, name in registered:
        assert f"``{module}``: ``{name}``" in documented or f"``{name}``, " in documented, name
    assert ("slimcache.core.settings.compressor", "compressor settings") in registered
    assert ("slimcache.core.store_io", "known entries") in registered
    assert ("slimcache.stores.protocol", "store abilities") in registered
    assert ("slimcache.core.fingerprints", "hashed ranges") in registered
