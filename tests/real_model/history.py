"""Conversations for the real-model tier: a trip being planned, with names and numbers."""

from __future__ import annotations

from typing import Any

_TURNS = (
    ("user", "Hi! I'm Ada and I'm planning a trip to Lisbon in May with my brother Tom."),
    ("assistant", "Lovely. How many days, and what budget do you have in mind?"),
    ("user", "Five days, and about 1,800 euros for the two of us, flights included."),
    ("assistant", "That works. Flights from Berlin are around 300 euros each in May."),
    ("user", "Tom is vegetarian, so restaurants need good vegetarian options."),
    ("assistant", "Noted: Lisbon has plenty, the Principe Real area especially."),
    ("user", "We decided to stay in Alfama, in a small guesthouse near the castle."),
    ("assistant", "Good choice, it is walkable and quiet in the evenings."),
    ("user", "Can you suggest a day trip? We like palaces and gardens."),
    ("assistant", "Sintra: take the train from Rossio station, about 40 minutes."),
    ("user", "Great. Our flight lands on May 12 at 14:30."),
    ("assistant", "Then spend the first evening around Alfama and the miradouros."),
    ("user", "Tom wants to see a fado show, ideally on the second night."),
    ("assistant", "Clube de Fado in Alfama takes bookings; dinner is included."),
    ("user", "Let's book it for May 13 then. What about the last day?"),
    ("assistant", "Belem: the tower, the monastery and the custard tarts."),
    ("user", "Perfect. Remind me, what was our total budget again?"),
    ("assistant", "1,800 euros for both of you, flights included."),
)


def trip(count: int) -> list[dict[str, Any]]:
    """A system prompt and the first ``count`` turns of the trip (they repeat past 18)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You plan trips."}]
    for i in range(count):
        role, text = _TURNS[i % len(_TURNS)]
        messages.append({"role": role, "content": text if i < len(_TURNS) else f"{text} ({i})"})
    return messages


def long_history(count: int) -> list[dict[str, Any]]:
    """``count`` distinct messages of plain English (the trip's turns, numbered), about 25
    tokens each: text a model's tokenizer counts close to slimcache's four characters a token
    (a text dense in digits and rare words counts up to twice that)."""
    messages = []
    for i in range(count):
        role, text = _TURNS[i % len(_TURNS)]
        messages.append({"role": role, "content": f"{text} That was message {i}, by the way."})
    return messages
