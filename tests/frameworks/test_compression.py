"""The integrations' shared compression: its counters, taken over every compressor it built."""

from __future__ import annotations

from slimcache import Stats
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
        refresh="background",
        ceiling=("fraction", 0.5),
    )
    compression = AgentCompression(RecordingSummarizer(), MemoryStore(), settings)
    await compression.compress(chat(20, system=None), "a", context_size=1_000_000)
    await compression.compress(chat(30, system=None), "b", context_size=2_000_000)
    assert drain(timeout=30)  # the background refreshes, on slimcache's loop
    stats = compression.stats
    assert (stats.stale_served, stats.stale_messages, stats.max_stale_messages) == (2, 42, 26)
