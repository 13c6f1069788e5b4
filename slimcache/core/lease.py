"""An owned lease: the right of one worker to summarize for a thread while others wait.

The lease is one store key holding ``"<token> <deadline>"``, written with ``set_if_absent``
and a TTL. Only its holder releases it (compare-and-delete on the token), a holder renews it
while its summarizer runs, and a holder that cannot release (the store failed) keeps trying in
the background until the lease would have expired anyway, so the first request after an outage
does not wait out a stale lease. A renewal whose call failed may still have been carried out
(a store that answered after the caller's bound): the holder then holds either value, and
renews and releases whichever the lease holds.

The deadline in the value is written by the holder's clock. On stores with compare-and-set a
waiter takes a lease over when:

- its value is not one slimcache wrote: no token, or a deadline that is not a finite number;
- the waiter has watched the same value for ``lease_ttl + WATCH_SLACK`` seconds by its own
  monotonic clock. A live holder rewrites the value every ``lease_ttl / 3`` seconds, so a value
  that stays the same that long was left by a worker that is gone, whatever deadline it
  claims (one far in the future, or one written by a clock that runs ahead);
- only on a store whose expiry is the writer's clock (see
  :class:`~slimcache.stores.SupportsOwnExpiry`): its deadline is more than
  :data:`CLOCK_TOLERANCE` seconds in the waiter's past (a holder renews well before its
  deadline, so only a holder whose clock is further behind than that could still be alive).

A store that times expiry by a clock of its own (Redis by its TTL, SQL by the database's time,
the memory store by its own) has already judged a lease that is still there to be live: there
a waiter never reads the deadline against its own clock, and waits for the store's expiry, the
holder's release or the watch. No worker's clock error then makes a live holder lose its lease.

So no lease, whatever it holds, keeps a waiter longer than ``lease_ttl + WATCH_SLACK`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

from slimcache._exceptions import StoreError
from slimcache.core.store_io import StoreIO, in_background, once_the_store_answers
from slimcache.stores.protocol import CompareAndDeleteOp, GetOp, SetIfAbsentOp

__all__ = ["CLOCK_TOLERANCE", "WATCH_SLACK", "Lease", "lease_is_abandoned", "lease_is_foreign"]

logger = logging.getLogger("slimcache")

CLOCK_TOLERANCE = 300.0
"""On a store whose expiry is the writer's clock: seconds a live holder's clock may be behind a
waiter's. A deadline further in the waiter's past than this marks the lease as abandoned at
once."""

WATCH_SLACK = 1.0
"""Seconds beyond ``lease_ttl`` that a waiter watches an unchanged lease value before it counts
as abandoned: room for the holder's renewal call to reach the store."""


def lease_is_foreign(raw: str) -> bool:
    """Whether a lease value cannot be a live slimcache holder's: no token, or a deadline that
    is not a finite number. Such a value is taken over on sight, on every store.

    Args:
        raw: The stored value.
    """
    token, _, deadline = raw.partition(" ")
    try:
        until = float(deadline)
    except ValueError:
        return True
    return not token or not math.isfinite(until)


def lease_is_abandoned(raw: str, now: float, *, tolerance: float = CLOCK_TOLERANCE) -> bool:
    """Whether a lease value can be taken over on sight on a store whose expiry is the writer's
    clock, without watching it.

    True when the value is foreign (:func:`lease_is_foreign`) or its deadline is more than
    ``tolerance`` seconds before ``now``.

    Args:
        raw: The stored value.
        now: The reader's Unix time.
        tolerance: Seconds a live holder's clock may be behind the reader's.
    """
    if lease_is_foreign(raw):
        return True
    return float(raw.partition(" ")[2]) + tolerance < now


