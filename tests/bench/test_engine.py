"""The benchmark engine: replay figures checked against an independent reference."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from slimcache import (
    DEFAULT_SUMMARIZE_PROMPT,
    ConfigurationError,
    MemoryStore,
    Store,
    SummaryContext,
    approx_tokens,
)
from slimcache._install import pip_install
from slimcache.bench.datasets import Dataset, request_lengths
from slimcache.bench.engine import MODES, check_modes, redact_url, run_bench, thread_id_for
from slimcache.bench.results import BenchSettings
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.messages import count_message_tokens
from tests.bench.synthetic import SMALL, dataset, replay


@dataclass
class Reference:
    """What a stateful sliding window and a from-scratch summarizer would do."""

    calls: int = 0
    floor: int = 0
    naive_calls: int = 0
    naive_message_tokens: int = 0


def reference(data: Dataset, settings: BenchSettings) -> Reference:
    ref = Reference()
    for conv in data.conversations:
        tokens = [count_message_tokens(m) for m in conv.messages]
        boundary = 1  # first message of the verbatim window
        for length in (i + 1 for i, m in enumerate(conv.messages) if m["role"] == "user"):
            if length - boundary > settings.threshold:
                boundary = length - settings.keep
                ref.calls += 1
            if length - 1 > settings.threshold:
                ref.naive_calls += 1
                ref.naive_message_tokens += sum(tokens[1 : length - settings.keep])
        ref.floor += sum(tokens[1:boundary])
    return ref


async def test_figures_match_the_reference() -> None:
    data = dataset(40, 25, 33)
    report = await replay(data, MemoryStore())
    ref = reference(data, SMALL)
    naive, memory, store = (report.modes[k] for k in ("naive", "memory", "store"))
    prompt = approx_tokens(DEFAULT_SUMMARIZE_PROMPT.replace("{max_tokens}", "60"))

    assert list(report.modes) == ["naive", "memory", "store", "second_pass"]
    assert report.requests == sum(len(request_lengths(c.messages)) for c in data.conversations)
    assert naive.summarizer_calls == naive.uncached == ref.naive_calls
    assert naive.message_tokens == ref.naive_message_tokens
    assert naive.input_tokens == ref.naive_message_tokens + naive.summarizer_calls * prompt
    assert naive.store_round_trips == 0

    # Every message that left the window reaches the summarizer exactly once.
    assert report.floor_tokens == ref.floor
    assert memory.message_tokens == store.message_tokens == ref.floor
    assert memory.summarizer_calls == store.summarizer_calls == ref.calls
    assert memory.misses == store.misses == len(data.conversations)
    assert memory.extensions == ref.calls - len(data.conversations)
    assert (memory.input_tokens, memory.cache_hits) == (store.input_tokens, store.cache_hits)
    # The timing proxy keeps every ability of the store (leases, compare-and-set), so the
    # stateless replay makes the same store calls as the long-lived compressor.
    assert store.store_round_trips == memory.store_round_trips
    assert naive.summarizer_calls > memory.summarizer_calls
    assert naive.input_tokens > 3 * memory.input_tokens
    assert report.ratio("memory", "summarizer_calls") == ref.calls / ref.naive_calls

    assert len(naive.per_request_input_tokens) == report.requests
    assert sum(naive.per_request_input_tokens) == naive.input_tokens
    assert sum(store.per_request_input_tokens) == store.input_tokens
    assert memory.latency_median_ms is None
    assert store.latency_median_ms is not None
    assert store.latency_p99_ms is not None
    assert store.latency_p99_ms >= store.latency_median_ms


async def test_only_the_chosen_modes_run_in_their_order() -> None:
    data = dataset(40, 25, 33)
    full = await replay(data, MemoryStore())
    chosen = await replay(data, MemoryStore(), modes=["second_pass", "store"])
    assert list(chosen.modes) == ["store", "second_pass"]
    # The floor comes from the store mode when the memory mode does not run.
    assert chosen.floor_tokens == full.floor_tokens == reference(data, SMALL).floor
    store = chosen.modes["store"]
    assert store.summarizer_calls == full.modes["store"].summarizer_calls
    assert store.message_tokens == chosen.floor_tokens
    assert chosen.modes["second_pass"].summarizer_calls == 0
    assert chosen.ratio("store", "summarizer_calls") is None  # no naive to compare with
    assert chosen.requests == full.requests
    naive_only = await replay(data, MemoryStore(), modes=["naive"])
    assert list(naive_only.modes) == ["naive"]
    assert naive_only.floor_tokens == 0  # nothing cached, so nothing left the window for good


def test_check_modes() -> None:
    assert check_modes(None) == MODES
    assert check_modes(["second_pass", "naive", "naive"]) == ("naive", "second_pass")
    with pytest.raises(ConfigurationError, match="unknown mode 'fast': the modes are naive"):
        check_modes(["store", "fast"])
    with pytest.raises(ConfigurationError, match="at least one mode"):
        check_modes([])


async def test_summarizer_calls_are_timed() -> None:
    report = await replay(dataset(30, 22), MemoryStore())
    for key in ("naive", "memory", "store"):
        mode = report.modes[key]
        assert mode.call_samples == mode.summarizer_calls > 0
        assert mode.call_median_ms is not None
        assert mode.call_median_ms > 0
    second = report.modes["second_pass"]
    assert (second.call_samples, second.call_median_ms) == (0, None)


async def test_second_pass_is_served_from_the_store() -> None:
    data = dataset(30, 22)
    report = await replay(data, MemoryStore())
    memory, second = report.modes["memory"], report.modes["second_pass"]
    # Every request that had a summary the first time is a hit, with no summarizer call.
    assert second.cache_hits == memory.cache_hits + memory.extensions + memory.misses > 0
    assert (second.summarizer_calls, second.input_tokens, second.misses) == (0, 0, 0)
    assert second.store_writes == second.store_deletes == 0
    # Each hit is timed beside one plain read of its thread's index.
    assert second.hit_samples == second.cache_hits
    assert second.hit_median_ms is not None
    assert second.hit_median_ms > 0
    assert second.index_get_median_ms is not None
    assert second.index_get_median_ms > 0
    for key in ("naive", "memory", "store"):
        mode = report.modes[key]
        assert (mode.hit_median_ms, mode.index_get_median_ms, mode.hit_samples) == (None, None, 0)


async def test_rerun_on_the_same_store_finds_its_threads(
    sqlite_store_factory: Callable[..., Awaitable[Store]],
) -> None:
    store = await sqlite_store_factory()
    data = dataset(30, 4, 26)  # the 4-turn conversation never gets a summary
    first = await replay(data, store, url="sqlite+aiosqlite:///x.db")
    assert first.warm_threads == 0
    assert first.modes["store"].misses == 2
    assert first.modes["store"].latency_median_ms is not None

    second = await replay(data, store, url="sqlite+aiosqlite:///x.db")
    assert second.thread_ids == first.thread_ids
    assert second.warm_threads == 2
    assert second.modes["store"].cache_hits > 0

    other = await replay(data, store, BenchSettings(threshold=7, keep=3, summary_tokens=60))
    assert set(other.thread_ids).isdisjoint(first.thread_ids)
    assert other.warm_threads == 0


def test_thread_ids_depend_on_data_settings_and_summarizer() -> None:
    data = dataset(10)
    conv = data.conversations[0]
    base = thread_id_for(data, conv, SMALL, "offline")
    assert base == thread_id_for(dataset(10), conv, SMALL, "offline")
    assert base.startswith("bench-synthetic-")
    assert base.endswith("-c0")
    assert base != thread_id_for(dataset(10, digest="d2"), conv, SMALL, "offline")
    assert base != thread_id_for(data, conv, BenchSettings(strategy="concat"), "offline")
    assert base != thread_id_for(data, conv, SMALL, "openai:m")


def test_redact_url() -> None:
    assert redact_url("redis://:secret@host:6379/0") == "redis://:***@host:6379/0"
    assert redact_url("postgresql+asyncpg://u:pw@h/db") == "postgresql+asyncpg://u:***@h/db"
    assert redact_url("sqlite+aiosqlite:///./x.db") == "sqlite+aiosqlite:///./x.db"


def test_engine_imports_without_the_extra() -> None:
    blocked = ("typer", "rich", "matplotlib", "chitchat_dataset")
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import slimcache.bench.engine, slimcache.bench.datasets, slimcache.bench.report\n"
        "import slimcache.recipes.maintenance, slimcache.cli.app, slimcache.cli.common\n"
        "try:\n"
        "    slimcache.bench.datasets.load_chitchat()\n"
        "except slimcache.MissingExtraError as exc:\n"
        "    print('missing:', exc)\n"
        "slimcache.cli.app.main(['bench'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "missing: the chitchat dataset is not installed" in done.stdout
    assert pip_install("bench") in done.stdout
    assert done.stderr.strip() == f"slimcache bench needs its extra: {pip_install('bench')}"


async def test_second_pass_counts_round_trips_of_hits_on_the_newest_and_older_histories() -> None:
    data = dataset(30, 22)
    report = await replay(data, MemoryStore())
    second = report.modes["second_pass"]
    # A replay asks for every earlier point of a thread again: most hits serve an older range.
    assert second.newest_hits + second.older_hits == second.hit_samples
    assert second.newest_hits > 0
    assert second.older_hits > second.newest_hits
    # The newest history is one read, the index; the process read every older range before.
    assert second.newest_hit_round_trips == second.newest_hits
    assert second.older_hit_round_trips == second.older_hits
    for key in ("naive", "memory", "store"):
        mode = report.modes[key]
        assert (mode.newest_hits, mode.older_hits) == (0, 0)


class FailsAfter:
    """A summarizer that summarizes ``calls`` times, then fails."""

    name = "fails-after"

    def __init__(self, calls: int) -> None:
        self.left = calls

    def __call__(self, messages: object, context: object) -> str:
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("the model went away")
        return "a summary"


@pytest.mark.parametrize("failing", ["naive", "store"])
async def test_a_failing_mode_keeps_what_it_measured_and_stops_the_run(failing: str) -> None:
    data = dataset(20, 14)
    calls_before = 0
    if failing == "store":  # naive and memory get through, then store fails on its second call
        whole = await replay(data, MemoryStore(), modes=["naive", "memory"])
        calls_before = sum(mode.summarizer_calls for mode in whole.modes.values())
    report = await run_bench(
        data,
        data.conversations,
        store=MemoryStore(),
        store_url="memory://",
        summarizer=FailsAfter(calls_before + 1),
        settings=SMALL,
    )
    failed = report.failed
    assert failed is not None
    assert failed.key == failing
    assert list(report.modes)[-1] == failing  # nothing ran after it
    assert "the model went away" in str(failed.failure)
    assert (failed.summarizer_calls, failed.summarizer_errors) == (2, 1)
    assert 0 < failed.replayed < failed.requests
    assert len(failed.per_request_input_tokens) == failed.replayed
    assert report.to_dict()["failed_mode"] == failing
    assert all(m.failure is None for m in report.modes.values() if m is not failed)


class Overshoots:
    """Writes ten times the budget, whatever it is asked (condense included)."""

    name = "overshoots"

    def __call__(self, messages: object, context: SummaryContext) -> str:
        return "A summary sentence that goes on. " * (context.max_tokens * 10 // 8)


class AlwaysCut:
    """Reports every reply cut at the budget and keeps it, as on_truncated='accept' does."""

    name = "always-cut"

    def __call__(self, messages: object, context: SummaryContext) -> str:
        context.report.truncated_replies += 2
        context.report.shorter_retries += 1
        context.report.truncated_accepted += 1
        return "a cut summary"


@pytest.mark.parametrize("summarizer", [Overshoots(), AlwaysCut()], ids=lambda s: s.name)
async def test_every_mode_runs_through_a_model_that_misbehaves(summarizer: Any) -> None:
    data = dataset(20, 14)
    report = await run_bench(
        data,
        data.conversations,
        store=MemoryStore(),
        store_url="memory://",
        summarizer=summarizer,
        settings=SMALL,
    )
    assert report.failed is None
    assert list(report.modes) == list(MODES)
    for mode in report.modes.values():
        assert mode.replayed == mode.requests
        if mode.key == "second_pass":
            continue
        if isinstance(summarizer, Overshoots):
            assert mode.cut_over_budget == mode.condensed_over_budget == mode.summarizer_calls // 2
        else:
            assert mode.truncated_accepted == mode.summarizer_calls > 0


async def test_the_default_strategy_is_the_compressors_and_makes_extends_calls() -> None:
    assert BenchSettings().strategy == DEFAULTS.strategy == "tree"
    data = dataset(40, 25, 33)
    tree = await replay(data, MemoryStore(), replace(SMALL, strategy="tree"))
    extend = await replay(data, MemoryStore(), SMALL)
    assert tree.modes["store"].summarizer_calls == extend.modes["store"].summarizer_calls
    # A merge may read its range's messages again: never fewer than the floor.
    assert tree.modes["store"].message_tokens > tree.floor_tokens == extend.floor_tokens
