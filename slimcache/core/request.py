"""One request while it runs: its checked messages, what it spent, and the result it returns.

A compressor builds a :class:`Work` for each request; the summary producer adds the calls and
tokens it spends, and the compressor shapes the result (the pinned messages, the summary
message, the verbatim tail) and the event its hooks receive from it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from slimcache.core.results import CompressEvent, CompressionResult, Outcome, Stats
from slimcache.messages import CheckedMessages

__all__ = ["Work"]


@dataclass
class Work:
    """Bookkeeping of one request while it runs.

    Attributes:
        checked: The request's messages, checked.
        thread_id: The thread (``None``: not cached).
        stats: The counters of the compressor serving it.
        reason: Why it compresses, once the planner said so.
        calls: Summarizer calls it made.
        requests: Requests those calls sent, retries included.
        input_tokens: Tokens those calls were sent.
        new_messages: Messages it folded into a summary.
        naive_tokens: Tokens a naive re-summarization would have sent.
        started: When it started (``time.perf_counter()``).
        background: Whether it is a background refresh rather than a request.
    """

    checked: CheckedMessages
    thread_id: str | None
    stats: Stats
    reason: str | None = None
    calls: int = 0
    requests: int = 0
    input_tokens: int = 0
    new_messages: int = 0
    naive_tokens: int = 0
    started: float = field(default_factory=time.perf_counter)
    background: bool = False

    def as_given(self, outcome: Outcome) -> CompressionResult:
        """The result of a request that compressed nothing: the messages as given."""
        messages = [dict(m) for m in self.checked.messages]
        return CompressionResult(messages, outcome, thread_id=self.thread_id)

    def around(self, summary_message: dict[str, Any], end: int) -> list[dict[str, Any]]:
        """The pinned messages, then ``summary_message`` in place of those up to ``end``."""
        source = self.checked.messages
        return [
            *map(dict, source[: self.checked.pinned]),
            summary_message,
            *map(dict, source[end + 1 :]),
        ]

    def result(
        self,
        messages: list[dict[str, Any]],
        outcome: Outcome,
        summary: str,
        start: int,
        end: int,
        *,
        cached: bool,
    ) -> CompressionResult:
        """The result of a request whose summary covers ``start`` to ``end``."""
        return CompressionResult(
            messages=messages,
            outcome=outcome,
            summary=summary,
            summary_range=(start, end),
            summarizer_calls=self.calls,
            cached=cached,
            thread_id=self.thread_id,
            input_tokens=self.input_tokens,
            naive_tokens=self.naive_tokens,
            summarizer_requests=self.requests,
        )

    def convo_compress_args(self, event: CompressEvent, summary: str) -> tuple[Any, ...]:
        """``on_compress``'s arguments in convo-compress's shape: ``(messages, summary, ms)``,
        the messages being those folded in by this request."""
        end = event.end
        folded = [dict(m) for m in self.checked.messages[end + 1 - event.new_messages : end + 1]]
        return folded, summary, event.elapsed * 1000

    def event(self, outcome: Outcome, start: int, end: int, summary_tokens: int) -> CompressEvent:
        """The event a hook is given for this request, now that it has its summary."""
        return CompressEvent(
            thread_id=self.thread_id,
            outcome=outcome,
            start=start,
            end=end,
            new_messages=self.new_messages,
            summarizer_calls=self.calls,
            input_tokens=self.input_tokens,
            summary_tokens=summary_tokens,
            elapsed=time.perf_counter() - self.started,
            reason=self.reason,
            summarizer_requests=self.requests,
        )
