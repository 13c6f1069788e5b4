"""What a hit of ``@cached_summarizer`` costs, next to a ``SummarizeCompressor`` hit.

For histories of 200 and 2,000 plain messages, this builds one thread with each (the wrapped
function called on every user turn's history, the compressor replaying the same requests with
its default settings), then times a repeated call, which both answer from the store with no
summarizer call, on the memory store. Two ways of handing over the messages are timed:

- ``same list``: the very list the thread was built from, as a process holding the
  conversation would;
- ``parsed``: a copy parsed from JSON right before each call (untimed), as a stateless server
  parsing each request's body would: equal strings, not the same objects.

It uses only the public API (``cached_summarizer``, ``SummarizeCompressor``, ``MemoryStore``),
so it runs against any version of slimcache that is first on the path; the "before"
figures are this script run against an earlier commit::

    uv run python benchmarks/wrap_hit.py
    git worktree add /tmp/slimcache-before 05bc155
    PYTHONPATH=/tmp/slimcache-before uv run python benchmarks/wrap_hit.py

A second table times the call that is not a hit: two new messages on a thread of 2,000 (the
stored summary is extended with them by an async function that returns at once, so the figure is
slimcache's own work). Each call starts from a copy of the same store (untimed), once in a
process that made the thread (``seen``) and once as a worker new to the thread would make it
(``new worker``: the table of what this process hashed, ``slimcache.core.fingerprints``,
emptied before each call; versions without that table hash every call anyway).

Prints which slimcache it imported, then medians in microseconds, the cost per message (the
difference between the hits at 2,000 and at 200 messages over the 1,800 messages between
them) and the target the project tracks for it (under 1 us per plain message).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

# Run as a script, only ``benchmarks/`` is on the path: the repository root goes last, so a
# slimcache given on PYTHONPATH is still the one imported.
sys.path.append(str(Path(__file__).resolve().parents[1]))

import slimcache
from benchmarks.hit_profile import plain_history
from slimcache import MemoryStore, SummarizeCompressor, cached_summarizer

_hashed: Any
try:  # the process-wide table of what was hashed, where the version has one
    from slimcache.core import fingerprints as _hashed
except ImportError:  # pragma: no cover - versions before the package layout
    try:
        from slimcache import _hashed  # type: ignore[attr-defined,no-redef]
    except ImportError:  # older still: every call hashes
        _hashed = None

SIZES = (200, 2000)
EXTENDED = 2000
PER_MESSAGE_TARGET_US = 1.0

Call = Callable[[list[dict[str, Any]]], Awaitable[object]]


def first_words(messages: Sequence[Any]) -> str:
    """Each message's first three words: deterministic and offline."""
    return " | ".join(" ".join(str(m.get("content", "")).split()[:3]) for m in messages)


def summarize_for_compressor(messages: Sequence[Any], context: Any) -> str:
    """The compressor's summarizer: ``(messages, context) -> str``."""
    return first_words(messages)


async def wrapped_hitting(history: list[dict[str, Any]]) -> Call:
    """A wrapped function called on every user turn's history; its next call is a hit."""
    summarize = cached_summarizer(MemoryStore())(first_words)
    for length in range(2, len(history) + 1):
        if history[length - 1]["role"] == "user":
            await summarize(history[:length], thread_id="wrapped")
    before = summarize.stats.summarizer_calls
    await summarize(history, thread_id="wrapped")
    if summarize.stats.summarizer_calls != before:
        raise RuntimeError("the wrapped function was called again: not a hit")

    async def call(messages: list[dict[str, Any]]) -> object:
        return await summarize(messages, thread_id="wrapped")

    return call


async def compressor_hitting(history: list[dict[str, Any]]) -> Call:
    """A compressor that replayed every user turn's request; its next call is a hit."""
    compressor = SummarizeCompressor(summarize_for_compressor, MemoryStore())
    for length in range(2, len(history) + 1):
        if history[length - 1]["role"] == "user":
            await compressor.compress(history[:length], thread_id="compressed")
    result = await compressor.compress_detailed(history, thread_id="compressed")
    if result.outcome != "hit":
        raise RuntimeError(f"expected a cache hit, got {result.outcome!r}")

    async def call(messages: list[dict[str, Any]]) -> object:
        return await compressor.compress(messages, thread_id="compressed")

    return call


async def median_us(call: Call, history: list[dict[str, Any]], calls: int, parsed: bool) -> float:
    """Median of ``calls`` timed calls; with ``parsed``, each gets a fresh copy (untimed)."""
    body = json.dumps(history)
    times: list[int] = []
    for _ in range(calls):
        messages = json.loads(body) if parsed else history
        started = time.perf_counter_ns()
        await call(messages)
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000


