"""A failing summarizer is remembered: after a few calls in a row that got no answer, calls fail
at once for a cool-down, then one call at a time tries it again.

One :class:`Breaker` per summarizer id, for the whole process: a stateless server that builds a
compressor for each request still shares it. A call counts as failed when the summarizer gave
no answer (it raised: an HTTP error, a dropped connection, a timeout); a reply slimcache refused
(cut twice, empty) is an answer and does not, nor does a request the model refused for its
length. After :data:`FAILURES` failed calls in a row (the compressor's ``breaker_failures``;
``None`` turns the breaker off) the breaker opens: for :data:`COOLDOWN` seconds every call
raises :class:`~slimcache.SummarizerError` at once, which the compressor's
``on_summarizer_error`` (or an integration's degrade) handles as any other failure. Then one
call, the probe, is let through while the others still fail at once: an answer closes the
breaker, a failure opens it again for twice as long (up to :data:`MAX_COOLDOWN`).
"""

from __future__ import annotations

import logging
import threading
import time

from slimcache._exceptions import InputTooLong, SummarizerError
from slimcache._process import PerName, register

__all__ = [
    "COOLDOWN",
    "FAILURES",
    "MAX_COOLDOWN",
    "Breaker",
    "BreakerOpen",
    "breaker_for",
    "cool_downs_over",
    "no_answer",
]

logger = logging.getLogger("slimcache")

FAILURES = 2
"""Failed calls in a row that open a summarizer's breaker."""

COOLDOWN = 30.0
"""Seconds the breaker stays open the first time; doubled each time a probe fails."""

MAX_COOLDOWN = 600.0
"""The longest the breaker stays open."""


class BreakerOpen(SummarizerError):
    """The summarizer was not called: it failed too often lately (its breaker is open)."""


class Breaker:
    """The recent failures of one summarizer, and whether it may be called now.

    Args:
        name: The summarizer's id, for messages.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.failures = 0
        self.cooldown = COOLDOWN
        self.open_until: float | None = None
        self.probing = False
        self._lock = threading.Lock()

    def admit(self) -> bool:
        """Whether the call may go ahead; ``True`` for the probe of an open breaker.

        Raises:
            BreakerOpen: The breaker is open (or another call is probing it).
        """
        with self._lock:
            if self.open_until is None:
                return False
            left = self.open_until - time.monotonic()
            if left > 0 or self.probing:
                raise BreakerOpen(
                    f"{self.name} failed {self.failures} times in a row: not called for "
                    f"{max(left, 0):.0f} s more (one call at a time tries it again then)"
                )
            self.probing = True
            return True

    def answered(self) -> bool:
        """Count a call that got an answer; ``True`` when it closed an open breaker."""
        with self._lock:
            was_open = self.open_until is not None
            self.failures = 0
            self.cooldown = COOLDOWN
            self.open_until = None
            self.probing = False
        if was_open:
            logger.warning("%s answered again: calling it as usual", self.name)
        return was_open

    def failed(self, *, probe: bool, threshold: int) -> bool:
        """Count a call that got no answer; ``True`` when it opened the breaker.

        Args:
            probe: The call was the probe of an open breaker.
            threshold: Failed calls in a row that open it (the compressor's
                ``breaker_failures``).
        """
        with self._lock:
            self.failures += 1
            if probe:
                self.probing = False
                self.cooldown = min(self.cooldown * 2, MAX_COOLDOWN)
            elif self.open_until is not None or self.failures < threshold:
                return False
            self.open_until = time.monotonic() + self.cooldown
            seconds = self.cooldown
        logger.warning(
            "%s failed %d times in a row: not calling it for %.0f s, then one call at a time "
            "tries it again",
            self.name,
            self.failures,
            seconds,
        )
        return True

    def released(self) -> None:
        """A probe that ended without an answer or a failure (cancelled): let another probe."""
        with self._lock:
            self.probing = False


_BREAKERS: PerName[Breaker] = register(
    __name__, "breakers", "the recent failures of each summarizer", PerName(Breaker)
)


def breaker_for(name: str) -> Breaker:
    """The process's breaker of the summarizer ``name``."""
    return _BREAKERS.get(name)


def cool_downs_over() -> None:
    """End every open breaker's cool-down now: the next call of each summarizer probes it
    (when the model is known to be back)."""
    for breaker in _BREAKERS.values():
        with breaker._lock:
            if breaker.open_until is not None:
                breaker.open_until = time.monotonic()


def no_answer(error: SummarizerError) -> bool:
    """Whether ``error`` (from :func:`~slimcache.core.summarizer.call_summarizer`) means the
    summarizer gave no answer: it raised, or timed out, rather than refusing its own reply. A
    request the model refused for its length (:class:`~slimcache.types.InputTooLong`) was
    answered: the model is there, the request was too long."""
    if isinstance(error, InputTooLong):
        return False
    return error.__cause__ is not None and not isinstance(error.__cause__, SummarizerError)