class Lease:
    """One worker's claim on a key; see the module docstring.

    Args:
        io: The store calls (the store must have ``set_if_absent``).
        key: The lease key.
        ttl: Seconds the lease lives unless renewed.
        clock: Unix time, replaceable in tests. It writes the deadline shown in the value,
            which other workers compare with their own clocks only on a store whose expiry
            is the writer's clock.
        watch_clock: Monotonic seconds, for how long a waiter has seen one value.
    """

    def __init__(
        self,
        io: StoreIO,
        key: str,
        ttl: float,
        *,
        clock: Callable[[], float] = time.time,
        watch_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.io = io
        self.key = key
        self.ttl = ttl
        self.clock = clock
        self.watch_clock = watch_clock
        self.token = uuid.uuid4().hex
        self.value: str | None = None
        # Values renewals whose calls failed may have written since ``value`` was confirmed.
        self._unsure: list[str] = []
        # The other worker's value this one is waiting on, and since when (watch_clock).
        self._watched: tuple[str, float] | None = None

    @property
    def held(self) -> bool:
        """Whether this worker holds the lease."""
        return self.value is not None

    def _fresh_value(self) -> str:
        return f"{self.token} {self.clock() + self.ttl:.3f}"

    async def acquire(self) -> bool:
        """Take the lease if nobody holds it; return whether this worker now holds it."""
        value = self._fresh_value()
        try:
            won = await self.io.set_if_absent(self.key, value, ttl=self.ttl)
        except StoreError:
            self._clean_up_later(value)
            raise
        if won:
            self.value = value
        return self.held

    async def acquire_and_read(self, keys: Sequence[str]) -> list[str | None] | None:
        """Take the lease if nobody holds it, then read ``keys``: one round trip where the
        store runs batches.

        Returns:
            The values of ``keys`` read right after the lease was taken, or ``None`` when
            another worker holds it.
        """
        if not self.io.batches:
            if not await self.acquire():
                return None
            return await self.io.get_many(keys)
        value = self._fresh_value()
        try:
            results = await self.io.batch(
                [SetIfAbsentOp(self.key, value, self.ttl), *(GetOp(key) for key in keys)]
            )
        except StoreError:
            self._clean_up_later(value)
            raise
        if not results[0]:
            return None
        self.value = value
        return results[1:]

    async def take_over(self, seen: str) -> bool:
        """Take the lease from a holder that abandoned it; see the module docstring.

        Call it with each value read from the lease key while waiting: a value seen unchanged
        for ``ttl + WATCH_SLACK`` seconds counts as abandoned. Only on stores with
        compare-and-set, and only if the lease still holds ``seen``.
        """
        if not self.io.compares or not self._abandoned(seen):
            return False
        value = self._fresh_value()
        try:
            won = await self.io.compare_and_set(self.key, seen, value, ttl=self.ttl)
        except StoreError:
            self._clean_up_later(value)
            raise
        if won:
            logger.warning("took over the abandoned lease %s", self.key)
            self.value = value
            self._watched = None
        return self.held

    def _abandoned(self, seen: str) -> bool:
        """Whether ``seen`` may be taken over now, watching it from its first sight."""
        # Where the store times expiry itself, a lease still there is live by the store's
        # judgement, whatever deadline the holder's clock wrote into it.
        if self.io.expires_itself:
            on_sight = lease_is_foreign(seen)
        else:
            on_sight = lease_is_abandoned(seen, self.clock())
        if on_sight:
            return True
        now = self.watch_clock()
        if self._watched is None or self._watched[0] != seen:
            self._watched = (seen, now)
            return False
        return now - self._watched[1] > self.ttl + WATCH_SLACK

    async def renew(self) -> bool:
        """Push the lease's deadline back; return ``False`` if it is no longer ours.

        The lease is still ours when it holds the value of a renewal whose call failed but
        was carried out all the same: that value is renewed in turn.

        Raises:
            StoreError: The store failed; the renewal may or may not have been carried out.
        """
        if self.value is None or not self.io.compares:
            return False
        value = self._fresh_value()
        for held in [self.value, *reversed(self._unsure)]:
            try:
                won = await self.io.compare_and_set(self.key, held, value, ttl=self.ttl)
            except BaseException:  # a failed or cancelled call may still be carried out
                self._unsure.append(value)
                raise
            if won:
                self.value, self._unsure = value, []
                return True
        logger.warning("lost the lease %s while summarizing", self.key)
        self.value, self._unsure = None, []
        return False

    @contextlib.asynccontextmanager
    async def kept(self) -> AsyncIterator[None]:
        """Renew the lease in the background while the block runs (on stores that can)."""
        if self.value is None or not self.io.compares:
            yield
            return
        task = asyncio.create_task(self._keep_renewing())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep_renewing(self) -> None:
        while self.value is not None:
            await asyncio.sleep(self.ttl / 3)
            try:
                await self.renew()
            except StoreError as exc:
                logger.warning("could not renew the lease %s: %s", self.key, exc)

    async def release(self, *, background_on_failure: bool = True) -> None:
        """Give the lease up, if this worker still holds it.

        Only this worker's own lease is deleted: on stores with compare-and-delete atomically,
        on others after reading it back. If the store fails, the release is retried in the
        background until the lease would have expired anyway.
        """
        value, self.value = self.value, None
        if value is None:
            return
        self._forget_unsure()
        try:
            await self._delete_own(value)
        except StoreError as exc:
            if not background_on_failure:
                raise
            logger.warning("could not release the lease %s, retrying: %s", self.key, exc)
            self._clean_up_later(value)

    def release_op(self) -> CompareAndDeleteOp | None:
        """The operation that releases this lease, to end a batch with; ``None`` if this worker
        holds none or the store cannot compare. Call :meth:`released` once the batch ran."""
        if self.value is None or not self.io.compares:
            return None
        return CompareAndDeleteOp(self.key, self.value)

    def released(self) -> None:
        """Record that a batch carrying :meth:`release_op` ran: the lease is given up."""
        self.value = None
        self._forget_unsure()

    def release_later(self) -> None:
        """Give the lease up in the background, without waiting on the store.

        For a request whose store calls are timing out: the release would likely time out
        too, and the caller should not wait for it.
        """
        value, self.value = self.value, None
        if value is not None:
            self._forget_unsure()
            self._clean_up_later(value)

    def _forget_unsure(self) -> None:
        """Release, in the background, whichever value of a renewal whose call failed the
        lease may hold: the lease is given up under any of them."""
        unsure, self._unsure = self._unsure, []
        for value in unsure:
            self._clean_up_later(value)

    def hold_while(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Keep the lease, renewed, while ``work`` runs in the background, then give it up
        there; this holder gives it up now, without waiting on the store.

        For a commit whose store call timed out: the lease stays with the work that settles
        it, so that no waiter summarizes the range again before the summary is cached.
        """
        if self.value is None:
            in_background(work())
            return
        keeper = Lease(self.io, self.key, self.ttl, clock=self.clock, watch_clock=self.watch_clock)
        keeper.token, keeper.value, self.value = self.token, self.value, None
        keeper._unsure, self._unsure = self._unsure, []
        in_background(keeper._hold_while(work))

    async def _hold_while(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        try:
            async with self.kept():
                await work()
        finally:
            self.release_later()

    def _clean_up_later(self, value: str) -> None:
        """Delete ``value`` from the lease key in the background once the store answers.

        A write that failed on the client's side (a timeout) may still have been carried out
        by the server once it resumed; then nobody owns that lease. Only a lease holding
        exactly ``value`` is deleted, so a lease another worker took since is left alone.
        """
        in_background(self._release_later(value))

    async def _delete_own(self, value: str) -> None:
        if self.io.compares:
            await self.io.compare_and_delete(self.key, value)
        elif await self.io.get(self.key) == value:
            await self.io.delete(self.key)

    async def _release_later(self, value: str) -> None:
        _, _, deadline = value.partition(" ")
        # Until the lease would have expired: counted on the monotonic clock from now, so a
        # wall clock that jumps cannot stretch the retries.
        until = self.watch_clock() + min(float(deadline) - self.clock(), self.ttl)
        try:
            released = await once_the_store_answers(
                functools.partial(self._delete_own, value), until, self.watch_clock
            )
        except StoreError:
            return  # the lease expires on its own
        if released:
            logger.info("released the lease %s after the store recovered", self.key)
