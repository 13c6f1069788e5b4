"""The quality benchmark's harness (``benchmarks/quality.py``): its rule and its counting."""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from slimcache import SummaryContext
from slimcache.bench.datasets import BenchConversation

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quality() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quality", ROOT / "benchmarks" / "quality.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["quality"] = module
    spec.loader.exec_module(module)
    return module


def context(max_tokens: int, previous: str | None = None) -> SummaryContext:
    if previous is None:
        return SummaryContext("summarize", None, max_tokens, "", "t", 0, 0)
    return SummaryContext("extend", previous, max_tokens, "", "t", 0, 0)


def test_thinning_keeps_evenly_what_fits_and_salient_sentences_first(quality: ModuleType) -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    thin = quality.ThinningSummarizer("thin")
    out = thin([{"role": "user", "content": text}], context(60))
    kept = quality.sentences(out)
    assert math.ceil(len(out) / 4) <= 60
    numbers = [int(s.split()[2]) for s in kept]
    gaps = {b - a for a, b in itertools.pairwise(numbers)}
    assert len(kept) > 5
    assert max(gaps) - min(gaps) <= 1  # evenly spread
    assert thin([{"role": "user", "content": "Short."}], context(60)) == "Short."

    chat = "we talked. about things. My code is 4417. and more. then Lisbon came up. ok."
    salient = quality.ThinningSummarizer("salient")
    assert salient([{"role": "user", "content": chat * 3}], context(12)).count("4417") >= 1
    previous = "The code is 4417."
    extended = salient([{"role": "user", "content": "nothing much. at all."}], context(5, previous))
    assert "4417" in extended


async def test_facts_are_counted_in_the_summary_and_the_window(quality: ModuleType) -> None:
    messages = [{"role": "system", "content": "Be brief."}]
    for i in range(40):
        messages.append({"role": ("user", "assistant")[i % 2], "content": f"turn {i}."})
    case = quality.planted(BenchConversation(id="c", messages=messages), seed=1)
    assert case is not None
    assert len(case.facts) == 10
    settings = quality.Settings(threshold=20, keep=10, summary_tokens=2000)
    ample = quality.ThinningSummarizer("thin")
    for method in quality.METHODS:  # with room for everything, every method keeps every fact
        if method == "replace":  # but the one that keeps only the newest messages' summary
            continue
        outcome = await quality.run_method(ample, method, case, settings)
        assert outcome.failure is None
        assert (outcome.in_summary, outcome.in_window_only) == (10, 0)
        assert outcome.calls > 0
    replaced = await quality.run_method(ample, "replace", case, settings)
    assert (replaced.in_summary, replaced.in_window_only) == (5, 0)
    tight = quality.Settings(threshold=20, keep=10, summary_tokens=20)
    thinned = await quality.run_method(ample, "extend", case, tight)
    assert thinned.in_summary < 10
