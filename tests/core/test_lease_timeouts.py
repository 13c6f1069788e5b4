"""A lease renewal whose store call timed out, on a real server: the holder keeps its lease.

The server (Redis, moto's DynamoDB) stops answering (SIGSTOP) at a renewal, in one of two ways:

* ``landed``: the compare-and-set is carried out, then the server stops before its reply
  reaches the holder, as when a loaded server answers after the caller's bound;
* ``lost``: the server stops before the call is sent, so it never is.

The renewal fails with a store error. Once the server answers again, the holder still holds
the lease whichever it was: its next renewal succeeds, and its release leaves no lease behind.
A landed renewal used to make the holder think the lease lost (the lease held a value it did
not know), so that it stopped renewing and released nothing, and waiters sat out the TTL.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Literal

import pytest

from slimcache import StoreError
from slimcache.core.lease import Lease
from slimcache.core.results import Stats
from slimcache.core.store_io import StoreIO, background_done

pytestmark = pytest.mark.servers

# Only reached when something hangs, so that a hang fails the test instead of the suite.
GUARD = 60.0
TTL = 30.0
CALM = 20.0
"""The bound on the holder's store calls while the server answers (moto answers one request at a
time, slowly on a loaded machine)."""
STOPPED = 1.0
"""The bound on the renewal at which the server stops."""

Fault = Literal["landed", "lost"]


class StopsAtRenewal:
    """Forwards every call to a store; at the first compare-and-set once armed, the server stops
    answering, after the call was carried out (``landed``) or before it is sent (``lost``)."""

    def __init__(self, inner: Any, server: Any, fault: Fault) -> None:
        self.inner = inner
        self.server = server
        self.fault = fault
        self.armed = False
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        if not self.armed or self.fired:
            won: bool = await self.inner.compare_and_set(key, expected, value, ttl=ttl)
            return won
        self.fired = True
        if self.fault == "landed":
            assert await self.inner.compare_and_set(key, expected, value, ttl=ttl)
        self.server.freeze()
        await self.inner.get(key)  # the reply that never comes, until the bound
        raise AssertionError("the stopped server answered")


@pytest.fixture(params=["redis", "dynamodb"])
def server_and_factory(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    server = request.getfixturevalue(f"{request.param}_server")
    return server, request.getfixturevalue(f"{request.param}_store_factory")


async def _renewal_times_out(
    server_and_factory: tuple[Any, Any], fault: Fault
) -> tuple[Any, Lease, str]:
    """A holder whose renewal timed out, the server answering again: the store, the holder and
    the value the holder had before the renewal."""
    server, factory = server_and_factory
    store = await factory()  # the suite's bound for the server, ample on a loaded machine
    await store.get("warm-up")  # connections open and tables made, as in a running service
    stopping = StopsAtRenewal(store, server, fault)
    calm = StoreIO(stopping, Stats(), timeout=CALM, ttl=None)
    short = StoreIO(stopping, Stats(), timeout=STOPPED, ttl=None)
    # A clock that moves a second per reading: each value the holder writes is a new one.
    ticks = itertools.count(time.time())
    holder = Lease(calm, f"lease-{fault}", TTL, clock=lambda: next(ticks))
    assert await holder.acquire()
    before = holder.value
    assert before is not None
    stopping.armed = True
    holder.io = short  # only the renewal at which the server stops has the short bound
    try:
        with pytest.raises(StoreError):
            await asyncio.wait_for(holder.renew(), GUARD)
        assert stopping.fired
    finally:
        server.thaw()
        holder.io = calm
    return store, holder, before


@pytest.mark.parametrize("fault", ["landed", "lost"])
async def test_a_holder_whose_renewal_timed_out_renews_and_releases_its_lease(
    server_and_factory: tuple[Any, Any], fault: Fault
) -> None:
    store, holder, before = await _renewal_times_out(server_and_factory, fault)
    if fault == "landed":
        assert await store.get(holder.key) not in (None, before)  # a value it was not told of
    else:
        assert await store.get(holder.key) == before
    # Still the holder's: renewed, then released, with nothing left behind.
    assert await asyncio.wait_for(holder.renew(), GUARD)
    assert holder.held
    assert await store.get(holder.key) == holder.value
    await asyncio.wait_for(holder.release(), GUARD)
    assert await store.get(holder.key) is None


@pytest.mark.parametrize("fault", ["landed", "lost"])
async def test_a_holder_whose_renewal_timed_out_releases_the_lease_it_may_hold(
    server_and_factory: tuple[Any, Any], fault: Fault
) -> None:
    store, holder, _ = await _renewal_times_out(server_and_factory, fault)
    await asyncio.wait_for(holder.release(), GUARD)
    await asyncio.wait_for(background_done(), GUARD)
    assert await store.get(holder.key) is None
