"""A sliding TTL: a thread in use keeps its summaries, with no write per hit."""

from __future__ import annotations

import asyncio

from slimcache import KeepMessages, MessageThreshold, SummarizeCompressor, cached_summarizer
from slimcache.stores import ThreadIndex, ThreadKeys
from slimcache.testing import StoreFactory
from tests.fakes import RecordingSummarizer, chat

TTL = 1.2


def _compressor(summarizer: RecordingSummarizer, store: object) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,  # type: ignore[arg-type]
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        ttl=TTL,
    )


async def test_a_thread_read_every_third_of_its_ttl_is_summarized_once(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = RecordingSummarizer()
    compressor = _compressor(summarizer, store)
    history = chat(30)
    outcomes = []
    # Every TTL / 3 for 3 x TTL: without the refresh the summary expires after TTL.
    for _ in range(10):
        outcomes.append((await compressor.compress_detailed(history, thread_id="t")).outcome)
        await asyncio.sleep(TTL / 3)
    assert len(summarizer.calls) == 1, outcomes
    assert outcomes.count("hit") == 9
    # A refresh is a write every half TTL or so, not one per hit.
    writes = compressor.stats.store_writes + compressor.stats.store_batches
    assert writes <= 2 + 2 * 3 * 2, compressor.stats
    # Once nobody reads the thread, it still expires.
    await asyncio.sleep(TTL + 0.3)
    assert await store.get(ThreadKeys("t").index) is None


async def test_the_index_records_when_it_was_written_only_with_a_ttl(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    await _compressor(RecordingSummarizer(), store).compress(chat(30), thread_id="t")
    raw = await store.get(ThreadKeys("t").index)
    index = ThreadIndex.parse(raw, thread=ThreadKeys("t").encoded)
    assert index is not None
    assert index.written_at is not None
    plain = SummarizeCompressor(
        RecordingSummarizer(), store, trigger=MessageThreshold(20), keep=KeepMessages(10)
    )
    await plain.compress(chat(30), thread_id="u")
    assert '"written_at"' not in str(await store.get(ThreadKeys("u").index))


async def test_cached_summarizer_slides_its_ttl_too(make_store: StoreFactory) -> None:
    store = await make_store()
    calls: list[int] = []

    @cached_summarizer(store, ttl=TTL)
    def summarize(messages: list[dict[str, object]]) -> str:
        calls.append(len(messages))
        return f"{len(messages)} messages"

    history = chat(8)
    for _ in range(10):
        await summarize(history, thread_id="t")
        await asyncio.sleep(TTL / 3)
    assert calls == [9]
