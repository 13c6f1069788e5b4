"""slimcache.sync: the front doors from synchronous code, on every store, from many threads."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from slimcache_redis import RedisStore

from slimcache import (
    ConversationWindowMemory,
    KeepMessages,
    MemoryStore,
    Message,
    MessageThreshold,
    SlidingWindow,
    Store,
    StoreError,
    SummarizeCompressor,
    SummaryContext,
    cached_summarizer,
    clear_thread,
)
from slimcache.stores import ThreadKeys
from slimcache.sync import Runner, default_runner, drain, run
from tests.fakes import RecordingSummarizer, chat
from tests.servers.redis_server import RedisServer
from tests.servers.sync_stores import SYNC_STORE_NAMES

ROOT = Path(__file__).resolve().parent.parent
THREADS = 8

StoreMaker = Callable[[], Store]


@pytest.fixture(params=SYNC_STORE_NAMES)
def sync_store(
    request: pytest.FixtureRequest, open_sync_store: Callable[[str], Store]
) -> StoreMaker:
    """``make()``: a store of the parameter's kind, opened and used from sync code only."""
    return lambda: open_sync_store(request.param)


class GatedSummarizer(RecordingSummarizer):
    """Records calls; the first call waits until every caller has handed its request over.

    So the requests of all threads are in flight while the first one summarizes, and single
    flight is what keeps the others from summarizing too (not a lucky ordering).
    """

    def __init__(self, callers: int) -> None:
        super().__init__()
        self.callers = callers
        self.handed_over = 0
        self.lock = threading.Lock()

    def hand_over(self) -> None:
        with self.lock:
            self.handed_over += 1

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        for _ in range(500):
            with self.lock:
                if self.handed_over >= self.callers:
                    break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # let the loop start every request handed over
        return await super().__call__(messages, context)


