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
from opentelemetry.trace import SpanKind

import slimcache.telemetry
from slimcache import (
    ConfigurationError,
    KeepMessages,
    MessageThreshold,
    Stats,
    StoreError,
    SummarizeCompressor,
    Summarizer,
    SummaryContext,
)
from slimcache._install import pip_install
from slimcache.llm import OpenAISummarizer
from slimcache.pydantic_ai import PydanticAISummarizer
from slimcache.testing import StoreFactory
from tests.fakes import CountingStore, FailingStore, RecordingSummarizer, chat
from tests.servers.llm_server import LLMServer, prompt_tokens
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_server import RedisServer

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

    def tokens(self, kind: str) -> int:
        """The tokens ``gen_ai.client.token.usage`` recorded of ``kind`` (input, output)."""
        points = self.points("gen_ai.client.token.usage")
        return sum(p.sum for p in points if p.attributes["gen_ai.token.type"] == kind)

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


async def _replay(summarizer: Summarizer, store: Any, turns: range) -> Stats:
    """A stateless server: a new compressor for each request of one growing conversation."""
    total = Stats()
    for turn in turns:
        compressor = SummarizeCompressor(
            summarizer, store, trigger=MessageThreshold(6), keep=KeepMessages(4)
        )
        await compressor.compress(chat(turn), thread_id=THREAD)
        total.add(compressor.stats)
    return total


async def test_a_replay_is_counted_across_compressors(
    telemetry: Telemetry, sqlite_store_factory: StoreFactory
) -> None:
    store = await sqlite_store_factory()
    summarizer = RecordingSummarizer()
    first = await _replay(summarizer, store, range(4, 20))
    again = await _replay(summarizer, store, range(4, 20))  # the replay: served from the store
    total = Stats()
    total.add(first)
    total.add(again)

    assert again.cache_hits > 0
    assert again.summarizer_calls == 0
    assert telemetry.total("slimcache.compress.requests", **{"slimcache.outcome": "hit"}) == (
        total.cache_hits
    )
    assert telemetry.total("slimcache.compress.requests") == total.requests
    assert telemetry.total("slimcache.compress.tokens_saved") == total.tokens_saved > 0
    assert telemetry.total("slimcache.compress.naive_tokens") == total.naive_input_tokens
    # Each summarizer call: its duration, and the tokens it was sent and returned.
    calls = telemetry.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in calls) == total.summarizer_calls > 0
    assert telemetry.tokens("input") == total.summarizer_input_tokens
    assert telemetry.tokens("output") == total.summarizer_output_tokens
    for point in [*calls, *telemetry.points("gen_ai.client.token.usage")]:
        assert point.attributes["gen_ai.operation.name"] == "chat"
        # The fake names no model and no provider: slimcache's name, under which the tokens
        # are slimcache's count.
        assert "gen_ai.request.model" not in point.attributes
        assert point.attributes["gen_ai.provider.name"] == "slimcache"

    latency = telemetry.points("db.client.operation.duration")
    assert {p.attributes["db.system.name"] for p in latency} == {"sqlite"}
    assert {p.attributes["db.collection.name"] for p in latency} == {"slimcache_entries"}
    assert sum(p.count for p in latency) == total.store_round_trips
    assert all(p.sum > 0 for p in latency)
    assert not any("error.type" in p.attributes for p in latency)
    compress = telemetry.points("slimcache.compress.duration")
    assert sum(p.count for p in compress) == total.requests


def _store_points(telemetry: Telemetry) -> list[dict[str, Any]]:
    return [dict(p.attributes) for p in telemetry.points("db.client.operation.duration")]


def _store_span_names(telemetry: Telemetry) -> set[str]:
    return {
        span.name
        for span in telemetry.spans.get_finished_spans()
        if span.attributes is not None and "db.system.name" in span.attributes
    }


async def test_sqlite_and_postgresql_are_told_apart(
    telemetry: Telemetry,
    sqlite_store_factory: StoreFactory,
    postgres_store_factory: StoreFactory,
    postgres_server: PostgresServer,
) -> None:
    await _replay(RecordingSummarizer(), await sqlite_store_factory(), range(8, 10))
    table = "t_telemetry"
    await _replay(RecordingSummarizer(), await postgres_store_factory(table=table), range(8, 10))

    points = _store_points(telemetry)
    sqlite = [p for p in points if p["db.system.name"] == "sqlite"]
    postgres = [p for p in points if p["db.system.name"] == "postgresql"]
    assert sqlite
    assert postgres
    assert len(sqlite) + len(postgres) == len(points)
    assert {p["db.collection.name"] for p in sqlite} == {"slimcache_entries"}
    assert not any("server.address" in p or "db.namespace" in p for p in sqlite)  # a file
    for point in postgres:
        assert point["db.collection.name"] == table
        assert point["db.namespace"] == postgres_server.database
        assert point["server.address"] == postgres_server.host
        assert point["server.port"] == postgres_server.port
    assert {p["db.operation.name"] for p in points} == {"get", "BATCH"}  # writes go in one
    # Spans are named {db.operation.name} {db.collection.name}, as the conventions name them.
    names = _store_span_names(telemetry)
    assert {"get slimcache_entries", f"get {table}"} <= names
    assert all(name.endswith((" slimcache_entries", f" {table}")) for name in names)


