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
from slimcache.core.summarizer import input_tokens
from slimcache.core.tree import ORIGINALS_AT_LEAST, ORIGINALS_WITHIN, SEPARATOR
from slimcache.messages import approx_tokens
from slimcache.stores import ThreadKeys
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex, load_stored
from slimcache.testing import StoreFactory
from tests.fakes import chat

# The default prompts' digest before the 'Facts:' section: what today's entries carry.
EARLIER_DEFAULT_PROMPTS = "3175e59dfd4e"


class Tagged:
    """Answers with the task and the range given; can fail the calls that merge parts (those
    that extend a summary, or whose range starts at a message summarized before)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int]] = []
        self.received: list[tuple[list[Message], str | None]] = []
        self.sent: list[int] = []  # each call's input tokens, as the compressor counts them
        self.fail_merges = False
        self.summarized_to = 0

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.calls.append((context.task, context.start, context.end, context.max_tokens))
        self.received.append((list(messages), context.previous_summary))
        self.sent.append(
            input_tokens(context.prompt, messages, context.previous_summary, approx_tokens, 4)
        )
        merging = context.task == "extend" or context.start <= self.summarized_to
        if self.fail_merges and merging:
            raise RuntimeError("crashed while merging")
        self.summarized_to = max(self.summarized_to, context.end)
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
    # The second part completes a pair: merged with the first, in its own call, from the
    # original messages of both (they fit the bound and are within 8 times the budget).
    assert [(task, start, end) for task, start, end, _ in compactions] == [
        ("summarize", 1, 11),
        ("summarize", 1, 23),
        ("summarize", 24, 35),
        ("summarize", 1, 47),
        ("summarize", 48, 59),
        ("summarize", 48, 71),
        ("summarize", 72, 83),
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
    # The part and the new messages, merged: from the original messages of both.
    assert summarizer.calls[-1][:2] == ("summarize", 1)
    assert result.summary_range == (1, summarizer.calls[-1][2])
    assert result.summary == f"summarize[1-{summarizer.calls[-1][2]}]"


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


async def test_a_merge_reads_the_original_messages_of_its_range(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = Tagged()
    history = chat(50)
    await replay(summarizer, store, history, 36)
    assert [c[:3] for c in summarizer.calls] == [("summarize", 1, 11), ("summarize", 1, 23)]
    messages, previous = summarizer.received[-1]
    # The merge is sent messages 1 to 23 as the request has them, not the first part's
    # summary and the new messages.
    assert previous is None
    assert [m["content"] for m in messages] == [m["content"] for m in history[1:24]]
    entry = ThreadIndex.parse(await store.get(ThreadKeys("t").index), thread="t")
    assert entry is not None
    assert entry.head.part_messages == (23,)
    # Written so that an earlier version reads it: three layout fields per part.
    raw = load_stored(await store.get(ThreadKeys("t").summary(1, 23)))
    assert isinstance(raw, dict)
    assert all(len(part) == 3 for part in raw["parts"])
    assert raw["part_messages"] == [23]


@pytest.mark.parametrize("budget", [100, 700])
async def test_a_merge_reads_up_to_the_larger_of_8_budgets_and_3000_tokens_of_messages(
    make_store: StoreFactory, budget: int
) -> None:
    store = await make_store()
    summarizer = Tagged()
    # Messages of about 100 tokens: a compaction is 11 or 12 of them, a pair of compactions
    # about 2,400 tokens, four about 4,800; every merge fits the bound on one call's input.
    history = [
        m if m["role"] == "system" else {**m, "content": m["content"] + " long" * 80}
        for m in chat(60)
    ]
    within = max(ORIGINALS_WITHIN * budget, ORIGINALS_AT_LEAST)
    assert within == {100: 3000, 700: 5600}[budget]
    for length in range(2, 61, 2):
        compressor = tree(summarizer, store, max_summary_tokens=budget, max_input_tokens=20_000)
        await compressor.compress_detailed(history[:length], thread_id="t")
    calls = [c[:3] for c in summarizer.calls]
    # The pair is read as stated at either budget, though at 100 tokens it is 24 budgets.
    assert calls[:3] == [("summarize", 1, 11), ("summarize", 1, 23), ("summarize", 24, 35)]
    assert 8 * 100 < summarizer.sent[1] <= ORIGINALS_AT_LEAST
    # Four compactions' messages are past 3,000 tokens but within 8 budgets of 700.
    merge = calls[3]
    if budget == 100:
        assert merge[:2] == ("extend", 36)
        messages, previous = summarizer.received[3]
        assert previous == "summarize[1-23]" + SEPARATOR + "summarize[24-35]"
        assert [m["content"] for m in messages] == [m["content"] for m in history[36:48]]
    else:
        assert merge[:2] == ("summarize", 1)
        assert ORIGINALS_AT_LEAST < summarizer.sent[3] <= within


async def test_a_merge_never_reads_edited_messages(make_store: StoreFactory) -> None:
    store = await make_store()
    summarizer = Tagged()
    history = chat(50)
    await replay(summarizer, store, history, 32)  # one part: messages 1 to 11
    edited = [dict(m) for m in history]
    edited[5]["content"] = "an edited message"  # inside the part
    calls = len(summarizer.calls)
    result = await tree(summarizer, store).compress_detailed(edited[:36], thread_id="t")
    # The part no longer matches: summarized anew from the edited messages, nothing merged
    # with the part made from the messages before the edit.
    assert result.outcome == "summarized"
    assert [c[:2] for c in summarizer.calls[calls:]] == [("summarize", 1)]
    messages, previous = summarizer.received[-1]
    assert previous is None
    assert "an edited message" in [m["content"] for m in messages]
    assert result.summary == f"summarize[1-{summarizer.calls[-1][2]}]"


async def test_a_merge_reads_the_parts_when_the_messages_do_not_fit_the_input_bound(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    summarizer = Tagged()
    history = chat(100)
    bound = 320  # a compaction's new messages fit; a merged range's messages do not
    result = None
    for length in range(2, 101, 2):
        compressor = tree(summarizer, store, max_input_tokens=bound, max_summary_tokens=80)
        result = await compressor.compress_detailed(history[:length], thread_id="t")
    assert result is not None
    assert max(summarizer.sent) <= bound
    tasks = [c[:2] for c in summarizer.calls]
    assert ("extend", 12) in tasks  # the first two parts merged from their summaries
    assert all(start > 1 for task, start in tasks if task == "extend")
    assert all(start != 1 for task, start in tasks[1:] if task == "summarize")
    index = ThreadIndex.parse(await store.get(ThreadKeys("t").index), thread="t")
    assert index is not None
    assert [level for level, _, _ in index.head.parts] == [2, 1, 0]


async def test_parts_an_earlier_version_wrote_are_merged_from_their_summaries(
    make_store: StoreFactory,
) -> None:
    # An entry of two parts as the version before wrote it: a layout of three fields per part,
    # and no message counts. Served as it is, and merged from the parts' summaries.
    store = await make_store()
    history = chat(50)
    ref = RangeRef(1, 23, compressor_fingerprint(history, 23))
    first, second = "summary of 1-11", "summary of 12-23"
    entry = SummaryEntry(
        thread="t",
        start=1,
        end=23,
        fingerprint=ref.fingerprint,
        summary=first + SEPARATOR + second,
        summary_tokens=8,
        covered_tokens=200,
        created_at=time.time(),
        summarizer="tagged",
        prompt=tree(Tagged(), store)._derived.producer.prompts.digest,
        strategy="tree",
        parts=((1, 100, len(first)), (0, 100, len(second))),
    )
    assert "part_messages" not in entry.to_json()
    keys = ThreadKeys("t")
    await store.set(keys.summary(1, 23), entry.to_json())
    await store.set(keys.index, ThreadIndex("t", (ref,), entry).to_json())
    summarizer = Tagged()
    hit = await tree(summarizer, store).compress_detailed(history[:34], thread_id="t")
    assert (hit.outcome, hit.summary, summarizer.calls) == ("hit", entry.summary, [])
    longer = await tree(summarizer, store).compress_detailed(history[:48], thread_id="t")
    assert longer.outcome == "extended"
    # The new messages complete a pair with the parts (a binary counter's carry): merged with
    # both, from their summaries, as the parts' messages are not known.
    assert [c[:2] for c in summarizer.calls] == [("extend", 24)]
    assert summarizer.received[-1][1] == entry.summary
    assert longer.summary == f"extend[24-{summarizer.calls[-1][2]}]"
