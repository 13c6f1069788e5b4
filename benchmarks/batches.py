"""How trigger and keep settings batch summarizer calls, on real conversations.

Replays the conversations ``slimcache bench`` replays by default (50 chitchat conversations of
40+ turns, sampled with seed 0) the way a stateless chat server sees them: every request
carries the whole history up to and including a user message, a new compressor compresses it
on a shared memory store, and the offline extractive summarizer (no model, no network) makes
the summaries. Every configuration uses the compressor's default strategy (``tree``; another
with ``--strategy NAME``) and a 400-token summary budget, as the bench does:

- (a) ``TokenThreshold(2000)`` + ``KeepMessages(12)``;
- (b) ``EvictableTokens(2000)`` + ``KeepMessages(12)``;
- (c) ``AnyOf(MessageThreshold(40), TokenThreshold(6000))`` + ``KeepTokens(2000)``;
- (d) ``MessageThreshold(20)`` + ``KeepMessages(10)`` (the bench default).

For each it prints the summarizer calls, the summarizer input tokens (messages, prompts and
previous summaries), the conversation tokens sent (the chat messages given to the summarizer),
the floor (every message that ever left the window, each counted once), their ratio, and the
verbatim window the model is sent (mean and largest, in messages). Tokens are counted as the
compressor counts them (four characters per token, plus four per message).

With ``--tau-bench PATH`` it replays tau-bench's airline agent trajectories instead (a JSON
list of items, each holding its messages under ``traj``), a request before each assistant turn
(after a user message or a tool result).

Usage::

    uv run python benchmarks/batches.py [--conversations N] [--seed S] [--strategy NAME]
    uv run python benchmarks/batches.py --tau-bench ../shared/data/tau-bench/gpt-4o-airline.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimcache import (
    AnyOf,
    EvictableTokens,
    Keep,
    KeepMessages,
    KeepTokens,
    MemoryStore,
    MessageThreshold,
    SummarizeCompressor,
    TokenThreshold,
    Trigger,
)
from slimcache.bench.datasets import (
    BenchConversation,
    load_chitchat,
    request_lengths,
    select_conversations,
)
from slimcache.bench.summarizers import MeteredSummarizer, OfflineSummarizer
from slimcache.messages import check_messages

MIN_MESSAGES = 40
STRICT_WINDOW = 12
SUMMARY_TOKENS = 400
TARGET_CALLS = 105
TARGET_FLOOR_RATIO = 1.10


@dataclass(frozen=True)
class Config:
    """One trigger and keep policy to replay."""

    key: str
    label: str
    make: Callable[[], tuple[Trigger, Keep]]


CONFIGS = (
    Config(
        "a",
        "TokenThreshold(2000) + KeepMessages(12)",
        lambda: (TokenThreshold(2000), KeepMessages(12)),
    ),
    Config(
        "b",
        "EvictableTokens(2000) + KeepMessages(12)",
        lambda: (EvictableTokens(2000), KeepMessages(12)),
    ),
    Config(
        "c",
        "AnyOf(MessageThreshold(40), TokenThreshold(6000)) + KeepTokens(2000)",
        lambda: (AnyOf(MessageThreshold(40), TokenThreshold(6000)), KeepTokens(2000)),
    ),
    Config(
        "d",
        "MessageThreshold(20) + KeepMessages(10) (bench default)",
        lambda: (MessageThreshold(20), KeepMessages(10)),
    ),
)


@dataclass
class Outcome:
    """What one configuration cost over the whole replay."""

    config: Config
    requests: int = 0
    calls: int = 0
    input_tokens: int = 0
    message_tokens: int = 0
    floor: int = 0
    hits: int = 0
    extensions: int = 0
    misses: int = 0
    invalidations: int = 0
    windows: list[int] = field(default_factory=list)

    @property
    def floor_ratio(self) -> float:
        return self.message_tokens / self.floor if self.floor else float("nan")


def agent_requests(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """An agent's request lengths: the history before each assistant turn."""
    return [i + 1 for i, m in enumerate(messages) if m.get("role") in ("user", "tool")]


def load_tau_bench(path: Path, count: int) -> list[BenchConversation]:
    """The first ``count`` trajectories of a tau-bench file, as conversations."""
    items = json.loads(path.read_text(encoding="utf-8"))
    return [
        BenchConversation(id=f"tau-{number}", messages=item["traj"])
        for number, item in enumerate(items[:count])
    ]