async def _run(calls: int, rounds: int) -> dict[tuple[str, str, int], float]:
    """Median over ``rounds`` interleaved rounds of each (subject, handover, size)."""
    found: dict[tuple[str, str, int], list[float]] = {}
    subjects: dict[tuple[str, int], tuple[Call, list[dict[str, Any]]]] = {}
    for size in SIZES:
        history = plain_history(size)
        subjects["wrapped", size] = (await wrapped_hitting(history), history)
        subjects["compressor", size] = (await compressor_hitting(history), history)
    for _ in range(rounds):
        for (subject, size), (call, history) in subjects.items():
            for handover in ("same list", "parsed"):
                us = await median_us(call, history, calls, handover == "parsed")
                found.setdefault((subject, handover, size), []).append(us)
    return {key: statistics.median(values) for key, values in found.items()}


async def extension_us(calls: int, rounds: int) -> dict[str, float]:
    """Median call extending a wrapped summary of ``EXTENDED`` messages by two, per state."""
    history = plain_history(EXTENDED + 2)
    built = MemoryStore()
    summarize = cached_summarizer(built, summarizer_id="first-words")(first_words)
    for length in range(2, EXTENDED + 1):
        if history[length - 1]["role"] == "user":
            await summarize(history[:length], thread_id="wrapped")
    snapshot = built.snapshot()

    async def extend_at_once(messages: list[dict[str, Any]]) -> str:
        return first_words(messages)

    found: dict[str, list[float]] = {}
    for _ in range(rounds):
        for state in ("seen", "new worker"):
            times: list[int] = []
            for _ in range(calls):
                store = MemoryStore()
                for key, value in snapshot.items():
                    await store.set(key, value)
                extending = cached_summarizer(store, summarizer_id="first-words")(extend_at_once)
                if state == "new worker" and _hashed is not None:
                    table = _hashed.hashed  # emptied, then given back its usual bounds
                    table.limit(max_chars=0, max_entries=0)
                    table.limit(max_chars=_hashed.MAX_CHARS, max_entries=_hashed.MAX_ENTRIES)
                started = time.perf_counter_ns()
                await extending(history, thread_id="wrapped")
                times.append(time.perf_counter_ns() - started)
                if extending.stats.extensions != 1:
                    raise RuntimeError("the call did not extend the stored summary")
            found.setdefault(state, []).append(statistics.median(times) / 1000)
    return {state: statistics.median(values) for state, values in found.items()}


def render_extension(medians: dict[str, float]) -> str:
    """The second table: a call with two new messages."""
    lines = [
        f"{'subject':<12}{'messages':<11}{'state':<12}{'call median us':>15}",
        "-" * 50,
    ]
    for state, us in medians.items():
        lines.append(f"{'wrapped':<12}{f'{EXTENDED:,} + 2':<11}{state:<12}{us:>15.1f}")
    return "\n".join(lines)


def render(medians: dict[tuple[str, str, int], float]) -> str:
    """The table, and a verdict line per subject and handover."""
    lines = [
        f"{'subject':<12}{'messages':<11}{'handover':<11}{'hit median us':>14}"
        f"{'per message us':>16}",
        "-" * 64,
    ]
    verdicts: list[str] = []
    for subject in ("wrapped", "compressor"):
        for handover in ("same list", "parsed"):
            small, large = (medians[subject, handover, size] for size in SIZES)
            slope = (large - small) / (SIZES[1] - SIZES[0])
            for size in SIZES:
                per = f"{slope:.3f}" if size == SIZES[1] else ""
                lines.append(
                    f"{subject:<12}{size:<11,}{handover:<11}"
                    f"{medians[subject, handover, size]:>14.1f}{per:>16}"
                )
            met = "met" if slope < PER_MESSAGE_TARGET_US else "NOT met"
            verdicts.append(
                f"per-message cost of a {subject} hit ({handover}): {slope:.3f} us "
                f"(target: under {PER_MESSAGE_TARGET_US:g} us): {met}"
            )
    lines.append(
        "per message = (hit at 2,000 - hit at 200) / 1,800; handover: the list the thread was "
        "built from, or a copy parsed from JSON before each call"
    )
    return "\n".join([*lines, "", *verdicts])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    print(f"slimcache {slimcache.__version__} from {slimcache.__file__}")
    medians = asyncio.run(_run(args.calls, args.rounds))
    print(
        f"a repeated call answered from the memory store: median of {args.rounds} rounds of "
        f"{args.calls} calls each"
    )
    print(render(medians))
    print()
    print(
        f"a call with two new messages, the stored summary extended: median of {args.rounds} "
        f"rounds of {args.calls // 4} calls each"
    )
    print(render_extension(asyncio.run(extension_us(max(1, args.calls // 4), args.rounds))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
