"""Retrying what DynamoDB refused without doing it (throttling), within one call's bound.

Every request of a store call goes through :class:`Attempts`, made with the call's deadline.
A request DynamoDB throttled, or refused because a transaction held its item, did nothing, so
sending it again is safe even for a conditional write (unlike a request that timed out, which
may have been applied). It is sent again after a growing, jittered pause while the pause and
one more attempt (as long as the last one took) still fit before the deadline; after that the
last refusal is raised, and the store turns it into :class:`~slimcache.StoreError`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import ClientError

__all__ = ["RETRIED_CODES", "Attempts", "error_code"]

_T = TypeVar("_T")

RETRIED_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionConflictException",
    }
)
"""Error codes of requests DynamoDB refused without applying them: sent again."""

_FIRST_PAUSE = 0.025
_LONGEST_PAUSE = 1.0


def error_code(exc: ClientError) -> str:
    """The error code of a failed DynamoDB request."""
    return str(exc.response.get("Error", {}).get("Code", ""))


class Attempts:
    """The requests of one store call, each sent again while DynamoDB throttles it.

    Args:
        deadline: ``time.monotonic()`` by which the call must be over.
        sleep: How to pause; replaceable in tests.
    """

    def __init__(self, deadline: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.deadline = deadline
        self._sleep = sleep
        self.retries = 0

    def send(self, request: Callable[..., _T], **arguments: Any) -> _T:
        """Send ``request(**arguments)``, again after a pause each time it is throttled.

        Raises:
            ClientError: DynamoDB refused it for another reason, or still throttled it when
                no further attempt fits before the deadline.
        """
        pause = _FIRST_PAUSE
        while True:
            started = time.monotonic()
            try:
                return request(**arguments)
            except ClientError as exc:
                if error_code(exc) not in RETRIED_CODES:
                    raise
                took = time.monotonic() - started
                wait = random.uniform(pause / 2, pause)
                if time.monotonic() + wait + took >= self.deadline:
                    raise
            self.backoff(wait)
            pause = min(pause * 2, _LONGEST_PAUSE)

    def backoff(self, seconds: float) -> None:
        """Pause before sending a refused request again."""
        self.retries += 1
        self._sleep(seconds)

    def left(self) -> float:
        """Seconds until the deadline (negative past it)."""
        return self.deadline - time.monotonic()
