"""Synthetic conversations and a one-call replay, shared by the benchmark's tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slimcache import Store
from slimcache.bench.datasets import BenchConversation, Dataset
from slimcache.bench.engine import run_bench
from slimcache.bench.results import BenchReport, BenchSettings
from slimcache.bench.summarizers import OfflineSummarizer

# extend: every message that leaves the window reaches the summarizer exactly once, which the
# figures' tests count on (the tree may read a merged range's messages again).
SMALL = BenchSettings(threshold=6, keep=3, summary_tokens=60, strategy="extend")


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


async def replay(
    data: Dataset,
    store: Store,
    settings: BenchSettings = SMALL,
    url: str = "memory://",
    modes: Sequence[str] | None = None,
) -> BenchReport:
    return await run_bench(
        data,
        data.conversations,
        store=store,
        store_url=url,
        summarizer=OfflineSummarizer(),
        settings=settings,
        modes=modes,
    )
