"""What the summaries keep: planted facts through a long conversation, counted at the end.

Chitchat conversations get ten facts planted in their early user messages (a name, numbers,
dates, decisions, each stated once, among ordinary chat), and are replayed as a stateless chat
server sees them: every request carries the whole history up to a user message. After the last
request, each fact counts as held when the context the model would be sent (the summary and
the verbatim window) still contains it. The methods:

- ``one-shot``: everything outside the window at the last request, summarized in one call
  (no input bound): the best a summary of that size can do with this summarizer.
- ``extend``, ``weighted``, ``concat``, ``hybrid``, ``replace``: slimcache's strategies, each
  summary cached and extended with only the new messages, request after request.
- ``re-summarize``: what a stateful agent does with LangChain's own summarization middleware:
  the summary goes back into the history as a message, and the next compression summarizes it
  again, from scratch, with the messages evicted since.

Summarizers: ``thin`` and ``salient`` are deterministic, with a stated rule (see
:class:`ThinningSummarizer`), so the effect of the extension chain itself shows; and
``openai:MODEL`` / ``anthropic:MODEL`` call a real model, as ``slimcache bench --summarizer``
does (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)::

    uv run python benchmarks/quality.py --summarizer thin -n 20
    uv run python benchmarks/quality.py --summarizer openai:MODEL -n 3 --summary-tokens 200

It prints one Markdown table: per method, the facts held (of all planted), where they were
found, the summarizer calls and input tokens, and the final summary's size.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slimcache import (
    CompressionResult,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    SlimcacheError,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.bench.datasets import (
    BenchConversation,
    load_chitchat,
    request_lengths,
    select_conversations,
)
from slimcache.cli.summarizers import ModelOptions, close_summarizer, make_summarizer
from slimcache.messages import Message, message_text

STRATEGIES = ("extend", "weighted", "concat", "hybrid", "replace")
METHODS = ("one-shot", *STRATEGIES, "re-summarize")
PLANTED_IN = 24
"""Facts go into the user messages among the first this many messages."""

# ---------------------------------------------------------------- the facts


@dataclass(frozen=True)
class Fact:
    """One planted fact: the sentence stated, and the texts that show it was kept."""

    sentence: str
    keys: tuple[str, ...]

    def held_in(self, text: str) -> bool:
        """Whether ``text`` still states this fact (any key, case-insensitive)."""
        lowered = text.lower()
        return any(key.lower() in lowered for key in self.keys)


_NAMES = ("Ingrid", "Tobias", "Marisol", "Dagny", "Oluwaseun", "Ferdinand", "Yevgenia")
_SURNAMES = ("Wren", "Okafor", "Lindqvist", "Brannigan", "Castellanos", "Huxley")
_CITIES = ("Lisbon", "Tallinn", "Oaxaca", "Trondheim", "Valparaiso", "Ljubljana")
_MONTHS = ("March", "April", "June", "September", "October", "November")
_STREETS = ("Rua Augusta", "Calle Alcala", "Nyhavn", "Via Toledo", "Karl Johans gate")
_CARS = ("Volvo", "Subaru", "Peugeot", "Skoda", "Mazda")
_WORDS = ("heron", "juniper", "quartz", "marlin", "sorrel")
_FOODS = ("peanuts", "shellfish", "sesame", "kiwi")


def plant_facts(rng: random.Random) -> list[Fact]:
    """Ten facts with values drawn from ``rng``: names, numbers, dates, decisions."""
    name, surname, city = rng.choice(_NAMES), rng.choice(_SURNAMES), rng.choice(_CITIES)
    month, day = rng.choice(_MONTHS), rng.randint(2, 28)
    locker, budget = rng.randint(1000, 9999), rng.randint(11, 49) * 100 + 50
    street, car, word, food = (rng.choice(x) for x in (_STREETS, _CARS, _WORDS, _FOODS))
    code = f"{word}-{rng.randint(10, 99)}"
    birthday_month, birthday_day = rng.choice(_MONTHS), rng.randint(2, 28)
    return [
        Fact(f"By the way, my sister's name is {name}.", (name,)),
        Fact(f"My gym locker number is {locker}.", (str(locker),)),
        Fact(f"My flight to {city} leaves on {month} {day}.", (f"{month} {day}",)),
        Fact(f"We decided to book the hotel on {street}.", (street,)),
        Fact(f"The budget for the trip is {budget:,} euros.", (f"{budget:,}", str(budget))),
        Fact(f"My manager is called {rng.choice(_NAMES)} {surname}.", (surname,)),
        Fact(f"I'm allergic to {food}.", (food.rstrip("s"),)),
        Fact(
            f"My daughter's birthday is on {birthday_month} {birthday_day}.",
            (f"{birthday_month} {birthday_day}", f"{birthday_day} {birthday_month}"),
        ),
        Fact(f"The wifi password at the cabin is {code}.", (code,)),
        Fact(f"In the end I chose the {car} over the other car.", (car,)),
    ]


@dataclass(frozen=True)
class Planted:
    """A conversation with facts planted in it."""

    messages: list[dict[str, Any]]
    facts: list[Fact]


def planted(conversation: BenchConversation, seed: int) -> Planted | None:
    """The conversation with ten facts added to its early user messages, one each.

    ``None`` when it has fewer than ten user messages among the first :data:`PLANTED_IN`.
    """
    messages = [dict(m) for m in conversation.messages]
    users = [i for i, m in enumerate(messages[:PLANTED_IN]) if m["role"] == "user"][1:]
    facts = plant_facts(random.Random(f"{seed}:{conversation.id}"))
    if len(users) < len(facts):
        return None
    for index, fact in zip(users, facts, strict=False):
        messages[index]["content"] = f"{messages[index]['content']}\n{fact.sentence}"
    return Planted(messages, facts)


# ---------------------------------------------------------------- deterministic summarizers

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_SALIENT = re.compile(r"\d|\s[A-Z][a-z]")


def sentences(text: str) -> list[str]:
    """The sentences of a text: split after ``.``, ``!`` or ``?`` and at line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _tokens(parts: Sequence[str]) -> int:
    return math.ceil(len(" ".join(parts)) / 4)  # slimcache's default count


