"""What building a SummarizeCompressor costs, per request, with the same arguments each time.

A stateless server builds one per request. This times that construction with the arguments a
typical server passes (a summarizer, a store, a trigger, a keep policy and a few flat keywords),
and, for comparison, with every setting changed on each build (nothing to reuse).

Usage::

    uv run python benchmarks/construct.py [--repeat 5] [--number 20000] [--only same|new]
"""

from __future__ import annotations

import argparse
import statistics
import timeit

from slimcache import KeepMessages, MessageThreshold, SummarizeCompressor
from slimcache.stores.memory import MemoryStore


async def summarize(messages: object, context: object) -> str:
    return "summary"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument(
        "--only", choices=("same", "new"), help="time one case only (for timing whole runs)"
    )
    args = parser.parse_args()
    store = MemoryStore()

    def same() -> None:
        SummarizeCompressor(
            summarize,
            store,
            trigger=MessageThreshold(20),
            keep=KeepMessages(10),
            namespace="app",
            ttl=3600,
            lease_ttl=10.0,
            store_timeout=2.0,
        )

    counter = iter(range(10**9))

    def changing() -> None:
        n = next(counter)
        SummarizeCompressor(
            summarize,
            store,
            trigger=MessageThreshold(20 + n % 1000),
            keep=KeepMessages(10),
            namespace=f"app{n}",
            ttl=3600,
        )

    cases = (
        ("same", "same arguments", same, args.number),
        ("new", "new arguments each time", changing, max(args.number // 20, 1)),
    )
    for case, name, function, number in cases:
        if args.only not in (None, case):
            continue
        runs = timeit.repeat(function, repeat=args.repeat, number=number)
        per_call = sorted(run / number * 1e6 for run in runs)
        print(
            f"{name:>24}: {statistics.median(per_call):7.2f} µs per compressor "
            f"(min {per_call[0]:.2f}, max {per_call[-1]:.2f}; {args.repeat} x {number})"
        )


if __name__ == "__main__":
    main()
