"""Tests: a thread holding records of a format version this one does not know is left alone.

The compatibility rule of docs/format.md: such a record is never served and never overwritten;
the summary is made and answered uncached.
"""

from __future__ import annotations

import json

import pytest

from slimcache import KeepMessages, MessageThreshold, Store, SummarizeCompressor, cached_summarizer
from slimcache.stores import ThreadKeys
from slimcache.stores.entries import ENTRY_VERSION, of_other_version
from slimcache.testing import StoreFactory
from tests.fakes import RecordingSummarizer, all_keys, chat

NEWER = "a summary written in a newer format"


def newer(raw: str | None) -> str:
    """``raw`` as the next format version would write it, its summaries replaced by ``NEWER``."""
    assert raw is not None
    data = json.loads(raw)
    data["v"] = ENTRY_VERSION + 1
    for record in (data, data.get("head")):
        if isinstance(record, dict) and "summary" in record:
            record["v"] = ENTRY_VERSION + 1
            record["summary"] = NEWER
    return json.dumps(data)


def compressor(summarizer: RecordingSummarizer, store: Store) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(20), keep=KeepMessages(10)
    )


@pytest.mark.parametrize("length", [31, 41], ids=["same range", "a longer history"])
async def test_records_of_a_newer_version_are_never_served_nor_overwritten(
    make_store: StoreFactory, length: int
) -> None:
    store = await make_store()
    keys = ThreadKeys("mixed")
    history = chat(length - 1)
    first = await compressor(RecordingSummarizer(), store).compress_detailed(
        history[:31], thread_id="mixed"
    )
    assert first.summary_range is not None
    start, end = first.summary_range
    index_raw = newer(await store.get(keys.index))
    range_raw = newer(await store.get(keys.summary(start, end)))
    await store.set(keys.index, index_raw)
    await store.set(keys.summary(start, end), range_raw)

    summarizer = RecordingSummarizer()
    older = compressor(summarizer, store)
    result = await older.compress_detailed(history, thread_id="mixed")
    again = await older.compress_detailed(history, thread_id="mixed")

    for answer in (result, again):
        assert answer.outcome == "summarized"
        assert NEWER not in str(answer.messages)
        assert not answer.cached
    assert len(summarizer.calls) == 2  # made each time, as nothing can be cached
    assert await store.get(keys.index) == index_raw
    assert await store.get(keys.summary(start, end)) == range_raw
    assert await all_keys(store, "thread_mixed:summary:") == [keys.summary(start, end)]


async def test_cached_summarizer_leaves_records_of_a_newer_version_alone(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    calls: list[int] = []

    def original(messages: list[dict[str, object]]) -> str:
        calls.append(len(messages))
        return f"summary of {len(messages)}"

    summarize = cached_summarizer(store)(original)
    keys = ThreadKeys("mixed").wrapped
    history = chat(8)
    await summarize(history[:6], thread_id="mixed")
    index_raw = newer(await store.get(keys.index))
    range_raw = newer(await store.get(keys.summary(0, 5)))
    await store.set(keys.index, index_raw)
    await store.set(keys.summary(0, 5), range_raw)

    assert await summarize(history[:6], thread_id="mixed") == "summary of 6"
    assert await summarize(history, thread_id="mixed") == "summary of 9"
    assert calls == [6, 6, 9]  # nothing of the newer version served, nothing cached
    assert await store.get(keys.index) == index_raw
    assert await store.get(keys.summary(0, 5)) == range_raw
    assert await store.get(keys.summary(0, 8)) is None


@pytest.mark.parametrize(
    ("raw", "other"),
    [
        ('{"format":"slimcache.index","v":2}', True),
        ('{"format":"slimcache.summary","v":0,"summary":"x"}', True),
        (f'{{"format":"slimcache.summary","v":{ENTRY_VERSION}}}', False),
        ('{"format":"slimcache.index","v":true}', False),  # not an integer: garbage
        ('{"format":"slimcache.index","v":"2"}', False),
        ('{"format":"someone.else","v":2}', False),
        ('{"v":2}', False),
        ("[1, 2]", False),
        ("not json", False),
        (None, False),
    ],
)
def test_of_other_version(raw: str | None, other: bool) -> None:
    assert of_other_version(raw) is other