def _evenly(parts: Sequence[str], budget: int) -> list[int]:
    """The positions of the most parts, spread evenly, whose text fits ``budget`` tokens."""
    count = len(parts)
    if not count or budget <= 0:
        return []
    # Start near the share of the text that fits, then take fewer until the text fits.
    start = min(count, math.ceil(count * budget / max(1, _tokens(parts))) + 2)
    for keep in range(start, 0, -1):
        chosen = sorted({min(count - 1, int((j + 0.5) * count / keep)) for j in range(keep)})
        if _tokens([parts[i] for i in chosen]) <= budget:
            return chosen
    return []


class ThinningSummarizer:
    """A deterministic summarizer that keeps what fits the budget by a stated rule.

    Its input is the previous summary's sentences followed by the messages' sentences, all
    alike. When their text fits ``max_tokens`` (counted as slimcache does by default,
    ``ceil(len / 4)``) it returns them all; otherwise:

    - ``thin``: the most sentences that fit, spread evenly over the input (every k-th);
    - ``salient``: first the sentences holding a digit or a capitalised word after their start
      (names, numbers, dates), spread evenly if they alone do not fit, then the others, spread
      evenly, in what room is left.

    The sentences kept are returned in their order, joined by spaces. Applied again to its own
    output and new messages, a sentence survives each call with the odds the rule gives it,
    which is what an extension chain does to what a summary holds.
    """

    def __init__(self, rule: str) -> None:
        if rule not in ("thin", "salient"):
            raise ValueError(f"rule must be 'thin' or 'salient', got {rule!r}")
        self.rule = rule
        self.name = f"deterministic-{rule}"

    def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Keep what fits ``context.max_tokens`` of the previous summary and the messages."""
        parts = sentences(context.previous_summary or "")
        for message in messages:
            parts.extend(sentences(message_text(message)))
        budget = context.max_tokens
        if _tokens(parts) <= budget:
            return " ".join(parts) or "(nothing)"
        if self.rule == "thin":
            chosen = _evenly(parts, budget)
        else:
            salient = [i for i, part in enumerate(parts) if _SALIENT.search(part)]
            first = [salient[i] for i in _evenly([parts[i] for i in salient], budget)]
            room = budget - _tokens([parts[i] for i in first]) - 1
            rest = [i for i in range(len(parts)) if i not in set(salient)]
            chosen = sorted(first + [rest[i] for i in _evenly([parts[i] for i in rest], room)])
        kept = " ".join(parts[i] for i in chosen)
        return kept or parts[0][: 4 * budget]


# ---------------------------------------------------------------- the methods


@dataclass
class Outcome:
    """What one method kept of one conversation, and what it cost."""

    in_summary: int = 0
    in_window_only: int = 0
    calls: int = 0
    input_tokens: int = 0
    summary_tokens: int = 0
    failure: str | None = None
    summary: str = ""


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
        compressor = _compressor(summarizer, settings, store, strategy=strategy)
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
    in_summary = sum(fact.held_in(summary) for fact in case.facts)
    in_context = sum(fact.held_in(window) for fact in case.facts)
    return Outcome(
        in_summary=in_summary,
        in_window_only=in_context - in_summary,
        calls=calls,
        input_tokens=tokens,
        summary_tokens=math.ceil(len(summary) / 4),
        summary=summary,
    )


# ---------------------------------------------------------------- the report


@dataclass
class Totals:
    """One method's figures over every conversation."""

    held: int = 0
    in_summary: int = 0
    calls: int = 0
    input_tokens: int = 0
    summary_tokens: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        if outcome.failure is not None:
            self.failures.append(outcome.failure)
            return
        self.held += outcome.in_summary + outcome.in_window_only
        self.in_summary += outcome.in_summary
        self.calls += outcome.calls
        self.input_tokens += outcome.input_tokens
        self.summary_tokens.append(outcome.summary_tokens)


