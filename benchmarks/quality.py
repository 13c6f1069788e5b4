"""What the summaries keep, and where the loss falls: planted facts, counted by position.

Chitchat conversations get ten facts planted through the history every method must summarize
(a name, numbers, dates, decisions, each stated once among ordinary chat, each with keys no
other fact shares, matched whole: see :mod:`benchmarks.quality_facts`): everything before the
last request's final ``--threshold`` messages, the largest verbatim window any method can end
with (an incremental method keeps up to the trigger's size verbatim, one-shot only ``--keep``),
so that no method holds a fact merely by keeping it verbatim. They are replayed as
a stateless chat server sees them: every request carries the whole history up to a user
message. After the last request, each fact counts as held when the context the model would be
sent (the summary and the verbatim window) still contains it, and the facts held are counted
by where they were stated: ``early`` (the first 30% of the summarized history), ``middle``,
``late`` (its last 40%). The methods:

- ``one-shot``: everything outside the window at the last request, summarized in one call
  (no input bound): the best a summary of that size can do with this summarizer.
- ``extend``, ``default`` (the compressor's own default strategy, no ``strategy`` given:
  ``tree``) and any strategy named with ``--strategy NAME`` (repeatable): each summary cached
  and extended by slimcache, request after request, with ``SummarizeCompressor(strategy=NAME)``.
- ``re-summarize`` (``--strategy re-summarize``): what a stateful agent does with LangChain's
  own summarization middleware: the summary goes back into the history as a message, and the
  next compression summarizes it again, from scratch, with the messages evicted since.

Summarizers: the rules ``thin``, ``names-first`` and ``random`` are deterministic (see
:mod:`benchmarks.quality_rules`), so the effect of the way summaries combine shows. A rule
holds 10 to 150 of 200 facts, too few for the counts by position to settle in one planting,
so its figures are pooled over ``--draws`` draws (20 by default): each plants the facts anew,
each in its own stretch of the history but at a place the draw's seed picks, and seeds the
random rule anew. The models ``openai:MODEL`` and ``anthropic:MODEL`` replay the
conversations once, called as ``slimcache bench --summarizer`` calls them
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``). ``--real-model`` is ``--summarizer openai:smollm2``
with fewer, shorter conversations, for the local model::

    uv run python benchmarks/quality.py
    uv run python benchmarks/quality.py --strategy concat --budget 400
    OPENAI_BASE_URL=http://127.0.0.1:8089/v1 uv run python benchmarks/quality.py --real-model

It prints one Markdown table: per summarizer, budget and method, the facts held (of all
planted, and against one-shot), by position (count and survival rate), the early facts'
survival against the late ones', the largest final summary against the budget, and the
summarizer calls and input tokens (and those against ``extend``'s).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.quality_facts import POSITIONS, Planted, planted
from benchmarks.quality_rules import RULES, ThinningSummarizer
from slimcache import (
    CompressionResult,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    SlimcacheError,
    SummarizeCompressor,
)
from slimcache.bench.datasets import (
    BenchConversation,
    load_chitchat,
    request_lengths,
    select_conversations,
)
from slimcache.cli.summarizers import (
    ModelOptions,
    check_endpoint,
    close_summarizer,
    make_summarizer,
)
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.messages import message_text

COMPARED = ("one-shot", "extend", "default")
"""The methods a run compares unless ``--methods`` names others; ``--strategy NAME`` adds one."""
HARNESS_METHODS = ("one-shot", "re-summarize")
"""Methods the harness runs itself; any other name is a strategy of the compressor."""
DEFAULT = "default"
"""The method that gives the compressor no ``strategy``: its own default."""
BUDGETS = (150, 400)
DRAWS = 20
"""Draws each rule's figures are pooled over unless ``--draws`` says otherwise."""
REAL_MODEL = "smollm2"

# ---------------------------------------------------------------- the methods


