"""What a compression did: the outcome, the result, the hook event and the counters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from slimcache.core.summarizer import SummarizerReport

__all__ = ["CompressEvent", "CompressionResult", "Outcome", "Stats"]

Outcome = Literal["unchanged", "hit", "stale", "extended", "summarized", "uncached", "passthrough"]
"""What one call did: ``unchanged`` (nothing to summarize), ``hit`` (a cached summary served,
no summarizer call), ``stale`` (under ``refresh="background"``: the cached summary, or none yet,
served with every later message while the summary is extended in the background),
``extended`` (a cached summary extended with the new messages only), ``summarized``
(summarized from scratch and cached), ``uncached`` (summarized without the cache: no thread id,
or the store failed under ``on_store_error="bypass"``), ``passthrough`` (the summarizer failed
under ``on_summarizer_error="uncompressed"``, or an agent integration could not compress the
history; messages returned as given)."""

_PER_REQUEST = frozenset({"requests", "cache_hits", "naive_input_tokens", "invalidations"})
# The counters that keep the largest value seen, not a sum.
_LARGEST = frozenset({"max_stale_messages", "input_ratio"})
_NO_NAMES: frozenset[str] = frozenset()


@dataclass
class Stats:
    """Counters of one compressor since creation (or the last ``reset_stats``).

    Attributes:
        requests: ``compress`` calls.
        summarizer_calls: Calls made to the summarizer (those cancelled before they returned
            are in ``cancelled_calls`` instead).
        summarizer_requests: Requests those calls sent to the model, retries included: a
            call of a summarizer that counts its requests (slimcache's own, in
            :class:`~slimcache.core.summarizer.SummarizerReport`) adds them all, any other call
            adds one. Retries of a transient failure inside a provider's SDK are not seen.
        summarizer_request_tokens: Tokens those requests carried, retries included: each
            retry re-sends its call's input, which ``summarizer_input_tokens`` counts once.
        summarizer_input_tokens: Tokens sent to the summarizer (prompt, previous summary, messages).
        summarizer_output_tokens: Tokens of the summaries it returned.
        naive_input_tokens: Tokens a compressor that re-summarizes everything outside the window
            on every request would have sent for the same requests.
        cache_hits: Requests served from a cached summary with no summarizer call.
        extensions: Cached summaries extended with only the new messages.
        misses: Summaries made from scratch for a thread (nothing valid was cached).
        invalidations: Requests whose newest cached summary no longer matched the history.
        uncached: Summaries made without the cache (no thread id, or store bypassed).
        evicted_messages: Messages moved from the verbatim window into a summary.
        catch_up_steps: Summarizer steps beyond the first of requests whose messages did not
            fit one call under ``max_input_tokens``; each was cached as a range of its own.
        cut_messages: Messages sent to the summarizer cut, because alone (or with their tool
            call's other messages) they did not fit ``max_input_tokens``.
        input_ratio: How many tokens the summarizer's provider counts per token slimcache
            estimates, as the bound used it after the last summarizer call: each step's
            estimated size times it fits ``max_input_tokens``. Learned per summarizer, for the
            whole process, from the input tokens replies report and from length refusals (see
            :mod:`slimcache.core.input_ratio`); 1.0 while none is learned, and never less.
            Taken together (:meth:`add`), the larger of the two.
        length_refusals: Summarizer requests the model refused for their length (HTTP 400,
            the context exceeded). Each raised ``input_ratio`` and its step was made again,
            smaller; each is counted in ``summarizer_requests`` too.
        store_reads: Store read round trips (``get`` and ``get_many``).
        store_writes: Store write round trips (``set`` and ``set_if_absent``).
        store_deletes: Store delete round trips.
        store_batches: Round trips that carried several operations at once (on stores with
            ``batch``; the operations in them are not counted again above).
        store_errors: Store calls that failed.
        summarizer_errors: Summarizer calls that failed.
        lease_waits: Requests that waited for another worker summarizing the same thread.
        breaker_refused: Summarizer calls not made because the summarizer's breaker was open:
            it had failed several times in a row lately, anywhere in the process (see
            :mod:`slimcache.core.breaker`); each failed at once as a summarizer error.
        breaker_opened: Times these requests' failures opened a summarizer's breaker (or
            opened it again after a failed probe).
        breaker_closed: Times a call of these requests closed it, answering again.
        truncated_replies: Replies the model cut at the summary's token budget, as the
            summarizer reported them (see :class:`~slimcache.core.summarizer.SummarizerReport`;
            the summarizers of ``slimcache.llm`` and ``slimcache.langchain`` do).
        shorter_retries: Requests the summarizer made again, asking for a shorter summary,
            after a cut reply. Each re-sends the call's input; ``summarizer_input_tokens``
            counts it once.
        truncated_accepted: Cut summaries kept anyway (``on_truncated="accept"``).
        condensed_over_budget: Summaries that came back over ``max_summary_tokens`` (by more
            than a quarter) and were condensed by one more call.
        cut_over_budget: Of those, summaries still over the budget after the condense call,
            cut to it at a sentence or word boundary (``on_over_budget="cut"``).
        cancelled_calls: Summarizer calls cancelled before they returned (the request was
            cancelled: a client that went away, a worker shut down). Not in
            ``summarizer_calls``.
        cancelled_input_tokens: Tokens those calls were to be sent (or were sent, if the
            request had gone out). Not in ``summarizer_input_tokens``.
        invalid_histories: Requests of an agent integration whose history slimcache could not
            compress (a message breaking a rule it checks: a tool result whose call is not in
            the history, a shape no rule covers), passed to the model as they came.
        stale_served: Requests answered with the summary the store had (or none) and every
            later message, while the summary is extended in the background
            (``refresh="background"``).
        stale_messages: Messages those answers carried verbatim that were due to be folded
            into the summary, added up: how far the summaries served lagged behind.
        max_stale_messages: The most any one of them lagged by.
        background_started: Background refreshes these requests started (or queued).
        background_finished: Background refreshes that ended: the summary extended and
            cached, or found already made by another worker.
        background_failed: Background refreshes that failed (summarizer or store); the cache
            was left as it was.
        background_cancelled: Background refreshes cancelled before they ended (a shutdown);
            the cache was left as it was.
        background_dropped: Background refreshes not started because the process's queue was
            full (:mod:`slimcache.background`); the thread's next request offers one again.

    What a background refresh spends (summarizer calls and tokens, store round trips,
    extensions) is counted here too, once it ends; it is no request, so ``requests``,
    ``cache_hits`` and ``naive_input_tokens`` are the requests' own.
    """

    requests: int = 0
    summarizer_calls: int = 0
    summarizer_requests: int = 0
    summarizer_request_tokens: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    naive_input_tokens: int = 0
    cache_hits: int = 0
    extensions: int = 0
    misses: int = 0
    invalidations: int = 0
    uncached: int = 0
    evicted_messages: int = 0
    catch_up_steps: int = 0
    cut_messages: int = 0
    input_ratio: float = 1.0
    length_refusals: int = 0
    store_reads: int = 0
    store_writes: int = 0
    store_deletes: int = 0
    store_batches: int = 0
    store_errors: int = 0
    summarizer_errors: int = 0
    breaker_refused: int = 0
    breaker_opened: int = 0
    breaker_closed: int = 0
    lease_waits: int = 0
    truncated_replies: int = 0
    shorter_retries: int = 0
    truncated_accepted: int = 0
    condensed_over_budget: int = 0
    stale_served: int = 0
    stale_messages: int = 0
    max_stale_messages: int = 0
    background_started: int = 0
    background_finished: int = 0
    background_failed: int = 0
    background_cancelled: int = 0
    background_dropped: int = 0
    cut_over_budget: int = 0
    cancelled_calls: int = 0
    cancelled_input_tokens: int = 0
    invalid_histories: int = 0

    def __copy__(self) -> Stats:
        # A snapshot is taken after every request in some servers: copy the counters as they
        # are, without the generic copy protocol's pickling round (three times as long).
        snapshot = object.__new__(type(self))
        snapshot.__dict__.update(self.__dict__)
        return snapshot

    def add_report(self, report: SummarizerReport, input_tokens: int, *, made: bool) -> int:
        """Count what a summarizer reported about one call sent ``input_tokens``; ``made``:
        whether the call counts as one request when the summarizer counted none (a call
        cancelled before it returned does not). Returns the requests counted."""
        requests = report.requests or int(made)
        self.summarizer_requests += requests
        self.summarizer_request_tokens += requests * input_tokens
        self.truncated_replies += report.truncated_replies
        self.shorter_retries += report.shorter_retries
        self.truncated_accepted += report.truncated_accepted
        return requests

    def served_stale(self, messages: int) -> None:
        """Count one answer served stale, lagging ``messages`` behind."""
        self.stale_served += 1
        self.stale_messages += messages
        self.max_stale_messages = max(self.max_stale_messages, messages)

    def add(self, other: Stats) -> None:
        """Add ``other``'s counters to these, as of two compressors taken together: the counts
        add up, and ``max_stale_messages`` and ``input_ratio`` are the larger of the two."""
        self._combine(other, _NO_NAMES)

    def absorb(self, spent: Stats) -> None:
        """Add what a background refresh spent (counted in ``spent``), but the counters of
        requests: a refresh is none."""
        self._combine(spent, _PER_REQUEST)

    def _combine(self, other: Stats, leave: frozenset[str]) -> None:
        mine = self.__dict__
        for name, value in other.__dict__.items():
            if name in leave:
                continue
            mine[name] = max(mine[name], value) if name in _LARGEST else mine[name] + value

    @property
    def store_round_trips(self) -> int:
        """All store calls made."""
        return self.store_reads + self.store_writes + self.store_deletes + self.store_batches

    @property
    def tokens_saved(self) -> int:
        """Summarizer input tokens saved against re-summarizing on every request."""
        return self.naive_input_tokens - self.summarizer_input_tokens


@dataclass(frozen=True)
class CompressEvent:
    """Passed to the ``on_compress`` and ``on_cache_hit`` hooks.

    Attributes:
        thread_id: The thread, or ``None``.
        outcome: What happened (see :data:`~slimcache.types.Outcome`).
        start: First message index the summary covers.
        end: Last message index the summary covers.
        new_messages: Messages summarized by this call (0 for a cache hit).
        summarizer_calls: Summarizer calls made by this call.
        input_tokens: Tokens sent to the summarizer by this call.
        summary_tokens: Tokens of the resulting summary.
        elapsed: Seconds the call took.
        reason: Why compression was due (``"messages>20"``, ``"forced"``), or ``None``.
        summarizer_requests: Requests those summarizer calls sent, retries included (see
            ``Stats.summarizer_requests``).
    """

    thread_id: str | None
    outcome: Outcome
    start: int
    end: int
    new_messages: int
    summarizer_calls: int
    input_tokens: int
    summary_tokens: int
    elapsed: float
    reason: str | None
    summarizer_requests: int = 0


@dataclass(frozen=True)
class CompressionResult:
    """The full answer of :meth:`SummarizeCompressor.compress_detailed`.

    Attributes:
        messages: The messages to send: pinned system messages, the summary message, then the
            verbatim messages.
        outcome: What happened (see :data:`~slimcache.types.Outcome`).
        summary: The summary text, or ``None`` when nothing is summarized.
        summary_range: ``(start, end)`` message indices the summary covers, or ``None``.
        summarizer_calls: Summarizer calls made by this call.
        cached: Whether the summary is in the store.
        thread_id: The thread, or ``None``.
        input_tokens: Tokens this call sent to the summarizer (0 for a cache hit).
        naive_tokens: Tokens a compressor that re-summarizes everything outside the window on
            every request would have sent for this call (see :attr:`Stats.tokens_saved`).
        stale_messages: For a ``stale`` answer: the messages it carries verbatim that were due
            to be folded into the summary (the summary lags behind by that many); 0 otherwise.
        summarizer_requests: Requests this call's summarizer calls sent, retries included
            (see ``Stats.summarizer_requests``).
    """

    messages: list[dict[str, Any]]
    outcome: Outcome
    summary: str | None = None
    summary_range: tuple[int, int] | None = None
    summarizer_calls: int = 0
    cached: bool = False
    thread_id: str | None = None
    input_tokens: int = 0
    naive_tokens: int = 0
    stale_messages: int = 0
    summarizer_requests: int = 0