def table(totals: dict[str, Totals], planted_facts: int, cases: int) -> str:
    """The Markdown table of the run."""
    lines = [
        "| method | facts held | of them in the summary | summarizer calls | input tokens "
        "| final summary (tokens, mean) | failed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method, total in totals.items():
        ran = cases - len(total.failures)
        facts = planted_facts * ran // cases if cases else 0
        mean = sum(total.summary_tokens) / len(total.summary_tokens) if total.summary_tokens else 0
        lines.append(
            f"| {method} | {total.held} / {facts} | {total.in_summary} | {total.calls:,} "
            f"| {total.input_tokens:,} | {mean:,.0f} | {len(total.failures)} of {cases} |"
        )
    return "\n".join(lines)


def make(spec: str) -> Any:
    """The summarizer ``--summarizer`` names."""
    if spec in ("thin", "salient"):
        return ThinningSummarizer(spec)
    return make_summarizer(spec, ModelOptions(on_truncated="accept"))


async def main(args: argparse.Namespace) -> None:
    """Plant the facts, replay each method, print the table."""
    settings = Settings(args.threshold, args.keep, args.summary_tokens)
    dataset = load_chitchat()
    longest = args.max_messages or len(max(dataset.conversations, key=lambda c: c.turns).messages)
    fitting = [c for c in dataset.conversations if len(c.messages) <= longest]
    pool = select_conversations(
        fitting, count=4 * args.conversations, min_messages=args.min_messages, seed=args.seed
    )
    cases = [c for c in (planted(conv, args.seed) for conv in pool) if c is not None]
    cases = cases[: args.conversations]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown methods {unknown}: choose among {', '.join(METHODS)}")
    summarizer = make(args.summarizer)
    totals = {method: Totals() for method in methods}
    started = time.perf_counter()
    try:
        for number, case in enumerate(cases):
            for method in methods:
                outcome = await run_method(summarizer, method, case, settings)
                totals[method].add(outcome)
                if args.show and number == 0:
                    print(f"--- {method}: {outcome.failure or outcome.summary}\n")
    finally:
        if not isinstance(summarizer, ThinningSummarizer):
            await close_summarizer(summarizer)
    messages = sum(len(c.messages) for c in cases)
    print(
        f"{len(cases)} chitchat conversations ({messages:,} messages), "
        f"{len(cases) * 10} facts planted in the first {PLANTED_IN} messages; summarizer "
        f"{getattr(summarizer, 'name', args.summarizer)}; summarize when > {settings.threshold} "
        f"messages, keep {settings.keep}, summary budget {settings.summary_tokens} tokens; "
        f"{time.perf_counter() - started:.1f} s\n"
    )
    print(table(totals, 10 * len(cases), len(cases)))
    for method, total in totals.items():
        for failure in total.failures[:1]:
            print(f"\n{method} failed: {failure[:300]}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summarizer", default="thin", help="thin, salient, openai:MODEL...")
    parser.add_argument("-n", "--conversations", type=int, default=20)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--threshold", type=int, default=20)
    parser.add_argument("--keep", type=int, default=10)
    parser.add_argument("--summary-tokens", type=int, default=150)
    parser.add_argument("--min-messages", type=int, default=60)
    parser.add_argument(
        "--max-messages", type=int, default=0, help="longest conversation taken (0: any)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--show", action="store_true", help="print the first conversation's summaries"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
