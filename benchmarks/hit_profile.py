"""Where a cache hit's time goes: cProfile of 200-message hits on the memory store.

Builds one thread of plain turns by replaying it request by request with the default settings
(a summarizer that keeps each message's first words, called in line), then times hits on it and
profiles them. It uses only the public API (``SummarizeCompressor``, ``MemoryStore``,
``compress``), so it runs against any version of slimcache that is first on the path; the
"before" profile in docs/performance.md is this script run against an earlier commit::

    uv run python benchmarks/hit_profile.py
    git worktree add /tmp/slimcache-before 6a8224e
    PYTHONPATH=/tmp/slimcache-before uv run python benchmarks/hit_profile.py

Prints which slimcache it imported, the median hit (without the profiler) in microseconds, and
the top functions by own time under cProfile, whose overhead inflates the absolute times; the
ranking and the shares are what it is for.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import time
from collections.abc import Sequence
from typing import Any

import slimcache
from slimcache import MemoryStore, SummarizeCompressor

THREAD_ID = "hit-profile"


def plain_history(count: int) -> list[dict[str, Any]]:
    """A system prompt, then alternating user/assistant turns of plain text; ends on a user."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    for i in range(count - 1):
        role = "user" if i % 2 == 0 else "assistant"
        words = " ".join(f"word{j}" for j in range(4 + i % 11))
        messages.append({"role": role, "content": f"Message {i}: {words}. Anything else?"})
    return messages


def summarize(messages: Sequence[Any], context: Any) -> str:
    """Each message's first three words: deterministic and offline."""
    return " | ".join(" ".join(str(m.get("content", "")).split()[:3]) for m in messages)


async def _run(count: int, calls: int, top: int) -> tuple[float, str]:
    history = plain_history(count)
    store = MemoryStore()
    compressor = SummarizeCompressor(summarize, store)
    for length in range(2, count + 1):
        if history[length - 1]["role"] == "user":
            await compressor.compress(history[:length], thread_id=THREAD_ID)
    result = await compressor.compress_detailed(history, thread_id=THREAD_ID)
    if result.outcome != "hit":
        raise RuntimeError(f"expected a cache hit, got {result.outcome!r}")
    samples: list[int] = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        await compressor.compress(history, thread_id=THREAD_ID)
        samples.append(time.perf_counter_ns() - start)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        await compressor.compress(history, thread_id=THREAD_ID)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(top)
    body = out.getvalue()
    return statistics.median(samples) / 1000, body[body.index("   ncalls") :].rstrip()


def main(argv: list[str] | None = None) -> int:
    """Run the profile and print it; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=200, help="history length (default 200)")
    parser.add_argument("--calls", type=int, default=300, help="hits timed, then profiled")
    parser.add_argument("--top", type=int, default=8, help="functions listed (default 8)")
    args = parser.parse_args(argv)
    if args.messages < 2 or args.calls < 1 or args.top < 1:
        parser.error("--messages must be at least 2, --calls and --top positive")
    median_us, profile = asyncio.run(_run(args.messages, args.calls, args.top))
    print(f"slimcache from {slimcache.__file__}")
    print(f"{args.messages}-message hit on the memory store: median {median_us:.1f} us")
    print(f"--- cProfile of {args.calls} hits: top {args.top} by own time ---")
    print(profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
