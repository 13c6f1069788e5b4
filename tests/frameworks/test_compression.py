"""The integrations' shared compression: its counters, taken over every compressor it built and
what its fallback served, awaited or blocking."""

from __future__ import annotations

import pytest

from slimcache import InvalidInput, Stats, SummarizerError
from slimcache.frameworks.compression import AgentCompression
from slimcache.frameworks.settings import AgentSettings
from slimcache.stores import MemoryStore
from slimcache.sync import drain
from tests.fakes import RecordingSummarizer, chat


def test_stats_add_sums_counts_and_keeps_the_largest_lag() -> None:
    first, second = Stats(), Stats()
    first.served_stale(16)
    second.served_stale(26)
    second.summarizer_calls = 3
    first.add(second)
    assert (first.stale_served, first.stale_messages, first.max_stale_messages) == (2, 42, 26)
    assert first.summarizer_calls == 3


async def test_agent_compression_stats_keep_the_largest_lag_across_context_sizes() -> None:
    # A fraction in the ceiling needs the model's context size: one compressor per size.
    settings = AgentSettings(
        trigger=("messages", 10),
        keep=("messages", 4),
        ceiling=("fraction", 0.5),
        compressor={"refresh": "background"},
    )
    compression = AgentCompression(RecordingSummarizer(), MemoryStore(), settings)
    await compression.compress(chat(20, system=None), "a", context_size=1_000_000)
    await compression.compress(chat(30, system=None), "b", context_size=2_000_000)
    assert drain(timeout=30)  # the background refreshes, on slimcache's loop
    stats = compression.stats
    assert (stats.stale_served, stats.stale_messages, stats.max_stale_messages) == (2, 42, 26)


def settings(**given: object) -> AgentSettings:
    sizes = {"trigger": ("messages", 6), "keep": ("messages", 2)}
    return AgentSettings(**{**sizes, **given})  # type: ignore[arg-type]


async def test_stats_count_what_the_fallback_served_and_its_requests_once() -> None:
    summarizer = RecordingSummarizer()
    compression = AgentCompression(summarizer, MemoryStore(), settings())
    await compression.compress(chat(8, system=None), "t")
    summarizer.fail_with = SummarizerError("the model went away")
    served = await compression.compress(chat(12, system=None), "t")
    assert served.summary_range is not None  # the first summary, and every message after it
    stats = compression.stats
    assert (stats.requests, stats.summarizer_errors, stats.cache_hits) == (2, 1, 1)


async def test_a_compression_that_raises_counts_no_fallback() -> None:
    summarizer = RecordingSummarizer(fail_with=SummarizerError("down"))
    compression = AgentCompression(summarizer, MemoryStore(), settings(on_summarizer_error="raise"))
    with pytest.raises(SummarizerError, match="down"):
        await compression.compress(chat(8, system=None), "t")
    stats = compression.stats
    assert (stats.requests, stats.summarizer_errors, stats.cache_hits) == (1, 1, 0)


def test_the_blocking_form_compresses_as_the_awaited_one_does() -> None:
    summarizer = RecordingSummarizer()
    compression = AgentCompression(summarizer, MemoryStore(), settings())
    first = compression.compress_blocking(chat(8, system=None), "t")
    again = compression.compress_blocking(chat(8, system=None), "t")
    assert first.messages == again.messages
    assert first.summary_range == (0, 5)
    assert len(summarizer.calls) == 1
    assert (compression.stats.requests, compression.stats.cache_hits) == (2, 1)


def test_no_trigger_never_summarizes_and_serves_what_is_cached() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    AgentCompression(summarizer, store, settings()).compress_blocking(chat(8, system=None), "t")
    never = AgentCompression(summarizer, store, settings(trigger=None))
    served = never.compress_blocking(chat(20, system=None), "t")
    assert served.summary_range == (0, 5)
    assert len(summarizer.calls) == 1


STRAY = [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "x", "content": "r"}]


async def test_a_history_the_compressor_refuses_is_passed_as_it_came_and_counted() -> None:
    summarizer = RecordingSummarizer()
    compression = AgentCompression(summarizer, MemoryStore(), settings())
    history = [*chat(8, system=None), *STRAY]
    result = await compression.compress(history, "t")
    assert (result.outcome, result.summary_range, result.messages) == ("passthrough", None, history)
    again = compression.compress_blocking(history, "t")
    assert again.outcome == "passthrough"
    assert summarizer.calls == []
    stats = compression.stats
    assert (stats.requests, stats.invalid_histories) == (2, 2)


async def test_a_conversion_that_refuses_the_history_passes_it_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    compression = AgentCompression(RecordingSummarizer(), MemoryStore(), settings())

    def refuse() -> list[dict[str, object]]:
        raise InvalidInput("no such kind of message", index=3)

    with caplog.at_level("WARNING", logger="slimcache"):
        result = await compression.compress(refuse, "t")
        compression.compress_blocking(refuse, "t")
        await compression.compress(refuse, "u")
    assert result.outcome == "passthrough"
    assert summarizer_free(compression)
    warned = [r.getMessage() for r in caplog.records if "cannot compress" in r.getMessage()]
    assert len(warned) == 2  # once per thread
    assert "messages[3]: no such kind of message" in warned[0]
    converted = await compression.compress(lambda: chat(8, system=None), "t")
    assert converted.summary_range == (0, 5)


def summarizer_free(compression: AgentCompression) -> bool:
    stats = compression.stats
    return (stats.summarizer_calls, stats.invalid_histories, stats.requests) == (0, 3, 3)
