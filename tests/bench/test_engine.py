"""The benchmark engine: replay figures checked against an independent reference."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from slimcache import (
    DEFAULT_SUMMARIZE_PROMPT,
    ConfigurationError,
    InvalidInput,
    MemoryStore,
    Store,
    SummarizerError,
    SummaryContext,
    approx_tokens,
)
from slimcache.bench.datasets import (
    BenchConversation,
    Dataset,
    chitchat_conversations,
    load_file,
    request_lengths,
    select_conversations,
)
from slimcache.bench.engine import (
    BenchReport,
    BenchSettings,
    OfflineSummarizer,
    OpenAISummarizer,
    make_summarizer,
    redact_url,
    run_bench,
    thread_id_for,
    timed_store,
    write_plot,
)
from slimcache.messages.checks import count_message_tokens
from slimcache.stores import SupportsCompareAndSet, SupportsGetMany, SupportsSetIfAbsent
from tests.fakes import CountingStore

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SMALL = BenchSettings(threshold=6, keep=3, summary_tokens=60)


def conversation(turns: int, tag: str) -> list[dict[str, Any]]:
    """A system prompt and ``turns`` alternating user/assistant messages."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        words = " ".join(f"w{i}-{j}" for j in range(i % 7 + 3))
        messages.append({"role": role, "content": f"{tag} says {i}. {words}. And more."})
    return messages


def dataset(*turns: int, digest: str = "d1") -> Dataset:
    conversations = [
        BenchConversation(id=f"c{i}", messages=conversation(n, f"c{i}"))
        for i, n in enumerate(turns)
    ]
    return Dataset(name="synthetic", digest=digest, conversations=conversations)


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


async def replay(
    data: Dataset, store: Store, settings: BenchSettings = SMALL, url: str = "memory://"
) -> BenchReport:
    return await run_bench(
        data,
        data.conversations,
        store=store,
        store_url=url,
        summarizer=OfflineSummarizer(),
        settings=settings,
    )


# ---------------------------------------------------------------- the replay


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


async def test_plot_is_a_png(tmp_path: Path) -> None:
    report = await replay(dataset(30, 44), MemoryStore())
    target = tmp_path / "bench.png"
    write_plot(report, target)
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    assert target.stat().st_size > 10_000


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="keep"):
        BenchSettings(threshold=5, keep=5)
    with pytest.raises(ConfigurationError, match="strategy"):
        BenchSettings(strategy="custom")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="price_per_mtok"):
        BenchSettings(price_per_mtok=-1)
    with pytest.raises(ConfigurationError, match="threshold"):
        BenchSettings(threshold=0)


# ---------------------------------------------------------------- summarizers


def context(previous: str | None = None, max_tokens: int = 60) -> SummaryContext:
    if previous is None:
        return SummaryContext("summarize", None, max_tokens, "prompt", "t", 1, 2)
    return SummaryContext("extend", previous, max_tokens, "prompt", "t", 1, 2)


def test_offline_summarizer_is_extractive_and_capped() -> None:
    summarize = OfflineSummarizer()
    messages = [
        {"role": "user", "content": "Book a table for two. At eight, please!"},
        {"role": "assistant", "content": "Done?  Anything else"},
    ]
    first = summarize(messages, context())
    assert first == "- user: Book a table for two.\n- assistant: Done?"
    assert summarize(messages, context()) == first
    extended = summarize([{"role": "user", "content": "No."}], context(first))
    assert extended == first + "\n- user: No."
    many = [{"role": "user", "content": f"Sentence number {i} is here."} for i in range(200)]
    capped = summarize(many, context(max_tokens=50))
    assert approx_tokens(capped) <= 50
    assert capped.endswith("Sentence number 199 is here.")


