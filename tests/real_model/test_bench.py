"""``slimcache bench --summarizer openai:MODEL`` against a real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.support import SMALL, invoke
from tests.real_model.conftest import RealModel
from tests.real_model.history import trip

pytestmark = pytest.mark.real_model


def test_the_bench_on_a_real_model(real_model: RealModel, tmp_path: Path) -> None:
    data = tmp_path / "trips.json"
    data.write_text(json.dumps([trip(14), trip(12)]), encoding="utf-8")
    out = tmp_path / "out.json"
    result = invoke(
        "bench",
        "--store",
        f"sqlite+aiosqlite:///{tmp_path / 'bench.db'}",
        "--dataset",
        str(data),
        "--summarizer",
        f"openai:{real_model.model}",
        "--modes",
        "slimcache,second-pass",
        "--json",
        str(out),
        *SMALL,
        env={"OPENAI_BASE_URL": real_model.base_url, "OPENAI_API_KEY": real_model.api_key},
    )
    assert result.exit_code == 0, result.stderr
    figures = json.loads(out.read_text())
    store, second = figures["modes"]["store"], figures["modes"]["second_pass"]
    assert store["summarizer_calls"] > 0
    assert store["call_samples"] == store["summarizer_calls"]
    # Every request the first pass summarized or served is served from the store.
    summarized = store["cache_hits"] + store["extensions"] + store["misses"]
    assert (second["summarizer_calls"], second["cache_hits"]) == (0, summarized)
    assert figures["failed_mode"] is None
