"""Process-wide OpenTelemetry metrics and spans, read back through the SDK's in-memory reader
and span exporter after stateless servers (a compressor per request) replay conversations."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import slimcache.telemetry
from slimcache import (
    KeepMessages,
    MessageThreshold,
    Stats,
    StoreError,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.testing import StoreFactory
from tests.fakes import FailingStore, RecordingSummarizer, chat

THREAD = "customer-4711"


@dataclass
class Telemetry:
    """What the process reported, as the SDK collected it."""

    reader: InMemoryMetricReader
    spans: InMemorySpanExporter

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def total(self, name: str, **attributes: str) -> int:
        """The sum of a counter over the points that have ``attributes``."""
        return sum(
            point.value
            for point in self.points(name)
            if all(point.attributes.get(k) == v for k, v in attributes.items())
        )

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    slimcache.telemetry.instrument(
        meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracer_provider
    )
    try:
        yield Telemetry(reader, spans)
    finally:
        slimcache.telemetry.uninstrument()


def _add(total: Stats, stats: Stats) -> None:
    for name, value in vars(stats).items():
        setattr(total, name, getattr(total, name) + value)


async def _replay(summarizer: RecordingSummarizer, store: Any, turns: range) -> Stats:
    """A stateless server: a new compressor for each request of one growing conversation."""
    total = Stats()
    for turn in turns:
        compressor = SummarizeCompressor(
            summarizer, store, trigger=MessageThreshold(6), keep=KeepMessages(4)
        )
        await compressor.compress(chat(turn), thread_id=THREAD)
        _add(total, compressor.stats)
    return total


async def test_a_replay_is_counted_across_compressors(
    telemetry: Telemetry, sqlite_store_factory: StoreFactory
) -> None:
    store = await sqlite_store_factory()
    summarizer = RecordingSummarizer()
    first = await _replay(summarizer, store, range(4, 20))
    again = await _replay(summarizer, store, range(4, 20))  # the replay: served from the store
    total = Stats()
    _add(total, first)
    _add(total, again)

    assert again.cache_hits > 0
    assert again.summarizer_calls == 0
    assert telemetry.total("slimcache.compress.requests", **{"slimcache.outcome": "hit"}) == (
        total.cache_hits
    )
    assert telemetry.total("slimcache.compress.requests") == total.requests
    assert telemetry.total("slimcache.compress.tokens_saved") == total.tokens_saved > 0
    assert telemetry.total("slimcache.compress.naive_tokens") == total.naive_input_tokens
    assert telemetry.total("slimcache.summarizer.calls") == total.summarizer_calls
    tokens = {"slimcache.token.type": "input"}
    assert telemetry.total("slimcache.summarizer.tokens", **tokens) == (
        total.summarizer_input_tokens
    )
    output = {"slimcache.token.type": "output"}
    assert telemetry.total("slimcache.summarizer.tokens", **output) == (
        total.summarizer_output_tokens
    )

    latency = telemetry.points("slimcache.store.duration")
    assert {p.attributes["slimcache.store.type"] for p in latency} == {"SQLStore"}
    assert sum(p.count for p in latency) == total.store_round_trips
    assert all(p.sum > 0 for p in latency)
    assert telemetry.total("slimcache.store.calls") == total.store_round_trips
    compress = telemetry.points("slimcache.compress.duration")
    assert sum(p.count for p in compress) == total.requests


async def test_spans_carry_the_hashed_thread_never_its_id_or_text(
    telemetry: Telemetry, sqlite_store_factory: StoreFactory
) -> None:
    store = await sqlite_store_factory()
    summarizer = RecordingSummarizer()
    await _replay(summarizer, store, range(8, 10))

    hashed = slimcache.telemetry.thread_hash(THREAD)
    compress = telemetry.finished("slimcache.compress")
    summarize = telemetry.finished("slimcache.summarize")
    reads = telemetry.finished("slimcache.store.get")
    assert len(compress) == 2
    assert summarize
    assert reads
    for span in [*compress, *summarize, *reads]:
        assert span.attributes is not None
        assert span.attributes["slimcache.thread.hash"] == hashed
    # The store and summarizer spans are children of their compression's span.
    parents = {span.context.span_id for span in compress if span.context is not None}
    assert all(s.parent is not None and s.parent.span_id in parents for s in summarize + reads)
    texts = [str(m["content"]) for m in chat(9)]
    for span in telemetry.spans.get_finished_spans():
        shown = f"{span.name} {dict(span.attributes or {})}"
        assert THREAD not in shown
        assert not any(text in shown for text in texts)


async def test_store_and_summarizer_errors_are_counted_by_type(telemetry: Telemetry) -> None:
    failing = SummarizeCompressor(
        RecordingSummarizer(),
        FailingStore(fail_reads=True),
        trigger=MessageThreshold(6),
        keep=KeepMessages(4),
    )
    with pytest.raises(StoreError):
        await failing.compress(chat(10), thread_id=THREAD)
    store_errors = {"error.type": "ConnectionError"}
    assert telemetry.total("slimcache.store.calls", **store_errors) == 1
    errors = {"slimcache.outcome": "error", "error.type": "ConnectionError"}
    assert telemetry.total("slimcache.compress.requests", **errors) == 1

    summarizer = RecordingSummarizer(fail_with=TimeoutError("model down"))
    compressor = SummarizeCompressor(
        summarizer,
        trigger=MessageThreshold(6),
        keep=KeepMessages(4),
        on_summarizer_error="uncompressed",
    )
    result = await compressor.compress_detailed(chat(10), thread_id=THREAD)
    assert result.outcome == "passthrough"
    failed = {"slimcache.summarizer.task": "summarize", "error.type": "TimeoutError"}
    assert telemetry.total("slimcache.summarizer.calls", **failed) == 1
    passthrough = {"slimcache.outcome": "passthrough"}
    assert telemetry.total("slimcache.compress.requests", **passthrough) == 1


async def test_a_wait_for_another_workers_lease_is_counted(telemetry: Telemetry) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(messages: Any, context: SummaryContext) -> str:
        entered.set()
        await release.wait()
        return "summary"

    store = slimcache.open_store("memory://")
    first = SummarizeCompressor(slow, store, trigger=MessageThreshold(6), keep=KeepMessages(4))
    second = SummarizeCompressor(slow, store, trigger=MessageThreshold(6), keep=KeepMessages(4))
    holder = asyncio.create_task(first.compress(chat(10), thread_id=THREAD))
    await entered.wait()
    waiter = asyncio.create_task(second.compress(chat(10), thread_id=THREAD))
    while second.stats.lease_waits == 0:  # counted before the waiter first sleeps  # noqa: ASYNC110
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(holder, waiter)
    assert telemetry.total("slimcache.lease.waits") == 1


async def test_background_refreshes_and_stale_answers_are_told_apart(
    telemetry: Telemetry,
) -> None:
    import slimcache.background

    store = slimcache.open_store("memory://")
    failing = RecordingSummarizer(fail_with=RuntimeError("model down"))

    def compressor(summarizer: RecordingSummarizer) -> SummarizeCompressor:
        return SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(6),
            keep=KeepMessages(4),
            refresh="background",
            ceiling=MessageThreshold(12),
        )

    first = await compressor(failing).compress_detailed(chat(9), thread_id=THREAD)
    assert await slimcache.background.drain()
    second = await compressor(RecordingSummarizer()).compress_detailed(chat(10), thread_id=THREAD)
    assert await slimcache.background.drain()
    assert (first.outcome, second.outcome) == ("stale", "stale")

    def events(event: str) -> int:
        return telemetry.total("slimcache.refresh.events", **{"slimcache.refresh.event": event})

    assert (events("started"), events("failed"), events("finished")) == (2, 1, 1)
    stale = telemetry.points("slimcache.refresh.stale_messages")
    assert sum(p.count for p in stale) == 2
    assert sum(p.sum for p in stale) == first.stale_messages + second.stale_messages == 11
    assert telemetry.total("slimcache.compress.requests", **{"slimcache.outcome": "stale"}) == 2


async def test_uninstrument_stops_reporting(telemetry: Telemetry) -> None:
    compressor = SummarizeCompressor(
        RecordingSummarizer(), trigger=MessageThreshold(6), keep=KeepMessages(4)
    )
    await compressor.compress(chat(10), thread_id=THREAD)
    slimcache.telemetry.uninstrument()
    assert not slimcache.telemetry.instrumented()
    await compressor.compress(chat(10), thread_id=THREAD)
    assert telemetry.total("slimcache.compress.requests") == 1


_USE_A_COMPRESSOR = """
import asyncio, sys
import slimcache
from slimcache import KeepMessages, MessageThreshold, SummarizeCompressor, open_store

async def summarize(messages, context):
    return "summary"

async def main():
    compressor = SummarizeCompressor(
        summarize, open_store("memory://"), trigger=MessageThreshold(6), keep=KeepMessages(4)
    )
    history = [{"role": "user", "content": f"turn {i}"} for i in range(8)]
    for _ in range(2):
        await compressor.compress(history, thread_id="t")
    assert compressor.stats.cache_hits == 1

asyncio.run(main())
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_without_instrument_nothing_of_opentelemetry_is_imported() -> None:
    done = _run(
        _USE_A_COMPRESSOR
        + "\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_compressors_work_and_instrument_says_what_to_install() -> None:
    hide = """
    import sys

    class NoOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())
    """
    done = _run(
        textwrap.dedent(hide)
        + _USE_A_COMPRESSOR
        + textwrap.dedent("""
        import slimcache.telemetry
        try:
            slimcache.telemetry.instrument()
        except ImportError as exc:
            print(exc)
        """)
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip() == 'slimcache.telemetry needs its extra: pip install "slimcache[otel]"'
    )