@dataclass
class Outcome:
    """What one method kept of one conversation, and what it cost."""

    held: dict[str, int] = field(default_factory=dict)
    """Facts the context holds, by position."""
    in_window_only: int = 0
    calls: int = 0
    input_tokens: int = 0
    summary_tokens: int = 0
    failure: str | None = None
    summary: str = ""

    @property
    def in_summary(self) -> int:
        """Facts the summary holds."""
        return sum(self.held.values()) - self.in_window_only


@dataclass(frozen=True)
class Settings:
    """The compression settings every method shares."""

    threshold: int
    keep: int
    summary_tokens: int


def _compressor(
    summarizer: Any, settings: Settings, store: MemoryStore | None = None, **options: Any
) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer,
        store,
        trigger=MessageThreshold(settings.threshold),
        keep=KeepMessages(settings.keep),
        max_summary_tokens=settings.summary_tokens,
        summarizer_id=getattr(summarizer, "name", None),
        **options,
    )


def _strategy(method: str) -> dict[str, Any]:
    return {} if method == DEFAULT else {"strategy": method}


def _requests(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [messages[:length] for length in request_lengths(messages)]


Served = tuple[CompressionResult, str, int, int]
"""The last request's result, the summary its context holds, and the summarizer calls and
input tokens of the method."""


async def one_shot(summarizer: Any, case: Planted, settings: Settings) -> Served:
    """The last request, everything outside the window summarized in one call."""
    compressor = _compressor(summarizer, settings, max_input_tokens=None)
    result = await compressor.compress_detailed(_requests(case.messages)[-1])
    stats = compressor.stats
    return result, result.summary or "", stats.summarizer_calls, stats.summarizer_input_tokens


async def incremental(summarizer: Any, case: Planted, settings: Settings, strategy: str) -> Served:
    """Every request, stateless (a new compressor each), on one store: cached and extended."""
    store = MemoryStore()
    calls = tokens = 0
    for request in _requests(case.messages):
        compressor = _compressor(summarizer, settings, store, **_strategy(strategy))
        result = await compressor.compress_detailed(request, thread_id="quality")
        calls += compressor.stats.summarizer_calls
        tokens += compressor.stats.summarizer_input_tokens
    return result, result.summary or "", calls, tokens


async def resummarized(summarizer: Any, case: Planted, settings: Settings) -> Served:
    """A stateful agent whose summary, a message of its history, is summarized again with
    the messages evicted since (LangChain's ``SummarizationMiddleware`` does this)."""
    compressor = _compressor(summarizer, settings, summary_role="user")
    state: list[dict[str, Any]] = []
    seen = 0
    summary = ""  # the newest summary, a message of the state until summarized again
    for request in _requests(case.messages):
        state += request[seen:]
        seen = len(request)
        result = await compressor.compress_detailed(state)
        state = list(result.messages)
        summary = result.summary or summary
    stats = compressor.stats
    return result, summary, stats.summarizer_calls, stats.summarizer_input_tokens


async def run_method(summarizer: Any, method: str, case: Planted, settings: Settings) -> Outcome:
    """Replay ``case`` with ``method`` and count the facts its last request's context holds."""
    try:
        if method == "one-shot":
            result, summary, calls, tokens = await one_shot(summarizer, case, settings)
        elif method == "re-summarize":
            result, summary, calls, tokens = await resummarized(summarizer, case, settings)
        else:
            served = await incremental(summarizer, case, settings, method)
            result, summary, calls, tokens = served
    except SlimcacheError as exc:
        return Outcome(failure=f"{type(exc).__name__}: {exc}")
    window = "\n".join(message_text(m) for m in result.messages)
    held = {where: 0 for where in POSITIONS}
    in_summary = 0
    for fact in case.facts:
        if fact.held_in(window):
            held[fact.position] += 1
            in_summary += fact.held_in(summary)
    return Outcome(
        held=held,
        in_window_only=sum(held.values()) - in_summary,
        calls=calls,
        input_tokens=tokens,
        summary_tokens=math.ceil(len(summary) / 4),
        summary=summary,
    )


def check_methods(methods: Sequence[str], settings: Settings) -> None:
    """Stop with a message naming ``--strategy`` when the compressor refuses a method's name."""
    for method in methods:
        if method in HARNESS_METHODS:
            continue
        try:
            _compressor(ThinningSummarizer("thin"), settings, MemoryStore(), **_strategy(method))
        except SlimcacheError as exc:
            raise SystemExit(f"--strategy {method!r}: {exc}") from None


# ---------------------------------------------------------------- the report


@dataclass
class Totals:
    """One method's figures over every conversation of a run (or of several, pooled)."""

    held: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POSITIONS, 0))
    planted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POSITIONS, 0))
    calls: int = 0
    input_tokens: int = 0
    size_ratios: list[float] = field(default_factory=list)
    """Each final summary's tokens against its budget."""
    failures: list[str] = field(default_factory=list)

    def add(self, outcome: Outcome, case: Planted, budget: int) -> None:
        """Count one conversation's outcome (a failure counts no fact)."""
        if outcome.failure is not None:
            self.failures.append(outcome.failure)
            return
        for where in POSITIONS:
            self.held[where] += outcome.held.get(where, 0)
            self.planted[where] += case.planted_at(where)
        self.calls += outcome.calls
        self.input_tokens += outcome.input_tokens
        self.size_ratios.append(outcome.summary_tokens / budget)

    def absorb(self, other: Totals) -> None:
        """Add another run's figures to these."""
        for where in POSITIONS:
            self.held[where] += other.held[where]
            self.planted[where] += other.planted[where]
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.size_ratios += other.size_ratios
        self.failures += other.failures

    def rate(self, where: str) -> float:
        """The share of the facts planted at ``where`` that are held (0 when none)."""
        return self.held[where] / self.planted[where] if self.planted[where] else 0.0

    @property
    def total(self) -> int:
        """Facts held, wherever they were stated."""
        return sum(self.held.values())