async def test_a_redis_store_reports_its_server_and_database(
    telemetry: Telemetry, redis_store_factory: StoreFactory, redis_server: RedisServer
) -> None:
    await _replay(RecordingSummarizer(), await redis_store_factory(), range(8, 10))

    points = _store_points(telemetry)
    assert points
    for point in points:
        assert point["db.system.name"] == "redis"
        assert point["server.address"] == redis_server.host
        assert point["server.port"] == redis_server.port
        assert point["db.namespace"] == "0"
    assert "get 0" in _store_span_names(telemetry)  # no collection: the database index


async def test_the_memory_store_and_a_users_store_say_what_they_are(
    telemetry: Telemetry,
) -> None:
    await _replay(RecordingSummarizer(), slimcache.open_store("memory://"), range(8, 10))
    await _replay(RecordingSummarizer(), CountingStore(), range(8, 10))

    systems = {p["db.system.name"] for p in _store_points(telemetry)}
    assert systems == {"memory", "CountingStore"}
    assert "get" in _store_span_names(telemetry)  # no target: the operation alone


async def _replay_openai_and_pydantic_ai(llm_server: LLMServer) -> None:
    """A replay with slimcache's OpenAI summarizer, and one with a Pydantic AI model."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("the summary")])

    async with OpenAISummarizer(
        "tiny", base_url=llm_server.openai_base_url, api_key="test-key"
    ) as openai:
        await _replay(openai, slimcache.open_store("memory://"), range(8, 9))
    model = FunctionModel(reply, model_name="summarizing-function")
    await _replay(PydanticAISummarizer(model), slimcache.open_store("memory://"), range(8, 9))


def _used(span: ReadableSpan, kind: str) -> int:
    """The span's ``gen_ai.usage.{kind}_tokens``."""
    value = (span.attributes or {})[f"gen_ai.usage.{kind}_tokens"]
    assert isinstance(value, int)
    return value


async def test_summarizer_calls_name_the_model_and_provider_they_reach(
    telemetry: Telemetry, llm_server: LLMServer
) -> None:
    await _replay_openai_and_pydantic_ai(llm_server)

    calls = telemetry.points("gen_ai.client.operation.duration")
    told = {
        (p.attributes["gen_ai.provider.name"], p.attributes["gen_ai.request.model"]) for p in calls
    }
    assert told == {("openai", "tiny"), ("function", "summarizing-function")}
    usage = telemetry.points("gen_ai.client.token.usage")
    assert {p.attributes["gen_ai.request.model"] for p in usage} == {"tiny", "summarizing-function"}
    assert {p.attributes["gen_ai.token.type"] for p in usage} == {"input", "output"}
    spans = [*telemetry.finished("chat tiny"), *telemetry.finished("chat summarizing-function")]
    assert {(s.attributes or {}).get("gen_ai.request.model") for s in spans} == {
        "tiny",
        "summarizing-function",
    }
    # The tokens reported are the provider's usage: the server's and Pydantic AI's own counts.
    for span in spans:
        attributes = span.attributes or {}
        assert span.kind == SpanKind.CLIENT
        assert attributes["gen_ai.operation.name"] == "chat"
        assert _used(span, "input") > 0
        assert _used(span, "output") > 0
        assert "slimcache.summarizer.input_tokens" in attributes  # slimcache's count, apart


async def test_every_request_a_summarizer_call_sent_is_counted(
    telemetry: Telemetry, llm_server: LLMServer
) -> None:
    # A reply cut at the budget, then a shorter one: two requests for one call.
    def shorter_when_asked(path: str, body: dict[str, Any]) -> str:
        asked = "Write a shorter one" in body["messages"][0]["content"]
        return "Short." if asked else "A summary that goes on and on. " * 200

    llm_server.text = shorter_when_asked
    async with OpenAISummarizer(
        "tiny", base_url=llm_server.openai_base_url, api_key="test-key"
    ) as openai:
        total = await _replay(openai, slimcache.open_store("memory://"), range(8, 14))
    sent = len(llm_server.bodies())
    assert total.summarizer_requests == 2 * total.summarizer_calls == sent > 2
    assert telemetry.total("slimcache.summarizer.requests") == sent
    # The token metric is the provider's usage, every request's: what the server counted.
    posts = [r for r in llm_server.requests if r.method == "POST"]
    assert telemetry.tokens("input") == sum(prompt_tokens(r.path, r.body) for r in posts)
    spans = telemetry.finished("slimcache.compress")
    told = [(s.attributes or {}).get("slimcache.summarizer.requests", 0) for s in spans]
    assert sum(int(str(n)) for n in told) == sent


