"""The benchmark's settings and figures: checked values, every figure in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimcache import ConfigurationError, MemoryStore
from slimcache.bench.results import BenchSettings
from tests.bench.synthetic import dataset, replay


async def test_report_json_has_every_figure(tmp_path: Path) -> None:
    report = await replay(dataset(30, 20), MemoryStore())
    data = json.loads(json.dumps(report.to_dict()))
    assert data["settings"]["threshold"] == 6
    assert data["settings"]["summarizer"] == "offline-extractive"
    assert data["floor_tokens"] == report.floor_tokens
    assert set(data["modes"]) == {"naive", "memory", "store", "second_pass"}
    memory = data["modes"]["memory"]
    for name in (
        "summarizer_calls",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "cache_hits",
        "extensions",
        "misses",
        "store_round_trips",
        "latency_median_ms",
        "hit_median_ms",
        "index_get_median_ms",
        "call_median_ms",
        "call_samples",
        "truncated_replies",
        "shorter_retries",
        "wall_seconds",
        "ratio_calls_vs_naive",
        "ratio_input_tokens_vs_naive",
    ):
        assert name in memory
    assert memory["cost_usd"] == pytest.approx(memory["input_tokens"] * 0.15 / 1e6)
    assert data["modes"]["naive"]["ratio_calls_vs_naive"] == 1.0
    assert data["modes"]["second_pass"]["hit_median_ms"] > 0
    assert data["modes"]["second_pass"]["index_get_median_ms"] > 0
    assert [t["conversation"] for t in data["threads"]] == ["c0", "c1"]


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="keep"):
        BenchSettings(threshold=5, keep=5)
    with pytest.raises(ConfigurationError, match="strategy"):
        BenchSettings(strategy="custom")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="price_per_mtok"):
        BenchSettings(price_per_mtok=-1)
    with pytest.raises(ConfigurationError, match="threshold"):
        BenchSettings(threshold=0)
