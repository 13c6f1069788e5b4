"""The deterministic summarizers of ``benchmarks/quality.py``: a stated rule instead of a model.

A real model says how well *it* keeps facts; a rule shows what the way summaries are combined
does to them. Each rule reads the previous summary's sentences and the messages' sentences
alike, keeps some, and returns them in their order, joined by spaces:

- ``thin``: all of them when they fit the budget (counted as slimcache does by default,
  ``ceil(len / 4)``), otherwise the most that fit, spread evenly over the input (every k-th);
- ``names-first``: the same, but first the sentences holding a digit or a capitalised word
  after their start (names, numbers, dates), spread evenly if they alone do not fit, then the
  others, spread evenly, in the room left;
- ``random``: forgets a random share (``forget``, a fifth by default) of the sentences, even
  when all would fit, then keeps a random selection of the rest that fits the budget. The
  draws are seeded by the rule's seed and the call's input, so a run repeats exactly and two
  methods sending the same input get the same summary.

Applied again to its own output and new messages, a sentence survives each call with the odds
the rule gives it, which is what an extension chain does to what a summary holds.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence

from slimcache import SummaryContext
from slimcache.messages import Message, message_text

RULES = ("thin", "names-first", "random")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_SALIENT = re.compile(r"\d|\s[A-Z][a-z]")


def sentences(text: str) -> list[str]:
    """The sentences of a text: split after ``.``, ``!`` or ``?`` and at line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def tokens(parts: Sequence[str]) -> int:
    """The tokens of the parts joined by spaces, counted as ``ceil(len / 4)``."""
    return math.ceil(len(" ".join(parts)) / 4)


def evenly(parts: Sequence[str], budget: int) -> list[int]:
    """The positions of the most parts, spread evenly, whose text fits ``budget`` tokens."""
    count = len(parts)
    if not count or budget <= 0:
        return []
    # Start near the share of the text that fits, then take fewer until the text fits.
    start = min(count, math.ceil(count * budget / max(1, tokens(parts))) + 2)
    for keep in range(start, 0, -1):
        chosen = sorted({min(count - 1, int((j + 0.5) * count / keep)) for j in range(keep)})
        if tokens([parts[i] for i in chosen]) <= budget:
            return chosen
    return []


def _at_random(parts: Sequence[str], budget: int, forget: float, rng: random.Random) -> list[int]:
    """Forget each part with odds ``forget``, then keep parts in a random order while they fit."""
    order = [i for i in range(len(parts)) if rng.random() >= forget]
    rng.shuffle(order)
    chosen: list[int] = []
    length = -1  # the characters of the chosen parts joined by spaces
    for i in order:
        if math.ceil((length + 1 + len(parts[i])) / 4) <= budget:
            chosen.append(i)
            length += 1 + len(parts[i])
    return sorted(chosen)


class ThinningSummarizer:
    """A deterministic summarizer that keeps what fits the budget by a stated rule.

    Args:
        rule: ``thin``, ``names-first`` or ``random`` (see the module's docstring).
        forget: For ``random``: the odds that a sentence is forgotten on a call.
        seed: For ``random``: seeds the draws, with the call's input.

    Raises:
        ValueError: An unknown rule, or ``forget`` outside ``[0, 1)``.
    """

    def __init__(self, rule: str, *, forget: float = 0.2, seed: int = 0) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
        if not 0 <= forget < 1:
            raise ValueError(f"forget must be in [0, 1), got {forget!r}")
        self.rule = rule
        self.forget = forget
        self.seed = seed
        self.name = f"deterministic-{rule}" + (f"-{forget:g}" if rule == "random" else "")

    def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        """Keep what the rule keeps of the previous summary and the messages."""
        parts = sentences(context.previous_summary or "")
        for message in messages:
            parts.extend(sentences(message_text(message)))
        budget = context.max_tokens
        if self.rule == "random":
            rng = random.Random("\n".join([str(self.seed), str(budget), *parts]))
            chosen = _at_random(parts, budget, self.forget, rng)
        elif tokens(parts) <= budget:
            return " ".join(parts) or "(nothing)"
        elif self.rule == "thin":
            chosen = evenly(parts, budget)
        else:
            salient = [i for i, part in enumerate(parts) if _SALIENT.search(part)]
            first = [salient[i] for i in evenly([parts[i] for i in salient], budget)]
            room = budget - tokens([parts[i] for i in first]) - 1
            taken = set(salient)
            rest = [i for i in range(len(parts)) if i not in taken]
            chosen = sorted(first + [rest[i] for i in evenly([parts[i] for i in rest], room)])
        kept = " ".join(parts[i] for i in chosen)
        return kept or (parts[0][: 4 * budget] if parts else "(nothing)")
