"""The facts ``benchmarks/quality.py`` plants: their values, where they go, how they are matched.

Each conversation gets ten facts (a sister's name, a locker number, a flight date, a hotel's
street, a budget, a manager's surname, an allergy, a birthday, a wifi password, a car), one per
user message, spread evenly over the part of the history every method must summarize
(everything but the leading system messages and the largest verbatim window any method can end
with: the trigger's size, not ``keep``, since an incremental method summarizes only once its
window passes the trigger), in an order drawn per conversation, so every kind of fact lands
early in some conversations and late in others. No method holds a fact merely by keeping its
message verbatim.

Every fact has keys that no other fact of its conversation can match: each kind draws from a
pool of its own (the sister's and the manager's first names, the flight's and the birthday's
months are different pools; the locker numbers and the budgets are different ranges), and a
value whose key already occurs in the conversation, or in another fact, is drawn again. A key
matches only as a whole (case-insensitive, not inside a longer word or number): the date key
"June 2" does not match "June 21", nor "2,350" match "12,350".

A fact's position is where it stands in that history: ``early`` in
its first 30%, ``late`` in its last 40%, ``middle`` between.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slimcache.bench.datasets import BenchConversation, request_lengths

POSITIONS = ("early", "middle", "late")
EARLY_END = 0.3
"""A fact in the first this share of the summarized history is ``early``."""
LATE_START = 0.6
"""A fact from this share of the summarized history on (its last 40%) is ``late``."""
_WITHIN_STRETCH = (0.15, 0.85)
"""Where in its stretch of the history a fact may be planted: away from the stretch's ends, so
that it stays at the stretch's position (``early``, ``middle``, ``late``)."""


def position(index: int, start: int, end: int) -> str:
    """Where message ``index`` stands in the history ``[start, end)``: early, middle or late.

    Raises:
        ValueError: ``index`` is outside ``[start, end)``.
    """
    if not start <= index < end:
        raise ValueError(f"index must be in [{start}, {end}), got {index}")
    share = (index - start) / (end - start)
    if share < EARLY_END:
        return "early"
    return "late" if share >= LATE_START else "middle"


@functools.lru_cache(maxsize=4096)
def key_pattern(key: str) -> re.Pattern[str]:
    """``key`` as a whole: not inside a longer word or number ("June 2" is not in "June 21")."""
    return re.compile(rf"(?<!\w)(?<!\d[.,]){re.escape(key)}(?!\w|[.,]\d)", re.IGNORECASE)


@dataclass(frozen=True)
class Fact:
    """One planted fact: the sentence stated, the keys that show it was kept, and where it is.

    Attributes:
        kind: Which of the ten kinds (``sister``, ``locker``...).
        sentence: What the user says.
        keys: Any of them, as a whole, in a text means the text still states the fact.
        index: The message it is planted in (-1 until planted).
        position: ``early``, ``middle`` or ``late`` (empty until planted).
    """

    kind: str
    sentence: str
    keys: tuple[str, ...]
    index: int = -1
    position: str = ""

    def held_in(self, text: str) -> bool:
        """Whether ``text`` still states this fact (any key, whole, case-insensitive)."""
        return any(key_pattern(key).search(text) for key in self.keys)


_SISTERS = ("Ingrid", "Marisol", "Dagny", "Yevgenia", "Annelise", "Ottilie", "Rosalind", "Thandiwe")
_MANAGER_FIRST = ("Tobias", "Ferdinand", "Oluwaseun", "Casimir", "Leopold", "Anselm")
_SURNAMES = ("Wren", "Okafor", "Lindqvist", "Brannigan", "Castellanos", "Huxley", "Vasquez")
_CITIES = ("Lisbon", "Tallinn", "Oaxaca", "Trondheim", "Valparaiso", "Ljubljana")
_FLIGHT_MONTHS = ("March", "April", "May", "June", "July", "August")
_BIRTHDAY_MONTHS = ("January", "February", "September", "October", "November", "December")
_STREETS = ("Rua Augusta", "Calle Alcala", "Nyhavn", "Via Toledo", "Karl Johans gate")
_CARS = ("Volvo", "Subaru", "Peugeot", "Skoda", "Mazda")
_WORDS = ("heron", "juniper", "quartz", "marlin", "sorrel")
_FOODS = (("peanuts", "peanut"), ("shellfish",), ("sesame",), ("kiwi", "kiwis"), ("lupin",))


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _date_keys(month: str, day: int) -> tuple[str, ...]:
    nth = _ordinal(day)
    return (
        f"{month} {day}",
        f"{day} {month}",
        f"{month} {nth}",
        f"{nth} {month}",
        f"{nth} of {month}",
    )


def _sister(rng: random.Random) -> Fact:
    name = rng.choice(_SISTERS)
    return Fact("sister", f"By the way, my sister's name is {name}.", (name,))


def _locker(rng: random.Random) -> Fact:
    locker = rng.randint(5000, 9999)  # the budgets are below 5,000
    return Fact("locker", f"My gym locker number is {locker}.", (str(locker),))


def _flight(rng: random.Random) -> Fact:
    city, month, day = rng.choice(_CITIES), rng.choice(_FLIGHT_MONTHS), rng.randint(1, 28)
    return Fact("flight", f"My flight to {city} leaves on {month} {day}.", _date_keys(month, day))