def test_make_summarizer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_summarizer("offline"), OfflineSummarizer)
    with pytest.raises(ConfigurationError, match="offline"):
        make_summarizer("gpt")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        make_summarizer("openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    made = make_summarizer("openai:gpt-4o-mini")
    assert isinstance(made, OpenAISummarizer)
    assert (made.name, made.base_url) == ("openai:gpt-4o-mini", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="model"):
        make_summarizer("openai:")


@dataclass
class ChatServer:
    """A local OpenAI-compatible endpoint that records what it receives."""

    url: str
    key: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    recorded: list[dict[str, Any]] = []
    key = "test-key"

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {key}":
                return True
            self._reply(401, {"error": {"message": "bad key"}})
            return False

        def do_GET(self) -> None:
            if self._authorized():
                self._reply(200, {"data": [{"id": "tiny"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self._authorized():
                return
            recorded.append({"path": self.path, **body})
            text = f"summary of {len(body['messages'][1]['content'])} chars"
            self._reply(200, {"choices": [{"message": {"role": "assistant", "content": text}}]})

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ChatServer(f"http://127.0.0.1:{server.server_address[1]}/v1", key, recorded)
    finally:
        server.shutdown()
        server.server_close()


async def test_openai_summarizer_talks_to_an_endpoint(chat_server: ChatServer) -> None:
    summarizer = OpenAISummarizer("tiny", api_key=chat_server.key, base_url=chat_server.url)
    summarizer.preflight()
    data = dataset(20)
    report = await run_bench(
        data,
        data.conversations,
        store=MemoryStore(),
        store_url="memory://",
        summarizer=summarizer,
        settings=SMALL,
    )
    calls = sum(mode.summarizer_calls for mode in report.modes.values())
    assert calls == len(chat_server.requests) > 0
    first = chat_server.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["model"] == "tiny"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "c0 says 0." in first["messages"][1]["content"]
    assert report.summarizer == "openai:tiny"


def test_openai_preflight_fails_fast(chat_server: ChatServer) -> None:
    wrong_key = OpenAISummarizer("tiny", api_key="nope", base_url=chat_server.url)
    with pytest.raises(SummarizerError, match="HTTP 401"):
        wrong_key.preflight()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    dead = OpenAISummarizer("tiny", api_key="k", base_url=f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(SummarizerError, match="cannot reach"):
        dead.preflight(timeout=2.0)


# ---------------------------------------------------------------- the timing proxy


class GetManyOnly(CountingStore):
    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        return [self.data.get(k) for k in keys]


async def test_timed_store_shows_only_the_abilities_of_the_store() -> None:
    plain = timed_store(CountingStore())
    every = timed_store(MemoryStore())
    get_many_only = timed_store(GetManyOnly())
    assert not isinstance(plain, (SupportsSetIfAbsent, SupportsGetMany, SupportsCompareAndSet))
    assert isinstance(every, SupportsSetIfAbsent)
    assert isinstance(every, SupportsGetMany)
    assert isinstance(every, SupportsCompareAndSet)
    assert isinstance(get_many_only, SupportsGetMany)
    assert not isinstance(get_many_only, (SupportsSetIfAbsent, SupportsCompareAndSet))
    assert type(every) is type(timed_store(MemoryStore()))

    await every.set("k", "v")
    assert await every.get("k") == "v"
    assert isinstance(every, SupportsGetMany)
    assert await every.get_many(["k", "x"]) == ["v", None]
    assert isinstance(every, SupportsSetIfAbsent)
    assert not await every.set_if_absent("k", "w")
    assert isinstance(every, SupportsCompareAndSet)
    assert not await every.compare_and_set("k", "other", "w")
    assert await every.compare_and_set("k", "v", "w")
    assert not await every.compare_and_delete("k", "v")
    assert await every.compare_and_delete("k", "w")
    await every.delete("k")
    assert len(every.take_samples()) == 9
    assert every.take_samples() == []


def test_redact_url() -> None:
    assert redact_url("redis://:secret@host:6379/0") == "redis://:***@host:6379/0"
    assert redact_url("postgresql+asyncpg://u:pw@h/db") == "postgresql+asyncpg://u:***@h/db"
    assert redact_url("sqlite+aiosqlite:///./x.db") == "sqlite+aiosqlite:///./x.db"


# ---------------------------------------------------------------- datasets


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "shape",
    [
        lambda convs: convs,
        lambda convs: [{"id": f"x{i}", "messages": c} for i, c in enumerate(convs)],
        lambda convs: {"conversations": convs},
    ],
)
def test_json_shapes(tmp_path: Path, shape: Callable[[list[Any]], object]) -> None:
    convs = [conversation(4, "a"), conversation(6, "b")]
    loaded = load_file(write(tmp_path / "data.json", shape(convs)))
    assert [c.messages for c in loaded.conversations] == convs
    assert loaded.name == "data.json"


def test_single_conversation_and_jsonl(tmp_path: Path) -> None:
    one = conversation(5, "a")
    assert load_file(write(tmp_path / "one.json", one)).conversations[0].messages == one
    wrapped = load_file(write(tmp_path / "w.json", {"messages": one}))
    assert wrapped.conversations[0].messages == one
    lines = [json.dumps(conversation(3, "a")), "", json.dumps({"messages": conversation(2, "b")})]
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(lines), encoding="utf-8")
    loaded = load_file(jsonl)
    assert [c.id for c in loaded.conversations] == ["0", "1"]
    assert loaded.digest != load_file(write(tmp_path / "o.json", [conversation(3, "a")])).digest


def test_bad_files_are_named(tmp_path: Path) -> None:
    bad = [conversation(3, "a"), [{"role": "user", "content": "hi"}, {"role": "bot"}]]
    with pytest.raises(InvalidInput, match=r"data\.json: conversation 1, messages\[1\]: ") as info:
        load_file(write(tmp_path / "data.json", bad))
    assert info.value.index == 1
    with pytest.raises(ConfigurationError, match="not found"):
        load_file(tmp_path / "missing.json")
    (tmp_path / "broken.jsonl").write_text('[{"role": "user", "content": "x"}]\n{oops\n')
    with pytest.raises(ConfigurationError, match="line 2"):
        load_file(tmp_path / "broken.jsonl")
    with pytest.raises(ConfigurationError, match=r"\.json"):
        load_file(tmp_path / "data.csv")
    with pytest.raises(ConfigurationError, match="messages"):
        load_file(write(tmp_path / "shape.json", [{"turns": []}]))


def test_chitchat_turns_become_alternating_messages() -> None:
    raw = {
        "b": {
            "messages": [
                [{"text": "hi", "sender": "s1"}, {"text": "there", "sender": "s1"}],
                [{"text": "hello", "sender": "s2"}],
                [{"text": "bye", "sender": "s1"}],
            ]
        },
        "a": {"messages": [[{"text": "solo", "sender": "s9"}]]},
    }
    convs = chitchat_conversations(raw)
    assert [c.id for c in convs] == ["a", "b"]
    assert convs[1].messages[1:] == [
        {"role": "user", "content": "hi\nthere"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"},
    ]
    assert convs[1].messages[0]["role"] == "system"
    assert convs[1].turns == 3


def test_selection_is_deterministic() -> None:
    convs = [BenchConversation(f"c{i}", conversation(10 + i, "x")) for i in range(30)]
    picked = select_conversations(convs, count=5, min_messages=20, seed=1)
    assert len(picked) == 5
    assert all(c.turns >= 20 for c in picked)
    assert picked == select_conversations(convs, count=5, min_messages=20, seed=1)
    assert picked != select_conversations(convs, count=5, min_messages=20, seed=2)
    assert [c.id for c in picked] == sorted((c.id for c in picked), key=lambda s: int(s[1:]))
    assert len(select_conversations(convs, count=50, min_messages=35)) == 5
    with pytest.raises(ConfigurationError, match="min-messages"):
        select_conversations(convs, count=5, min_messages=100)
    with pytest.raises(ConfigurationError, match="positive"):
        select_conversations(convs, count=0)


def test_engine_imports_without_the_extra() -> None:
    blocked = ("typer", "rich", "matplotlib", "chitchat_dataset")
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import slimcache.bench.engine, slimcache.bench.datasets\n"
        "import slimcache.recipes.maintenance, slimcache.cli.app\n"
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
    assert "pip install 'slimcache[bench]'" in done.stdout
    assert done.stderr.strip() == "slimcache bench needs its extra: pip install 'slimcache[bench]'"
