"""The benchmark's outputs: the table and its notes, the plot."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from slimcache import MemoryStore
from slimcache.bench.report import print_report, write_plot
from tests.bench.synthetic import SMALL, dataset, replay

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def test_plot_is_a_png(tmp_path: Path) -> None:
    report = await replay(dataset(30, 44), MemoryStore())
    target = tmp_path / "bench.png"
    write_plot(report, target)
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    assert target.stat().st_size > 10_000


async def test_report_table_has_every_row_and_the_floor() -> None:
    report = await replay(dataset(30, 44), MemoryStore())
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    for row in (
        "summarizer calls",
        "summarizer input tokens",
        "summarizer output tokens",
        "input-token cost @ $0.15/Mtok",
        "cache hits / extensions / misses",
        "invalidated summaries",
        "store round trips",
        "store latency median / p99",
        "cache hit / store.get median",
        "summarizer call median",
        "wall time",
    ):
        assert row in text
    assert "cut replies" not in text  # shown only when a reply was cut
    assert "store memory://: cold before this run" in text
    assert f"Floor: {report.floor_tokens:,} tokens" in text
    assert "(exactly the floor)" in text
    assert "in the second pass" in text
    assert "A summarizer call took " in text
    assert "x a cache hit." in text
    assert text.rstrip().endswith("the input tokens of every request, and only those.")
    assert "every request, retries included" not in text  # shown only when a call retried


async def test_report_and_plot_of_some_modes_only(tmp_path: Path) -> None:
    store = MemoryStore()
    report = await replay(dataset(30, 44), store, modes=["store", "second_pass"])
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "naive" not in text
    assert "(no store)" not in text
    assert "slimcache sent " in text
    assert "(exactly the floor)" in text
    again = await replay(dataset(30, 44), store, modes=["store"])
    console = Console(record=True, width=200)
    print_report(again, console)
    assert "made no summarizer call: every summary came from the store." in console.export_text()
    target = tmp_path / "store.png"
    write_plot(report, target)
    assert target.read_bytes().startswith(PNG_SIGNATURE)


async def test_a_tree_that_read_messages_again_says_how_many_times_the_floor() -> None:
    report = await replay(dataset(30, 44), MemoryStore(), replace(SMALL, strategy="tree"))
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    ratio = report.modes["memory"].message_tokens / report.floor_tokens
    assert ratio > 1
    assert f"({ratio:.2f}x the floor)" in text
