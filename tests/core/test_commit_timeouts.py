"""A commit whose store call timed out, on a real server: the summary made is cached, once.

The server (moto's DynamoDB, Redis) stops answering (SIGSTOP) at the commit, the batch that
writes a new summary's range and the thread's index, in one of two ways:

* ``landed``: the batch is carried out, then the server stops before its reply reaches the
  request, as when a loaded server answers after the caller's bound;
* ``lost``: the server stops before the batch is sent, so it never is.

The request fails with ``StoreTimeout``. Once the server answers again and the request's
clean-ups in the background have ended, the thread's next request, from another worker, is
served the summary the failed request made: the store lists it, and nobody summarizes the
range again. A landed commit used to be undone (its range deleted under an index listing it),
and a lost one dropped, so the next request summarized the same range a second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import pytest

from slimcache import StoreTimeout
from slimcache.core.store_io import background_done
from slimcache.stores import SetOp, StoreOp
from slimcache.stores.entries import ThreadIndex
from tests.core.test_compressor_faults import FreezeBeforeFirstWrite, Summarizer, compressor
from tests.fakes import chat

pytestmark = pytest.mark.servers

# Only reached when something hangs, so that a hang fails the test instead of the suite.
GUARD = 60.0

Fault = Literal["landed", "lost"]


class StopsAtCommit(FreezeBeforeFirstWrite):
    """Forwards every call to a store; at the first commit batch the server stops answering,
    after the batch was carried out (``landed``) or before it is sent (``lost``)."""

    def __init__(self, inner: Any, server: Any, fault: Fault) -> None:
        super().__init__(inner, server)
        self.fault = fault

    def _before_write(self) -> None:
        """Writes other than the commit go through."""

    @property
    def expiry_clock(self) -> str:
        clock: str = self.inner.expiry_clock
        return clock

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        commit = any(isinstance(op, SetOp) and ":summary:" in op.key for op in ops)
        if not commit or self.fired:
            results: list[Any] = await self.inner.batch(ops)
            return results
        self.fired = True
        if self.fault == "landed":
            await self.inner.batch(ops)
        self.outage.freeze()
        # The reply that never comes: a call to the stopped server, until the bound.
        await self.inner.get(ops[0].key)
        raise AssertionError("the stopped server answered")


@pytest.fixture(params=["dynamodb", "redis"])
def server_and_factory(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    server = request.getfixturevalue(f"{request.param}_server")
    return server, request.getfixturevalue(f"{request.param}_store_factory")


@pytest.mark.parametrize("fault", ["landed", "lost"])
async def test_a_summary_whose_commit_timed_out_is_cached_once_the_store_answers(
    server_and_factory: tuple[Any, Any], fault: Fault
) -> None:
    server, factory = server_and_factory
    store = await factory()
    await store.get("warm-up")  # connections open and tables made, as in a running service
    thread = f"commit-{fault}"
    history = chat(30)
    summarizer = Summarizer()
    stopping = StopsAtCommit(store, server, fault)
    try:
        with pytest.raises(StoreTimeout):
            await asyncio.wait_for(
                compressor(summarizer, stopping).compress_detailed(history, thread_id=thread),
                GUARD,
            )
        assert stopping.fired
    finally:
        server.thaw()
    await asyncio.wait_for(background_done(), GUARD)
    assert summarizer.calls == 1

    # The store lists the summary made, and the lease is free.
    index = ThreadIndex.parse(await store.get(f"thread_{thread}:index"), thread=thread)
    assert index is not None
    head = (index.head.start, index.head.end)
    assert await store.get(f"thread_{thread}:summary:{head[0]}-{head[1]}") is not None
    assert await store.get(f"thread_{thread}:lease") is None

    # The next request, from another worker, is served it: the range is not summarized again.
    after = await asyncio.wait_for(
        compressor(summarizer, store).compress_detailed(history, thread_id=thread), GUARD
    )
    assert after.outcome == "hit"
    assert after.summary_range == head
    assert summarizer.calls == 1