def in_threads(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Run ``call(i)`` in ``count`` threads released at once; return results or errors."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


# ---------------------------------------------------------------------- the front doors


def test_requests_after_the_first_still_work(sync_store: StoreMaker) -> None:
    # asyncio.run per request failed on the second one with "Event loop is closed" on Redis.
    summarizer = RecordingSummarizer()
    compressor = SummarizeCompressor(
        summarizer,
        sync_store(),
        trigger=MessageThreshold(6),
        keep=KeepMessages(4),
        strategy="extend",
    )
    history = chat(10)
    first = run(compressor.compress(history, thread_id="chat-42"))
    again = [run(compressor.compress(history, thread_id="chat-42")) for _ in range(2)]
    assert again == [first, first]
    assert first[1]["content"].endswith("summarize[1-6]")
    assert len(summarizer.calls) == 1
    assert compressor.stats.cache_hits == 2
    # From another thread too, and with a longer history: extended with only the new ones.
    longer = chat(14)
    extended = in_threads(1, lambda _: run(compressor.compress(longer, thread_id="chat-42")))[0]
    assert extended[1]["content"].endswith("extend[7-10]")
    assert [m["content"] for m in summarizer.calls[1].messages] == [
        m["content"] for m in longer[7:11]
    ]


def test_a_store_used_from_a_closed_loop_says_to_use_sync_run(redis_server: RedisServer) -> None:
    # The workaround that comes to mind: asyncio.run on each request, with one store. Redis's
    # connections stay with the loop that opened them (the SQL stores' do not).
    store = RedisStore.from_url(redis_server.url, prefix="closed-loop:")
    compressor = SummarizeCompressor(
        RecordingSummarizer(), store, trigger=MessageThreshold(6), keep=KeepMessages(4)
    )

    async def handle(*, last: bool = False) -> None:
        try:
            await compressor.compress(chat(10), thread_id="chat-42")
        finally:
            if last:
                await store.aclose()

    asyncio.run(handle())
    with pytest.raises(StoreError) as caught:
        asyncio.run(handle(last=True))  # the connection is the first loop's, now closed
    assert str(caught.value).endswith(
        "from synchronous code, call slimcache through slimcache.sync.run, which keeps one "
        "loop for the process"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)


class ClosesCounted(MemoryStore):
    """A memory store that counts its aclose calls, and on which loop they ran."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_on: list[int] = []  # the loops' ids

    async def aclose(self) -> None:
        self.closed_on.append(id(asyncio.get_running_loop()))
        await super().aclose()


def test_a_runner_closes_the_stores_given_it_before_its_loop_goes(
    redis_server: RedisServer,
) -> None:
    runner = Runner()
    redis = RedisStore.from_url(redis_server.url, prefix="closed-with:")
    runner.run(redis.set("key", "value"))  # a connection on the runner's loop
    kept, closed_first = ClosesCounted(), ClosesCounted()
    loop = runner.run(_running_loop())
    for store in (redis, kept, closed_first):
        runner.close_with(store)
    runner.run(closed_first.aclose())  # closed by its owner, which takes its request back
    runner.forget(closed_first)
    runner.close()
    assert redis.closed
    assert kept.closed_on == [loop]
    assert closed_first.closed_on == [loop]  # once, by its owner


def test_eight_threads_on_one_thread_id_summarize_each_range_once(sync_store: StoreMaker) -> None:
    summarizer = GatedSummarizer(THREADS)
    compressor = SummarizeCompressor(
        summarizer,
        sync_store(),
        trigger=MessageThreshold(6),
        keep=KeepMessages(4),
        strategy="extend",
    )

    def request(history: list[dict[str, Any]]) -> Callable[[int], Any]:
        def call(_: int) -> Any:
            # run() is submit() and a wait: the request is handed over once it is on the loop.
            pending = default_runner().submit(compressor.compress(history, thread_id="shared"))
            summarizer.hand_over()
            return pending.result()

        return call

    first = in_threads(THREADS, request(chat(10)))
    assert [call.context.task for call in summarizer.calls] == ["summarize"]
    assert all(result == first[0] for result in first), first
    assert first[0][1]["content"].endswith("summarize[1-6]")

    summarizer.handed_over = 0
    second = in_threads(THREADS, request(chat(14)))
    assert [call.context.task for call in summarizer.calls] == ["summarize", "extend"]
    assert all(result == second[0] for result in second), second
    assert compressor.stats.cache_hits == 2 * (THREADS - 1)


def test_window_memory_sliding_window_cached_summarizer_and_clear(
    sync_store: StoreMaker,
) -> None:
    store = sync_store()
    memory = ConversationWindowMemory(store, 3)
    for message in chat(5, system=None):
        run(memory.append("session", message))
    assert [m["content"] for m in run(memory.load("session"))] == [
        m["content"] for m in chat(5, system=None)[2:]
    ]

    window = SlidingWindow("slide", 4, RecordingSummarizer(), store, batch=2)
    run(window.push_many(chat(6, system=None)))
    assert run(window.get_messages())[0]["content"].endswith("summarize[0-1]")

    calls: list[int] = []

    @cached_summarizer(store)
    def summarize(messages: list[dict[str, Any]]) -> str:
        calls.append(len(messages))
        return f"{len(messages)} messages"

    assert run(summarize(chat(4), thread_id="s")) == "5 messages"
    assert run(summarize(chat(4), thread_id="s")) == "5 messages"
    assert calls == [5]

    run(clear_thread(store, "session"))
    assert run(memory.load("session")) == []


# ---------------------------------------------------------------------- the runner


def test_errors_come_back_as_raised() -> None:
    async def fails() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        run(fails())


def test_run_refuses_what_it_cannot_run() -> None:
    compressor = SummarizeCompressor(RecordingSummarizer())
    with pytest.raises(TypeError, match="call it first"):
        run(compressor.compress)  # type: ignore[arg-type]

    async def inner() -> int:
        return 1

    async def outer() -> int:
        return run(inner())

    with pytest.raises(RuntimeError, match="await the call instead"):
        run(outer())


def test_the_callers_context_travels_with_the_call() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")

    async def read() -> str:
        return request_id.get("unset")

    def in_request(i: int) -> str:
        request_id.set(f"request {i}")
        return run(read())

    assert in_threads(4, in_request) == [f"request {i}" for i in range(4)]


def test_a_thread_with_a_running_loop_may_call_it() -> None:
    # A notebook or an async framework calling sync code: it blocks, but it works.
    async def five() -> int:
        return 5

    async def from_a_loop() -> int:
        return run(five())

    assert asyncio.run(from_a_loop()) == 5


def test_a_runner_closes_with_its_block_and_cancels_what_runs() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with Runner(name="test-runner") as runner:
        assert runner.run(asyncio.sleep(0, "ready")) == "ready"
        pending = runner.submit(forever())
        started.wait()
        assert "running" in repr(runner)
    assert cancelled.is_set()
    assert pending.cancelled() or isinstance(pending.exception(), BaseException)
    assert runner.closed
    with pytest.raises(RuntimeError, match="closed"):
        runner.run(asyncio.sleep(0))
    runner.close()  # again: nothing happens


def test_background_refreshes_go_on_after_run_returns_and_drain_waits_for_them() -> None:
    release = threading.Event()
    summarizer = RecordingSummarizer()

    async def held(messages: Sequence[Message], context: SummaryContext) -> str:
        await asyncio.to_thread(release.wait)
        return await summarizer(messages, context)

    compressor = SummarizeCompressor(
        held,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        refresh="background",
        ceiling=MessageThreshold(40),
    )
    answer = run(compressor.compress_detailed(chat(25), thread_id="sync"))
    assert (answer.outcome, answer.summarizer_calls) == ("stale", 0)
    assert not drain(timeout=0)  # the refresh waits for its summarizer
    release.set()
    assert drain()
    assert len(summarizer.calls) == 1
    assert run(compressor.compress_detailed(chat(25), thread_id="sync")).outcome == "hit"


def test_closing_a_runner_cancels_its_background_refreshes_and_the_cache_stays() -> None:
    done = threading.Event()

    async def held(messages: Sequence[Message], context: SummaryContext) -> str:
        if not done.is_set():
            await asyncio.sleep(3600)  # until the runner closes
        return "summary"

    compressor = SummarizeCompressor(
        held,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        refresh="background",
        ceiling=MessageThreshold(40),
    )
    with Runner(name="refresh-runner") as runner:
        stale = runner.run(compressor.compress_detailed(chat(25), thread_id="t"))
        assert stale.outcome == "stale"
        assert not runner.drain(timeout=0)
    stats = compressor.stats
    assert (stats.background_started, stats.background_cancelled) == (1, 1)
    assert stats.background_finished == stats.background_failed == 0
    assert run(compressor.store.get(ThreadKeys("t").index)) is None  # nothing was cached

    done.set()
    again = run(compressor.compress_detailed(chat(25), thread_id="t"))
    assert again.outcome == "stale"  # the next request offers the refresh again
    assert drain()
    assert run(compressor.compress_detailed(chat(25), thread_id="t")).outcome == "hit"


def test_the_default_runner_is_one_per_process() -> None:
    assert default_runner() is default_runner()
    loops = {run(_running_loop()) for _ in range(3)}
    loops |= set(in_threads(3, lambda _: run(_running_loop())))
    assert len(loops) == 1


async def _running_loop() -> int:
    return id(asyncio.get_running_loop())


def test_a_forked_child_runs_on_a_loop_of_its_own() -> None:
    script = """
import asyncio, os
from slimcache.sync import run

async def loop_id():
    return id(asyncio.get_running_loop())

parent = run(loop_id())
pid = os.fork()
if pid == 0:
    os._exit(0 if run(loop_id()) and run(asyncio.sleep(0, 7)) == 7 else 1)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), "parent again", run(loop_id()) == parent)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.stdout.strip() == "child exit 0 parent again True", done.stderr