async def test_langchain_and_agents_sdk_models_name_their_provider(
    telemetry: Telemetry, llm_server: LLMServer
) -> None:
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from langchain_openai import ChatOpenAI
    from openai import AsyncOpenAI
    from pydantic import SecretStr

    from slimcache.langchain import LangChainSummarizer
    from slimcache.openai_agents import AgentsSummarizer

    chat_model = ChatOpenAI(
        model="tiny", base_url=llm_server.openai_base_url, api_key=SecretStr("test-key")
    )
    await _replay(
        LangChainSummarizer(chat_model.with_retry()), slimcache.open_store("memory://"), range(8, 9)
    )
    client = AsyncOpenAI(base_url=llm_server.openai_base_url, api_key="test-key")
    agents_model = OpenAIChatCompletionsModel(model="tiny-agents", openai_client=client)
    await _replay(AgentsSummarizer(agents_model), slimcache.open_store("memory://"), range(8, 9))
    await client.close()

    calls = telemetry.points("gen_ai.client.operation.duration")
    told = {
        (p.attributes["gen_ai.provider.name"], p.attributes["gen_ai.request.model"]) for p in calls
    }
    assert told == {("openai", "tiny"), ("openai", "tiny-agents")}
    # Both have the usage the server reported: it is what the token metric reports.
    usage = telemetry.points("gen_ai.client.token.usage")
    assert {p.attributes["gen_ai.request.model"] for p in usage} == {"tiny", "tiny-agents"}
    assert all(p.attributes["gen_ai.provider.name"] == "openai" for p in usage)
    spans = [*telemetry.finished("chat tiny"), *telemetry.finished("chat tiny-agents")]
    assert len(spans) == 2
    assert all(_used(span, "input") > 0 for span in spans)


def _instrumented(**options: Any) -> Telemetry:
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    slimcache.telemetry.instrument(
        meter_provider=MeterProvider(metric_readers=[reader]),
        tracer_provider=tracer_provider,
        **options,
    )
    return Telemetry(reader, spans)


def _genai_points(telemetry: Telemetry) -> list[Any]:
    return [
        *telemetry.points("gen_ai.client.operation.duration"),
        *telemetry.points("gen_ai.client.token.usage"),
    ]


async def test_a_plain_function_is_under_the_provider_given_and_its_count_no_usage() -> None:
    try:
        telemetry = _instrumented(provider_name="aws.bedrock")
        stats = await _replay(RecordingSummarizer(), slimcache.open_store("memory://"), range(8, 9))
    finally:
        slimcache.telemetry.uninstrument()
    calls = telemetry.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in calls) == stats.summarizer_calls > 0
    assert {p.attributes["gen_ai.provider.name"] for p in calls} == {"aws.bedrock"}
    # slimcache's count is no usage of that provider: not reported as if it were.
    assert telemetry.points("gen_ai.client.token.usage") == []
    [span] = telemetry.finished("chat")
    attributes = span.attributes or {}
    assert "gen_ai.usage.input_tokens" not in attributes
    assert attributes["slimcache.summarizer.input_tokens"] == stats.summarizer_input_tokens


async def test_the_count_is_reported_as_usage_when_asked_for() -> None:
    try:
        telemetry = _instrumented(provider_name="aws.bedrock", estimated_usage=True)
        stats = await _replay(RecordingSummarizer(), slimcache.open_store("memory://"), range(8, 9))
    finally:
        slimcache.telemetry.uninstrument()
    assert telemetry.tokens("input") == stats.summarizer_input_tokens > 0
    assert telemetry.tokens("output") == stats.summarizer_output_tokens
    [span] = telemetry.finished("chat")
    assert _used(span, "input") == stats.summarizer_input_tokens


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"provider_name": ""}, "provider_name must be a non-empty string"),
        ({"provider_name": 3}, "provider_name must be a non-empty string"),
        ({"estimated_usage": "yes"}, "estimated_usage must be True or False"),
    ],
)
def test_bad_instrument_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        slimcache.telemetry.instrument(**options)
    assert not slimcache.telemetry.instrumented()