def _hotel(rng: random.Random) -> Fact:
    street = rng.choice(_STREETS)
    return Fact("hotel", f"We decided to book the hotel on {street}.", (street,))


def _budget(rng: random.Random) -> Fact:
    budget = rng.randint(11, 49) * 100 + 50
    sentence = f"The budget for the trip is {budget:,} euros."
    return Fact("budget", sentence, (f"{budget:,}", str(budget)))


def _manager(rng: random.Random) -> Fact:
    first, surname = rng.choice(_MANAGER_FIRST), rng.choice(_SURNAMES)
    return Fact("manager", f"My manager is called {first} {surname}.", (surname,))


def _allergy(rng: random.Random) -> Fact:
    food = rng.choice(_FOODS)
    return Fact("allergy", f"I'm allergic to {food[0]}.", food)


def _birthday(rng: random.Random) -> Fact:
    month, day = rng.choice(_BIRTHDAY_MONTHS), rng.randint(1, 28)
    sentence = f"My daughter's birthday is on {month} {day}."
    return Fact("birthday", sentence, _date_keys(month, day))


def _wifi(rng: random.Random) -> Fact:
    code = f"{rng.choice(_WORDS)}-{rng.randint(10, 99)}"
    return Fact("wifi", f"The wifi password at the cabin is {code}.", (code,))


def _car(rng: random.Random) -> Fact:
    car = rng.choice(_CARS)
    return Fact("car", f"In the end I chose the {car} over the other car.", (car,))


KINDS: tuple[Callable[[random.Random], Fact], ...] = (
    _sister,
    _locker,
    _flight,
    _hotel,
    _budget,
    _manager,
    _allergy,
    _birthday,
    _wifi,
    _car,
)
"""The kinds of fact, each drawing its value from a pool of its own."""


def plant_facts(rng: random.Random, background: str = "") -> list[Fact]:
    """One fact of each kind, values drawn from ``rng``, in an order drawn from ``rng``.

    A value is drawn again while one of its keys occurs in ``background`` or in a fact already
    drawn, or a key of a fact already drawn occurs in its sentence.

    Raises:
        ValueError: No value of some kind is clear of the others after many draws.
    """
    facts: list[Fact] = []
    for kind in KINDS:
        for _ in range(200):
            fact = kind(rng)
            taken = " ".join([background, *(f.sentence for f in facts)])
            if not fact.held_in(taken) and not any(f.held_in(fact.sentence) for f in facts):
                facts.append(fact)
                break
        else:
            raise ValueError(f"no {kind.__name__.strip('_')} value is clear of the text")
    rng.shuffle(facts)
    return facts


@dataclass(frozen=True)
class Planted:
    """A conversation with facts planted in it.

    Attributes:
        messages: The conversation, facts added to some user messages.
        facts: The facts, in the order of the messages they are in.
        span: ``(start, end)``: the messages every method's last summary covers.
    """

    messages: list[dict[str, Any]]
    facts: list[Fact]
    span: tuple[int, int]

    def planted_at(self, where: str) -> int:
        """How many facts are at position ``where``."""
        return sum(fact.position == where for fact in self.facts)


def summarized_span(messages: Sequence[dict[str, Any]], window: int) -> tuple[int, int]:
    """The messages every method's last summary covers: after the leading system messages,
    before the last ``window`` messages of the last request (the largest verbatim window a
    method can end with: the trigger's size)."""
    start = 0
    while start < len(messages) and messages[start].get("role") == "system":
        start += 1
    lengths = request_lengths(messages)
    return start, (lengths[-1] - window if lengths else start)


def planted(conversation: BenchConversation, seed: int, window: int) -> Planted | None:
    """The conversation with ten facts spread evenly over the history every summary covers.

    Fact ``j`` of ``n`` goes into the user message nearest to a point drawn at random within
    the ``j``-th ``n``-th of the span :func:`summarized_span` gives (``(j + u) / n``, ``u``
    drawn by ``seed`` from the middle 70% of ``[0, 1)``), a message holding at most one fact:
    every stretch of the span gets a fact, and where in its stretch changes from seed to seed,
    so that a rule keeping every k-th sentence does not keep the same places in every draw.
    ``None`` when the span has fewer user messages than facts.
    """
    messages = [dict(m) for m in conversation.messages]
    start, end = summarized_span(messages, window)
    users = [i for i in range(start, end) if messages[i]["role"] == "user"]
    background = "\n".join(str(m.get("content", "")) for m in messages)
    rng = random.Random(f"{seed}:{conversation.id}")
    facts = plant_facts(rng, background)
    if len(users) < len(facts):
        return None
    placed: list[Fact] = []
    for j, fact in enumerate(facts):
        target = start + (j + rng.uniform(*_WITHIN_STRETCH)) * (end - start) / len(facts)
        index = min(users, key=lambda i: abs(i - target))
        users.remove(index)
        messages[index]["content"] = f"{messages[index]['content']}\n{fact.sentence}"
        where = position(index, start, end)
        placed.append(Fact(fact.kind, fact.sentence, fact.keys, index, where))
    return Planted(messages, sorted(placed, key=lambda f: f.index), (start, end))
