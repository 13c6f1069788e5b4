"""Real agent trajectories (tau-bench, shared beside the checkout): tool calls stay atomic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slimcache import KeepMessages, MemoryStore, MessageThreshold, SummarizeCompressor
from slimcache.types import StrategyName
from tests.fakes import RecordingSummarizer

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tau-bench" / "gpt-4o-airline.json"


def trajectories() -> list[list[dict[str, Any]]]:
    if not DATA.exists():
        pytest.skip(f"tau-bench data not found at {DATA}")
    return [item["traj"] for item in json.loads(DATA.read_text())]


@pytest.mark.parametrize("strategy", ["extend", "tree"])
async def test_tau_bench_replay_keeps_tool_calls_whole_and_sends_each_message_once(
    strategy: StrategyName,
) -> None:
    # extend sends each message once; tree may read a merged range's messages again.
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    loaded = trajectories()[:60]
    for number, trajectory in enumerate(loaded):
        for length in range(2, len(trajectory) + 1):
            if trajectory[length - 1]["role"] not in ("user", "tool"):
                continue  # requests go out before each assistant turn
            compressor = SummarizeCompressor(
                summarizer,
                store,
                trigger=MessageThreshold(12),
                keep=KeepMessages(6),
                strategy=strategy,
            )
            result = await compressor.compress_detailed(trajectory[:length], thread_id=number)
            verbatim = result.messages[2:] if result.summary_range else result.messages[1:]
            assert verbatim[0]["role"] != "tool"
            if result.summary_range is not None:
                assert result.messages[0] == trajectory[0]  # the policy prompt stays pinned
    sent = [m for call in summarizer.calls for m in call.messages]
    assert sent
    assert all(m["role"] != "system" for m in sent)
    covered: dict[str | None, list[int]] = {}
    for call in summarizer.calls:
        context = call.context
        assert (
            call.messages
            == trajectories()[int(str(context.thread_id))][context.start : context.end + 1]
        )
        covered.setdefault(context.thread_id, []).extend(range(context.start, context.end + 1))
    for indices in covered.values():
        assert strategy == "tree" or len(indices) == len(set(indices))  # each message once
    for call in summarizer.calls:
        ids = {c["id"] for m in call.messages for c in m.get("tool_calls") or ()}
        assert ids == {m["tool_call_id"] for m in call.messages if m["role"] == "tool"}