async def test_every_genai_point_names_its_provider_and_the_span_its_operation(
    telemetry: Telemetry, llm_server: LLMServer
) -> None:
    await _replay_openai_and_pydantic_ai(llm_server)
    await _replay(RecordingSummarizer(), slimcache.open_store("memory://"), range(8, 9))

    points = _genai_points(telemetry)
    assert points
    assert {p.attributes["gen_ai.provider.name"] for p in points} == {
        "openai",
        "function",
        "slimcache",
    }
    spans = [
        span
        for span in telemetry.spans.get_finished_spans()
        if (span.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]
    assert {span.name for span in spans} == {"chat tiny", "chat summarizing-function", "chat"}
    for span in spans:
        attributes = span.attributes or {}
        assert span.kind == SpanKind.CLIENT
        model_name = attributes.get("gen_ai.request.model")
        assert span.name == ("chat" if model_name is None else f"chat {model_name}")
        assert attributes["gen_ai.provider.name"]
        assert _used(span, "input") >= 0
        assert _used(span, "output") >= 0


async def test_the_scope_has_slimcaches_version_and_histograms_the_advised_buckets(
    telemetry: Telemetry,
) -> None:
    await _replay(RecordingSummarizer(), slimcache.open_store("memory://"), range(8, 9))

    data = telemetry.reader.get_metrics_data()
    assert data is not None
    scopes = [scope for resource in data.resource_metrics for scope in resource.scope_metrics]
    assert [(s.scope.name, s.scope.version, s.scope.schema_url) for s in scopes] == [
        ("slimcache", slimcache.__version__, slimcache.telemetry.SCHEMA_URL)
    ]
    assert slimcache.telemetry.SCHEMA_URL.startswith("https://opentelemetry.io/schemas/1.")
    spans = telemetry.spans.get_finished_spans()
    assert spans
    span_scopes = {span.instrumentation_scope for span in spans}
    assert {(s.name, s.version, s.schema_url) for s in span_scopes if s is not None} == {
        ("slimcache", slimcache.__version__, slimcache.telemetry.SCHEMA_URL)
    }
    assert None not in span_scopes
    advised = {
        "gen_ai.client.token.usage": [4**power for power in range(14)],
        "gen_ai.client.operation.duration": [0.01 * 2**power for power in range(14)],
        "db.client.operation.duration": [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
    }
    for name, bounds in advised.items():
        [point, *_] = telemetry.points(name)
        assert list(point.explicit_bounds) == pytest.approx(bounds)


async def test_spans_carry_the_hashed_thread_never_its_id_or_text(
    telemetry: Telemetry, sqlite_store_factory: StoreFactory
) -> None:
    store = await sqlite_store_factory()
    summarizer = RecordingSummarizer()
    await _replay(summarizer, store, range(8, 10))

    hashed = slimcache.telemetry.thread_hash(THREAD)
    compress = telemetry.finished("slimcache.compress")
    summarize = telemetry.finished("chat")
    reads = telemetry.finished("get slimcache_entries")
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
    [failed_read] = telemetry.points("db.client.operation.duration")
    assert failed_read.count == 1
    assert failed_read.attributes == {
        "db.system.name": "FailingStore",  # a store that does not say: its class
        "db.operation.name": "get",
        "error.type": "ConnectionError",
    }
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
    [failed_call] = telemetry.points("gen_ai.client.operation.duration")
    assert failed_call.count == 1
    assert failed_call.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "slimcache",
        "slimcache.summarizer.task": "summarize",
        "error.type": "TimeoutError",
    }
    assert telemetry.points("gen_ai.client.token.usage") == []  # no reply, no usage
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
    assert done.stdout.strip() == f"slimcache.telemetry needs its extra: {pip_install('otel')}"


async def test_a_summarizers_breaker_opening_refusing_and_closing_is_counted(
    telemetry: Telemetry,
) -> None:
    from slimcache.core.breaker import cool_downs_over

    summarizer = RecordingSummarizer(fail_with=RuntimeError("model down"))
    store = slimcache.open_store("memory://")

    async def turn(messages: int) -> None:
        compressor = SummarizeCompressor(
            summarizer,
            store,
            trigger=MessageThreshold(6),
            keep=KeepMessages(4),
            on_summarizer_error="uncompressed",
        )
        await compressor.compress(chat(messages), thread_id=THREAD)

    for messages in range(8, 12):
        await turn(messages)

    def events(event: str) -> int:
        return telemetry.total("slimcache.summarizer.breaker", **{"slimcache.breaker.event": event})

    assert (events("opened"), events("refused"), events("closed")) == (1, 2, 0)
    summarizer.fail_with = None
    cool_downs_over()
    await turn(12)
    assert (events("opened"), events("refused"), events("closed")) == (1, 2, 1)
