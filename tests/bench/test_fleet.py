"""The fleet benchmark's check of what it was served, on the summaries each strategy makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fleet import LoggedSummarizer, covers
from slimcache import KeepMessages, MemoryStore, MessageThreshold, SummarizeCompressor
from slimcache.types import StrategyName
from tests.fakes import chat


@pytest.mark.parametrize("strategy", ["tree", "extend"])
async def test_every_summary_served_covers_the_range_it_claims(
    tmp_path: Path, strategy: StrategyName
) -> None:
    store = MemoryStore()
    summarizer = LoggedSummarizer(str(tmp_path / "calls.log"), delay=0)
    history = chat(120)
    served = 0
    parts = 0
    for length in range(2, 121, 2):
        compressor = SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(20),
            keep=KeepMessages(10),
            strategy=strategy,
        )
        result = await compressor.compress_detailed(history[:length], thread_id="t7")
        assert covers(result.summary, "t7", result.summary_range)
        if result.summary is not None and result.summary_range is not None:
            served += 1
            parts = max(parts, result.summary.count("\n\n") + 1)
            start, end = result.summary_range
            # Another thread's, or another range's, is not.
            assert not covers(result.summary, "t8", result.summary_range)
            assert not covers(result.summary, "t7", (start, end + 1))
            assert not covers(result.summary, "t7", (start + 1, end))
    assert served > 40
    assert parts == (1 if strategy == "extend" else 3)  # the tree serves several parts
    lines = (tmp_path / "calls.log").read_text().splitlines()
    assert lines
    assert all(line.startswith("t7 ") for line in lines)


def test_a_summary_with_a_gap_or_another_threads_part_does_not_cover() -> None:
    assert covers("t1:1-11|12-23\n\nt1:24-35", "t1", (1, 35))
    assert not covers("t1:1-11|13-23\n\nt1:24-35", "t1", (1, 35))
    assert not covers("t1:1-23\n\nt2:24-35", "t1", (1, 35))
    assert covers(None, "t1", None)
    assert not covers(None, "t1", (1, 35))
