"""One worker process of the multi-process concurrency tests.

See ``tests/core/test_compressor_concurrency.py``.

It opens one store from a URL, warms it up, prints ``{"started": true}`` and then serves jobs,
one JSON object per line on stdin, until stdin closes. For each job it builds one
:class:`SummarizeCompressor` per task on the shared store, prints ``{"armed": true}``, waits
until the parent creates the job's ``go`` file, and runs every task at once on the job's
thread id:

* ``burst``: every task compresses the whole history once;
* ``rolling``: every task replays the history turn by turn (``history[:k]``, ``k`` growing by
  ``step``), as a stateless server sees it request after request.

Every summarizer call appends one line ``"<start>-<end> <task>\\n"`` to the job's ``calls_log``
(``O_APPEND``, one ``write`` per line), so the parent counts the calls of all processes. The
summarizer sleeps ``delay`` seconds so calls overlap; with ``fail_first`` the first call this
process makes for the job fails after ``fail_delay`` seconds instead.

The outcome of every request is printed as one JSON line::

    {"worker": 0, "tasks": [[{"length": 61, "outcome": "hit", "range": [1, 50],
                              "summary": "...", "error": null}, ...], ...]}

The job's keys: ``scenario``, ``thread``, ``tasks``, ``messages`` (turns after the system
message), ``step``, ``trigger`` (``MessageThreshold``), ``keep`` (``KeepMessages``),
``lock_wait``, ``lease_ttl``, ``store_timeout`` (the compressor's), ``delay``, ``fail_first``,
``fail_delay``, ``calls_log``, ``go``, and ``strategy`` (default ``extend``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from slimcache import (
    KeepMessages,
    Message,
    MessageThreshold,
    Store,
    SummarizeCompressor,
    SummaryContext,
    open_store,
)
from slimcache.stores import SupportsClose
from tests.fakes import chat
from tests.workers.signals import answer_jobs, emit, wait_for

__all__ = [
    "SUMMARIZER_ID",
    "LoggedSummarizer",
    "Report",
    "history",
    "main",
    "request_lengths",
    "summary_text",
]

Report = dict[str, Any]

SUMMARIZER_ID = "replay-worker"
# Seconds to wait for a job's go file before giving up on the job.
_START_TIMEOUT = 120.0


def summary_text(context: SummaryContext) -> str:
    """The summary every call returns: deterministic, naming the task and the messages given."""
    previous = f"{context.previous_summary} + " if context.previous_summary else ""
    return f"{previous}{context.task}[{context.start}-{context.end}]"


def history(messages: int) -> list[dict[str, Any]]:
    """The conversation every worker compresses: a system message, then ``messages`` turns."""
    return chat(messages)


def request_lengths(total: int, step: int) -> list[int]:
    """Lengths of the requests of a rolling replay: ``step``, ``2 * step``, ... up to ``total``."""
    return list(range(step, total + 1, step))


class LoggedSummarizer:
    """Appends one line per call to a file shared by all processes, then answers.

    Args:
        log: The calls log.
        delay: Seconds each call takes.
        fail_first: Make the first call fail.
        fail_delay: Seconds the failing call takes before it raises.
    """

    def __init__(self, log: str, *, delay: float, fail_first: bool, fail_delay: float) -> None:
        self._fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._delay = delay
        self._fail_pending = fail_first
        self._fail_delay = fail_delay

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        # One write of one line: appends from several processes never interleave.
        os.write(self._fd, f"{context.start}-{context.end} {context.task}\n".encode())
        if self._fail_pending:
            self._fail_pending = False
            await asyncio.sleep(self._fail_delay)
            raise RuntimeError("the summarizer of the designated worker failed")
        await asyncio.sleep(self._delay)
        return summary_text(context)

    def close(self) -> None:
        """Close the log."""
        os.close(self._fd)


def _report(length: int, result: Any = None, error: BaseException | None = None) -> Report:
    if error is not None:
        return {
            "length": length,
            "outcome": None,
            "range": None,
            "summary": None,
            "error": f"{type(error).__name__}: {error}",
        }
    return {
        "length": length,
        "outcome": result.outcome,
        "range": list(result.summary_range) if result.summary_range else None,
        "summary": result.summary,
        "error": None,
    }


async def _run_task(
    compressor: SummarizeCompressor,
    conversation: list[dict[str, Any]],
    lengths: list[int],
    thread: str,
) -> list[Report]:
    reports: list[Report] = []
    for length in lengths:
        try:
            result = await compressor.compress_detailed(conversation[:length], thread_id=thread)
        except Exception as exc:
            reports.append(_report(length, error=exc))
        else:
            reports.append(_report(length, result))
    return reports


async def run_job(store: Store, worker: int, job: dict[str, Any]) -> Report:
    """Run one job on the shared store; return the report of every request."""
    summarizer = LoggedSummarizer(
        job["calls_log"],
        delay=job["delay"],
        fail_first=job["fail_first"],
        fail_delay=job["fail_delay"],
    )
    try:
        conversation = history(job["messages"])
        if job["scenario"] == "burst":
            lengths = [len(conversation)]
        else:
            lengths = request_lengths(len(conversation), job["step"])
        compressors = [
            SummarizeCompressor(
                summarizer,
                store,
                trigger=MessageThreshold(job["trigger"]),
                keep=KeepMessages(job["keep"]),
                summarizer_id=SUMMARIZER_ID,
                lock_wait=job["lock_wait"],
                lease_ttl=job["lease_ttl"],
                store_timeout=job["store_timeout"],
                strategy=job.get("strategy", "extend"),
            )
            for _ in range(job["tasks"])
        ]
        emit({"armed": True})
        await wait_for(job["go"], _START_TIMEOUT)
        tasks = await asyncio.gather(
            *(_run_task(c, conversation, lengths, job["thread"]) for c in compressors)
        )
        return {"worker": worker, "tasks": tasks}
    finally:
        summarizer.close()


async def serve(args: argparse.Namespace) -> None:
    """Open the store, then run the jobs read from stdin until it closes."""
    store: Store = open_store(args.url, **json.loads(args.store_options))
    try:
        # Open a connection now, so that the first job's tasks start together.
        await store.get(f"warm-up-{args.worker}")
        await answer_jobs(lambda job: run_job(store, args.worker, job))
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m tests.workers.replay_worker")
    parser.add_argument("--url", required=True, help="store URL, for open_store")
    parser.add_argument("--store-options", default="{}", help="JSON object of store options")
    parser.add_argument("--worker", type=int, required=True, help="this worker's number")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve jobs until stdin closes."""
    asyncio.run(serve(parse(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
