"""The benchmark's outputs: the plot."""

from __future__ import annotations

from pathlib import Path

from slimcache import MemoryStore
from slimcache.bench.report import write_plot
from tests.bench.synthetic import dataset, replay

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def test_plot_is_a_png(tmp_path: Path) -> None:
    report = await replay(dataset(30, 44), MemoryStore())
    target = tmp_path / "bench.png"
    write_plot(report, target)
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    assert target.stat().st_size > 10_000