async def replay(
    config: Config,
    conversations: Sequence[BenchConversation],
    strategy: str | None = None,
    requests: Callable[[Sequence[Mapping[str, Any]]], list[int]] = request_lengths,
) -> Outcome:
    """Replay every request of ``conversations`` under ``config``, a new compressor each, with
    ``strategy`` (``None``: the compressor's default) and the request lengths ``requests``
    gives."""
    store = MemoryStore()
    offline = OfflineSummarizer()
    chosen: dict[str, Any] = {} if strategy is None else {"strategy": strategy}
    metered = MeteredSummarizer(offline)
    outcome = Outcome(config)
    for conversation in conversations:
        thread_id = f"batches-{config.key}-{conversation.id}"
        checked = check_messages(conversation.messages)
        evicted_end = -1
        for length in requests(conversation.messages):
            trigger, keep = config.make()
            compressor = SummarizeCompressor(
                metered,
                store,
                trigger=trigger,
                keep=keep,
                max_summary_tokens=SUMMARY_TOKENS,
                summarizer_id=offline.name,
                **chosen,
            )
            result = await compressor.compress_detailed(
                conversation.messages[:length], thread_id=thread_id
            )
            stats = compressor.stats
            outcome.requests += 1
            outcome.calls += stats.summarizer_calls
            outcome.input_tokens += stats.summarizer_input_tokens
            outcome.hits += stats.cache_hits
            outcome.extensions += stats.extensions
            outcome.misses += stats.misses
            outcome.invalidations += stats.invalidations
            if result.summary_range is None:
                outcome.windows.append(length - checked.pinned)
            else:
                evicted_end = max(evicted_end, result.summary_range[1])
                outcome.windows.append(length - result.summary_range[1] - 1)
        outcome.floor += sum(checked.tokens[checked.pinned : evicted_end + 1])
    outcome.message_tokens = metered.message_tokens
    await store.aclose()
    return outcome


def strict_floor(conversations: Sequence[BenchConversation], window: int) -> int:
    """Tokens a window held at ``window`` messages on every request would evict, once each."""
    total = 0
    for conversation in conversations:
        checked = check_messages(conversation.messages)
        last = request_lengths(conversation.messages)[-1]
        total += sum(checked.tokens[checked.pinned : max(checked.pinned, last - window)])
    return total


def render(outcomes: list[Outcome]) -> str:
    """The figures of every configuration as a plain-text table, labels below it."""
    header = (
        f"{'':<4}{'calls':>7}{'input tokens':>14}{'conv. tokens sent':>19}{'floor':>10}"
        f"{'sent / floor':>14}{'window mean':>13}{'window max':>12}"
    )
    lines = [header, "-" * len(header)]
    for o in outcomes:
        lines.append(
            f"({o.config.key}){o.calls:>8,}{o.input_tokens:>14,}{o.message_tokens:>19,}"
            f"{o.floor:>10,}{o.floor_ratio:>13.3f}x{statistics.fmean(o.windows):>13.1f}"
            f"{max(o.windows):>12,}"
        )
    lines.append("")
    for o in outcomes:
        lines.append(
            f"({o.config.key}) {o.config.label}: hits / extensions / misses "
            f"{o.hits:,} / {o.extensions:,} / {o.misses:,}, invalidated {o.invalidations:,}"
        )
    return "\n".join(lines)


def targets(outcomes: list[Outcome]) -> list[str]:
    """The targets the project tracks for (b), next to what this run measured."""
    lines: list[str] = []
    for o in outcomes:
        if o.config.key != "b":
            continue
        calls_met = "met" if o.calls <= TARGET_CALLS else "NOT met"
        ratio_met = "met" if o.floor_ratio <= TARGET_FLOOR_RATIO else "NOT met"
        lines.append(
            f"(b) summarizer calls: {o.calls:,} (target: at most {TARGET_CALLS}): {calls_met}"
        )
        lines.append(
            f"(b) conversation tokens sent: {o.floor_ratio:.3f}x the floor "
            f"(target: at most {TARGET_FLOOR_RATIO:.2f}x): {ratio_met}"
        )
    return lines


async def _run(args: argparse.Namespace) -> tuple[list[BenchConversation], list[Outcome]]:
    requests = request_lengths
    if args.tau_bench is not None:
        conversations = load_tau_bench(args.tau_bench, args.conversations)
        requests = agent_requests
    else:
        conversations = select_conversations(
            load_chitchat().conversations,
            count=args.conversations,
            min_messages=MIN_MESSAGES,
            seed=args.seed,
        )
    outcomes: list[Outcome] = []
    for config in CONFIGS:
        print(f"replaying ({config.key}) {config.label} ...", file=sys.stderr, flush=True)
        outcomes.append(await replay(config, conversations, args.strategy, requests))
    return conversations, outcomes


def main(argv: list[str] | None = None) -> int:
    """Replay under every configuration and print the figures; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--conversations", type=int, default=50, help="conversations to replay (default 50)"
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument(
        "--strategy", help="the compressor's strategy (default: its own default, tree)"
    )
    parser.add_argument(
        "--tau-bench", type=Path, help="replay tau-bench trajectories from this JSON file"
    )
    args = parser.parse_args(argv)
    if args.conversations < 1:
        parser.error("--conversations must be positive")
    conversations, outcomes = asyncio.run(_run(args))
    requests = outcomes[0].requests
    what = (
        "tau-bench trajectories"
        if args.tau_bench is not None
        else f"chitchat conversations of {MIN_MESSAGES}+ turns (seed {args.seed})"
    )
    print(
        f"{len(conversations)} {what}, {requests:,} requests each, strategy "
        f"{args.strategy or 'default (tree)'}, memory store, offline summarizer"
    )
    print(render(outcomes))
    print(
        "input tokens: everything sent to the summarizer; conv. tokens sent: the chat messages "
        "among them; floor: every message that left the window, counted once; window: "
        "messages sent verbatim per request"
    )
    print(
        f"For comparison, a window held at {STRICT_WINDOW} messages on every request would "
        f"evict {strict_floor(conversations, STRICT_WINDOW):,} tokens, each counted once."
    )
    print()
    print("\n".join(targets(outcomes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