def _ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator else "-"


HEADER = (
    "| summarizer | budget | method | facts held | vs one-shot | early | middle | late "
    "| early / late | summary / budget (max) | calls | input tokens | vs extend | failed |\n"
    "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _label(method: str) -> str:
    """A method's name in the table: ``default`` says which strategy that is."""
    return f"{DEFAULT} ({DEFAULTS.strategy})" if method == DEFAULT else method


def rows(summarizer: str, budget: str, totals: dict[str, Totals], runs: int) -> list[str]:
    """The table's rows for one summarizer and budget (or ``all``): one per method.

    ``runs`` is the conversations each method replayed, failed ones included.
    """
    base = totals.get("one-shot")
    extend = totals.get("extend")
    lines = []
    for method, total in totals.items():
        planted_all = sum(total.planted.values())
        by_position = [
            f"{total.held[w]}/{total.planted[w]} ({total.rate(w):.0%})" for w in POSITIONS
        ]
        lines.append(
            f"| {summarizer} | {budget} | {_label(method)} | {total.total}/{planted_all} "
            f"| {_ratio(total.total, base.total) if base else '-'} | {' | '.join(by_position)} "
            f"| {_ratio(total.rate('early'), total.rate('late'))} "
            f"| {max(total.size_ratios, default=0):.2f}x | {total.calls:,} "
            f"| {total.input_tokens:,} "
            f"| {_ratio(total.input_tokens, extend.input_tokens) if extend else '-'} "
            f"| {len(total.failures)} of {runs} |"
        )
    return lines


# ---------------------------------------------------------------- the run


def make(spec: str, args: argparse.Namespace, draw: int = 0) -> Any:
    """The summarizer a ``--summarizer`` value names: a rule (``draw`` offsets the random
    rule's seed), or ``openai:MODEL``..."""
    if spec in RULES:
        return ThinningSummarizer(spec, forget=args.forget, seed=args.seed + draw)
    return make_summarizer(spec, ModelOptions(on_truncated="accept"))


def draws(spec: str, args: argparse.Namespace) -> int:
    """How many times a summarizer replays the conversations: ``--draws`` for a rule, each
    draw with the facts planted anew (and the random rule seeded anew), once for a model."""
    return args.draws if spec in RULES else 1


async def measure(
    summarizer: Any,
    methods: Sequence[str],
    cases: Sequence[Planted],
    settings: Settings,
    show: bool,
    progress: bool = False,
) -> dict[str, Totals]:
    """Replay every case with every method, for one summarizer and budget.

    ``show`` prints the first case's summaries; ``progress`` says on stderr which case runs.
    """
    totals = {method: Totals() for method in methods}
    for number, case in enumerate(cases):
        if progress:
            print(f"budget {settings.summary_tokens}: {number + 1}/{len(cases)}", file=sys.stderr)
        for method in methods:
            outcome = await run_method(summarizer, method, case, settings)
            totals[method].add(outcome, case, settings.summary_tokens)
            if show and number == 0:
                text = outcome.failure or outcome.summary
                print(f"--- {method} ({settings.summary_tokens} tokens): {text}\n")
    return totals


def conversations(args: argparse.Namespace) -> list[BenchConversation]:
    """The chitchat conversations the run takes, the same in every draw: those with room for
    the facts (:func:`~benchmarks.quality_facts.planted` needs as many user messages)."""
    dataset = load_chitchat()
    longest = args.max_messages or len(max(dataset.conversations, key=lambda c: c.turns).messages)
    fitting = [c for c in dataset.conversations if len(c.messages) <= longest]
    pool = select_conversations(
        fitting, count=4 * args.conversations, min_messages=args.min_messages, seed=args.seed
    )
    return [c for c in pool if planted(c, args.seed, args.threshold) is not None][
        : args.conversations
    ]


def plant(args: argparse.Namespace, pool: Sequence[BenchConversation], draw: int) -> list[Planted]:
    """``pool`` with the facts planted with the draw's seed (every conversation has room)."""
    cases = [planted(conv, args.seed + draw, args.threshold) for conv in pool]
    return [case for case in cases if case is not None]


async def main(args: argparse.Namespace) -> None:
    """Plant the facts, replay each method with each summarizer and budget, print the table."""
    methods = list(dict.fromkeys([*args.methods, *args.strategy]))
    check_methods(methods, Settings(args.threshold, args.keep, args.budget[0]))
    pool = conversations(args)
    plantings = [
        plant(args, pool, draw) for draw in range(max(draws(s, args) for s in args.summarizer))
    ]
    cases = plantings[0]
    lines = [HEADER]
    pooled = {method: Totals() for method in methods}
    runs = 0
    started = time.perf_counter()
    for spec in args.summarizer:
        try:
            summarizer = make(spec, args)
            await check_endpoint(summarizer)
        except SlimcacheError as exc:
            raise SystemExit(f"--summarizer {spec}: {exc}") from None
        try:
            for budget in args.budget:
                settings = Settings(args.threshold, args.keep, budget)
                real = not isinstance(summarizer, ThinningSummarizer)
                totals = await measure(summarizer, methods, cases, settings, args.show, real)
                replayed = len(cases)
                for draw in range(1, draws(spec, args)):
                    again = make(spec, args, draw)
                    for method, total in (
                        await measure(again, methods, plantings[draw], settings, False)
                    ).items():
                        totals[method].absorb(total)
                    replayed += len(plantings[draw])
                runs += replayed
                lines += rows(spec, str(budget), totals, replayed)
                for method, total in totals.items():
                    pooled[method].absorb(total)
                    for failure in total.failures[:1]:
                        print(f"{spec}, {budget}, {method} failed: {failure[:300]}")
        finally:
            if not isinstance(summarizer, ThinningSummarizer):
                await close_summarizer(summarizer)
    if len(args.summarizer) * len(args.budget) > 1:
        lines += rows("all", "all", pooled, runs)
    messages = sum(len(c.messages) for c in cases)
    facts = sum(len(c.facts) for c in cases)
    print(
        f"{len(cases)} chitchat conversations ({messages:,} messages), {facts} facts planted "
        f"before the last {args.threshold} messages; summarize when > {args.threshold} messages, "
        f"keep {args.keep}"
        + (
            f"; each rule's figures pooled over {args.draws} draws (seeds {args.seed}-"
            f"{args.seed + args.draws - 1}), each planting the facts anew"
            if any(spec in RULES for spec in args.summarizer) and args.draws > 1
            else ""
        )
        + (
            f"; random rule forgets {args.forget:.0%} per call"
            if "random" in args.summarizer
            else ""
        )
        + f"; {time.perf_counter() - started:.1f} s\n"
    )
    print("\n".join(lines))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``--real-model`` fills in the summarizer and a smaller run)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--summarizer",
        action="append",
        help=f"{', '.join(RULES)} (default: all three), openai:MODEL, anthropic:MODEL; repeatable",
    )
    parser.add_argument(
        "--strategy",
        action="append",
        default=[],
        help="a strategy SummarizeCompressor takes, 're-summarize' or 'default', compared with "
        f"{' and '.join(COMPARED)}; repeatable",
    )
    parser.add_argument(
        "--methods",
        default=",".join(COMPARED),
        help="the methods compared, comma-separated (default: %(default)s)",
    )
    parser.add_argument(
        "--budget",
        "--summary-tokens",
        type=int,
        action="append",
        help=f"summary budget in tokens; repeatable (default: {', '.join(map(str, BUDGETS))})",
    )
    parser.add_argument(
        "--real-model",
        action="store_true",
        help=f"summarize with openai:{REAL_MODEL} (OPENAI_BASE_URL), 2 conversations of 60-70 "
        "messages unless told otherwise",
    )
    parser.add_argument(
        "--openai-base-url", help="the OpenAI-compatible server (sets OPENAI_BASE_URL)"
    )
    parser.add_argument("--model", default=REAL_MODEL, help="the model --real-model calls")
    parser.add_argument("-n", "--conversations", type=int)
    parser.add_argument("--threshold", type=int, default=20)
    parser.add_argument("--keep", type=int, default=10)
    parser.add_argument("--min-messages", type=int, default=60)
    parser.add_argument(
        "--max-messages", type=int, help="longest conversation taken (default: any)"
    )
    parser.add_argument("--forget", type=float, default=0.2, help="the random rule's odds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--draws",
        type=int,
        default=DRAWS,
        help="times each rule replays the conversations, pooled: each draw plants the facts "
        "anew, with its own seed, and seeds the random rule (default: %(default)s; one draw "
        "holds 10 to 150 facts, whose counts by position move by a third from seed to seed)",
    )
    parser.add_argument(
        "--show", action="store_true", help="print the first conversation's summaries"
    )
    args = parser.parse_args(argv)
    if args.openai_base_url:
        os.environ["OPENAI_BASE_URL"] = args.openai_base_url
        os.environ.setdefault("OPENAI_API_KEY", "none")  # a local server takes any key
        args.real_model = True
    real = args.real_model and not args.summarizer
    args.summarizer = [f"openai:{args.model}"] if real else (args.summarizer or list(RULES))
    args.budget = args.budget or list(BUDGETS)
    args.methods = [method.strip() for method in args.methods.split(",") if method.strip()]
    if not args.methods + args.strategy:
        parser.error("--methods names no method")
    if args.conversations is None:
        args.conversations = 2 if args.real_model else 20
    if args.max_messages is None:
        args.max_messages = 70 if args.real_model else 0
    for name in ("conversations", "threshold", "keep", "draws"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if any(budget < 1 for budget in args.budget):
        parser.error("--budget must be at least 1")
    if not 0 <= args.forget < 1:
        parser.error("--forget must be in [0, 1)")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
