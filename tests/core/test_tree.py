"""strategy="tree": parts merged like a binary counter, on real stores, and today's entries."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from slimcache import (
    KeepMessages,
    Message,
    MessageThreshold,
    SummarizeCompressor,
    SummarizerError,
    SummaryContext,
)
from slimcache.core.tree import SEPARATOR
from slimcache.stores import ThreadKeys
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex
from slimcache.testing import StoreFactory
from tests.fakes import chat

# The default prompts' digest before the 'Facts:' section: what today's entries carry.
EARLIER_DEFAULT_PROMPTS = "3175e59dfd4e"


class Tagged:
    """Answers with the task and the range given; can fail the calls that merge parts."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int]] = []
        self.fail_merges = False

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.calls.append((context.task, context.start, context.end, context.max_tokens))
        if self.fail_merges and context.task == "extend":
            raise RuntimeError("crashed while merging")
        return f"{context.task}[{context.start}-{context.end}]"


def tree(summarizer: Any, store: Any, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(20),
        keep=KeepMessages(10),
        summarizer_id="tagged",
        **{"strategy": "tree", **options},
    )


async def replay(summarizer: Tagged, store: Any, history: list[dict[str, Any]], upto: int) -> Any:
    result = None
    for length in range(2, upto + 1, 2):
        result = await tree(summarizer, store).compress_detailed(history[:length], thread_id="t")
    return result


async def test_parts_merge_like_a_binary_counter_one_call_per_compaction(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = Tagged()
    history = chat(100)
    result = await replay(summarizer, store, history, 101)
    compactions = summarizer.calls
    assert [task for task, *_ in compactions] == [
        "summarize",
        "extend",  # the second part completes a pair: merged with the first, in its own call
        "summarize",
        "extend",
        "summarize",
        "extend",
        "summarize",
    ]
    # Each part gets its share of the budget: the later ones cover less of the range.
    assert [budget for *_, budget in compactions][-1] < 1000 // 4
    # Served: the parts in order, one per set bit of the compactions' count (7: 4 + 2 + 1).
    index = ThreadIndex.parse(await store.get(ThreadKeys("t").index), thread="t")
    assert index is not None
    assert result is not None
    assert result.summary == index.head.summary
    assert [level for level, _, _ in index.head.parts] == [2, 1, 0]
    assert result.summary.count(SEPARATOR) == len(index.head.parts) - 1


async def test_a_tree_summary_is_never_served_for_edited_messages(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = Tagged()
    history = chat(70)
    await replay(summarizer, store, history, 71)
    edited = [dict(m) for m in history]
    edited[3]["content"] = "an edited message"  # inside the first part, merged since
    calls = len(summarizer.calls)
    result = await tree(summarizer, store).compress_detailed(edited, thread_id="t")
    assert result.outcome == "summarized"
    assert len(summarizer.calls) > calls
    assert summarizer.calls[-1][0] == "summarize"
    # The unedited history is not served the summary of the edited one either.
    again = await tree(summarizer, store).compress_detailed(history, thread_id="t")
    assert again.outcome == "summarized"


async def test_a_crash_between_a_part_and_its_parent_loses_nothing(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = Tagged()
    history = chat(40)
    first = await replay(summarizer, store, history, 32)  # one part cached
    assert first is not None
    assert [c[0] for c in summarizer.calls] == ["summarize"]
    summarizer.fail_merges = True
    with pytest.raises(SummarizerError):
        await tree(summarizer, store, on_summarizer_error="raise").compress_detailed(
            history[:36], thread_id="t"
        )
    # The part is still cached and served; the parent is built from it by the next request.
    summarizer.fail_merges = False
    before = len(summarizer.calls)
    result = await tree(summarizer, store).compress_detailed(history[:36], thread_id="t")
    assert result.outcome == "extended"
    assert len(summarizer.calls) == before + 1
    assert summarizer.calls[-1][0] == "extend"  # the part and the new messages, merged
    assert result.summary_range == (1, summarizer.calls[-1][2])
    assert result.summary == f"extend[12-{summarizer.calls[-1][2]}]"


@pytest.mark.parametrize("strategy", ["extend", "tree"])
async def test_entries_written_before_the_facts_prompts_are_still_served(
    make_store: StoreFactory, strategy: str
) -> None:
    # An entry as the version before wrote it: the earlier default prompts, strategy extend,
    # no parts. Served with no call by the defaults, and extended by the tree as one part.
    store = await make_store()
    history = chat(30)
    ref = RangeRef(1, 18, compressor_fingerprint(history, 18))
    entry = SummaryEntry(
        thread="t",
        start=1,
        end=18,
        fingerprint=ref.fingerprint,
        summary="summary made by the version before",
        summary_tokens=7,
        covered_tokens=90,
        created_at=time.time(),
        summarizer="tagged",
        prompt=EARLIER_DEFAULT_PROMPTS,
        strategy="extend",
    )
    assert "parts" not in entry.to_json()
    keys = ThreadKeys("t")
    await store.set(keys.summary(1, 18), entry.to_json())
    await store.set(keys.index, ThreadIndex("t", (ref,), entry).to_json())
    summarizer = Tagged()
    hit = await tree(summarizer, store, strategy=strategy).compress_detailed(
        history[:29], thread_id="t"
    )
    assert (hit.outcome, hit.summary, summarizer.calls) == ("hit", entry.summary, [])
    longer = await tree(summarizer, store, strategy=strategy).compress_detailed(
        chat(50), thread_id="t"
    )
    assert longer.outcome == "extended"
    if strategy == "extend":
        assert [c[0] for c in summarizer.calls] == ["extend"]
    else:  # kept as a part of its own, the new messages summarized beside it
        assert [c[0] for c in summarizer.calls] == ["summarize"]
        assert (longer.summary or "").startswith(entry.summary + SEPARATOR)
    assert longer.summary_range is not None
    assert longer.summary_range[0] == 1


def compressor_fingerprint(history: list[dict[str, Any]], end: int) -> str:
    from slimcache.core.plan import History
    from slimcache.messages import check_messages

    return History(check_messages(history)).fingerprint(end)
