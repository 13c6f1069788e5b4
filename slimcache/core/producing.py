"""Producing a range's summary for a request.

The strategy says how a summary is combined from an earlier one and the new messages; the
producer makes the summarizer calls it asks for, in as many steps as the bound on one call's
input needs, counts what each sent, and builds the entry the new summary is cached as. The
bound follows how many tokens the summarizer's provider counts for slimcache's estimate
(:mod:`slimcache.core.input_ratio`): learned from each reply that reports its usage, raised by
a request refused for its length, whose step is then made again, smaller.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slimcache._exceptions import InputTooLong, SummarizerError
from slimcache.core import recorder as reporting
from slimcache.core.breaker import Breaker, BreakerOpen, breaker_for, no_answer
from slimcache.core.input_bound import InputBound, Step
from slimcache.core.input_ratio import REFUSALS, ratio_for
from slimcache.core.strategies import Strategy
from slimcache.core.summarizer import (
    OnOverBudget,
    Prompts,
    Summarizer,
    SummarizerReport,
    SummaryContext,
    Task,
    call_summarizer,
    input_tokens,
    keep_within_budget,
)
from slimcache.core.tree import Forest, Originals
from slimcache.messages import Message, TokenCounter
from slimcache.stores.entries import RangeRef, SummaryEntry

if TYPE_CHECKING:
    from slimcache.core.request import Work

__all__ = ["Checkpoint", "Emit", "SummaryProducer"]

Emit = Callable[..., Awaitable[None]]
"""Calls the named hook, if one is set, with the given arguments."""

Checkpoint = Callable[[int, str], Awaitable[None]]
"""Caches a step of a catch-up: ``(end, summary)``, the summary of messages up to ``end``."""


@dataclass(frozen=True)
class SummaryProducer:
    """Produces summaries with a strategy and a summarizer, counting what each call sends.

    Attributes:
        summarizer: The summarizer.
        summarizer_id: The summarizer's name, recorded in each entry.
        strategy: How summaries combine.
        prompts: The prompts per task.
        max_tokens: The token budget handed to the summarizer.
        count: The token counter.
        overhead: Tokens added per message.
        timeout: Seconds a summarizer call may take (``None``: unbounded).
        emit: Calls a hook by name.
        bound: What one summarizer call may receive.
        on_over_budget: What a summary still over ``max_tokens`` after the condense call
            becomes (see :func:`~slimcache.core.summarizer.keep_within_budget`).
        breaker_failures: Failed calls in a row that open the summarizer's breaker (see
            :mod:`slimcache.core.breaker`); ``None``: the summarizer is always called.
    """

    summarizer: Summarizer
    summarizer_id: str
    strategy: Strategy
    prompts: Prompts
    max_tokens: int
    count: TokenCounter
    overhead: int
    timeout: float | None
    emit: Emit
    bound: InputBound
    on_over_budget: OnOverBudget
    breaker_failures: int | None

    async def produce(
        self,
        work: Work,
        base: SummaryEntry | None,
        target: RangeRef,
        checkpoint: Checkpoint | None = None,
    ) -> str:
        """Fold the messages after ``base`` up to ``target.end`` into it (or summarize them).

        In one step when they fit ``bound``, else in consecutive steps (see
        :mod:`slimcache.core.input_bound`), each step but the last handed to ``checkpoint``.
        A step the model refuses for its length is made again within the bound that the
        refusal lowered, up to :data:`~slimcache.core.input_ratio.REFUSALS` times a request.

        Raises:
            InputTooLong: One refusal more than that, or one with no bound to lower.
        """
        previous: str | None = None
        if base is not None:  # a tree's parts, when it recorded them
            previous = base.summary
            if base.parts:
                previous = Forest.of(
                    base.summary, base.parts, base.covered_tokens, base.part_messages
                )
        first = base.end + 1 if base is not None else target.start
        refusals = 0
        while True:
            bound = self.scaled_bound()
            step = bound.step(work.checked, first, target.end, previous)
            if isinstance(step.previous, Forest):  # a tree may merge from the messages
                step = dataclasses.replace(
                    step,
                    previous=step.previous.reading(self.originals(work, target, step, bound)),
                )
            try:
                previous = await self.fold(work, step, target.start)
            except InputTooLong:
                refusals += 1
                if bound.limit is None or refusals > REFUSALS:
                    raise
                continue  # the same messages, within the bound the refusal lowered
            if step.end >= target.end:
                return previous
            work.stats.catch_up_steps += 1
            if checkpoint is not None:
                await checkpoint(step.end, previous)
            first = step.end + 1

    def originals(self, work: Work, target: RangeRef, step: Step, bound: InputBound) -> Originals:
        """The messages of ``target`` up to ``step``'s last, as the request has them, each
        counted as a call is sent it, and the room one call has for messages within ``bound``
        (the one ``step`` was made within).

        They are the messages the cached summary ``step`` extends was made from: the entry
        served matched them (its fingerprint), and each earlier step made its part from them.
        """
        end = step.end + 1
        return Originals(
            start=target.start,
            messages=tuple(work.checked.messages[target.start : end]),
            tokens=tuple(work.checked.tokens[target.start : end]),
            room=None if bound.limit is None else bound.limit - bound.prompt_tokens,
        )

    def scaled_bound(self) -> InputBound:
        """``bound`` divided by the ratio learned for the summarizer (see
        :mod:`slimcache.core.input_ratio`)."""
        return self.bound.scaled(ratio_for(self.summarizer_id).in_force())

    async def fold(self, work: Work, step: Step, start: int) -> str:
        """Fold one step's messages into its previous summary with the strategy.

        ``start``: the first message the resulting summary covers.
        """

        async def summarize(
            task: Task,
            messages: Sequence[Message],
            previous: str | None,
            *,
            emphasis: str | None = None,
            max_tokens: int | None = None,
            first: int | None = None,
        ) -> str:
            # The messages begin at the step's first, unless the strategy says where.
            begins = step.first if first is None else first
            budget = self.max_tokens if max_tokens is None else min(max_tokens, self.max_tokens)
            summary = await self.call(
                work,
                task,
                messages,
                previous,
                start if task == "condense" else begins,
                step.end,
                emphasis=emphasis,
                budget=budget,
            )
            if task == "condense":
                return summary
            # A summary over its budget is condensed once, then cut (see keep_within_budget).
            covers = begins if task == "summarize" else start

            async def condense(text: str) -> str:
                return await self.call(work, "condense", [], text, covers, step.end, budget=budget)

            kept = await keep_within_budget(
                summary, budget, self.count, condense, on_over_budget=self.on_over_budget
            )
            work.stats.condensed_over_budget += kept.condensed
            work.stats.cut_over_budget += kept.cut
            return kept.summary

        summary = await self.strategy.combine(
            step.previous,
            step.messages,
            summarize,
            count=self.count,
            max_tokens=self.max_tokens,
        )
        new = work.checked.messages[step.first : step.end + 1]
        work.new_messages += len(new)
        work.stats.evicted_messages += len(new)
        work.stats.cut_messages += step.cut
        await self.emit("on_evict", [dict(m) for m in new], work.reason or "forced")
        return summary

    async def call(
        self,
        work: Work,
        task: Task,
        messages: Sequence[Message],
        previous: str | None,
        start: int,
        end: int,
        *,
        emphasis: str | None = None,
        budget: int | None = None,
    ) -> str:
        """Call the summarizer once for ``task``, counting the tokens it is sent and returns.

        ``budget``: this call's (default: ``max_tokens``).

        A summarizer that failed several times in a row lately is not called while its breaker
        is open (:mod:`slimcache.core.breaker`): :class:`~slimcache.SummarizerError` at once.
        The input tokens its provider reports teach the summarizer's ratio; a refusal for the
        length raises it (:mod:`slimcache.core.input_ratio`).
        """
        budget = self.max_tokens if budget is None else budget
        if previous is not None:
            previous = str(previous)  # plain text: a Forest is counted as any summary is
        breaker, probe = self._admitted(work)
        prompt = self.prompts.render(task, budget, emphasis)
        context = SummaryContext(
            task=task,
            previous_summary=previous,
            max_tokens=budget,
            prompt=prompt,
            thread_id=work.thread_id,
            start=start,
            end=end if messages or task == "condense" else start - 1,
        )
        sent = input_tokens(prompt, messages, previous, self.count, self.overhead)
        work.stats.summarizer_calls += 1
        work.stats.summarizer_input_tokens += sent
        work.calls += 1
        work.input_tokens += sent
        call: Awaitable[str] = call_summarizer(
            self.summarizer, messages, context, timeout=self.timeout
        )
        if reporting.recorder is not None:  # process-wide metrics and a span, when turned on
            call = reporting.recorder.summarize(
                work.thread_id, task, sent, call, self.count, self.summarizer, context.report
            )
        made = True
        try:
            summary = await call
        except asyncio.CancelledError:
            # Cancelled before any reply (the caller went away): counted apart, not as a call
            # made. A call that timed out under summarizer_timeout raised SummarizerError.
            work.stats.summarizer_calls -= 1
            work.stats.summarizer_input_tokens -= sent
            work.stats.cancelled_calls += 1
            work.stats.cancelled_input_tokens += sent
            made = False
            if probe and breaker is not None:
                breaker.released()
            raise
        except SummarizerError as exc:
            self._failed(work, exc, sent, breaker, probe)
            raise
        finally:
            # Counted whether the call returned or raised: a cut reply that failed counts too.
            work.requests += work.stats.add_report(context.report, sent, made=made)
            self._learn(work, context.report, sent)
        work.stats.summarizer_output_tokens += self.count(summary)
        if breaker is not None:
            self._answered(work, breaker)
        return summary

    def _failed(
        self, work: Work, error: SummarizerError, sent: int, breaker: Breaker | None, probe: bool
    ) -> None:
        """Count a call that raised ``error``: a length refusal raises the ratio, and the
        breaker counts the failure, unless the summarizer answered."""
        if isinstance(error, InputTooLong):
            work.stats.length_refusals += 1
            ratio_for(self.summarizer_id).refused(error, sent, self.bound.limit)
        threshold = self.breaker_failures  # a breaker is admitted only when it is set
        if breaker is None or threshold is None:
            return
        if not no_answer(error):
            self._answered(work, breaker)
        elif breaker.failed(probe=probe, threshold=threshold):
            work.stats.breaker_opened += 1
            self._breaker_event("opened")

    def _learn(self, work: Work, report: SummarizerReport, sent: int) -> None:
        """Learn the ratio from the input tokens the provider reported for requests that each
        sent ``sent`` tokens, as estimated; the stats show the ratio in force then."""
        ratio = ratio_for(self.summarizer_id)
        if report.input_tokens is not None and report.input_reports:
            ratio.observed(report.input_tokens / report.input_reports, sent)
        work.stats.input_ratio = ratio.in_force()

    def _admitted(self, work: Work) -> tuple[Breaker | None, bool]:
        """The summarizer's breaker (``None`` when ``breaker_failures`` is) and whether this
        call is its probe.

        Raises:
            BreakerOpen: The breaker is open: the call is not made.
        """
        if self.breaker_failures is None:
            return None, False
        breaker = breaker_for(self.summarizer_id)
        try:
            return breaker, breaker.admit()
        except BreakerOpen:
            work.stats.breaker_refused += 1
            self._breaker_event("refused")
            raise

    def _answered(self, work: Work, breaker: Breaker) -> None:
        if breaker.answered():
            work.stats.breaker_closed += 1
            self._breaker_event("closed")

    def _breaker_event(self, event: str) -> None:
        if reporting.recorder is not None:
            reporting.recorder.breaker(event, self.summarizer)

    def entry(self, thread: str, target: RangeRef, summary: str, covered: int) -> SummaryEntry:
        """The entry ``summary`` of ``target`` is cached as; ``covered``: its messages' tokens.

        A :class:`~slimcache.core.tree.Forest` (what the ``tree`` strategy makes) records its
        layout and the messages each part covers.
        """
        layout = summary.layout if isinstance(summary, Forest) else ()
        counts = summary.messages if isinstance(summary, Forest) else ()
        return SummaryEntry(
            thread=thread,
            start=target.start,
            end=target.end,
            fingerprint=target.fingerprint,
            summary=str(summary),
            summary_tokens=self.count(summary),
            covered_tokens=covered,
            created_at=time.time(),
            summarizer=self.summarizer_id,
            prompt=self.prompts.digest,
            strategy=self.strategy.name,
            parts=layout,
            part_messages=counts,
        )
