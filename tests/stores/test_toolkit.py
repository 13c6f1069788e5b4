"""The toolkit's bounded, error-translating call path, shared by the bundled adapters."""

from __future__ import annotations

import asyncio

import pytest

from slimcache import ConfigurationError, StoreError, StoreTimeout
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    BoundedStore,
    CallBoundedStore,
    SupportsCallTimeout,
    check_count,
    driver_timeout,
)


class DriverError(Exception):
    """A driver's own failure."""


class DriverTimeout(DriverError):
    """A driver's own timeout."""


class Bounded(BoundedStore):
    def __init__(self, timeout: object = DEFAULT_STORE_TIMEOUT) -> None:
        self.bound_calls(timeout)


class CallBounded(CallBoundedStore):
    def __init__(self, timeout: float) -> None:
        self.bound_calls(timeout)


async def _hang() -> str:
    await asyncio.sleep(60)
    return "never"


async def _fail(exc: BaseException) -> str:
    raise exc


async def _answer() -> str:
    return "ok"


def test_the_bound_is_checked_and_stated() -> None:
    assert Bounded().timeout == DEFAULT_STORE_TIMEOUT
    assert Bounded("2").timeout == 2.0
    for bad in (0, -1, float("inf"), "soon", None):
        with pytest.raises(ConfigurationError, match="timeout"):
            Bounded(bad)


def test_only_a_call_bounded_store_states_a_call_timeout() -> None:
    assert not isinstance(Bounded(), SupportsCallTimeout)
    store = CallBounded(1.5)
    assert isinstance(store, SupportsCallTimeout)
    assert store.call_timeout == store.timeout == 1.5


@pytest.mark.parametrize("in_place", [True, False])
async def test_a_call_past_the_bound_is_a_store_timeout(in_place: bool) -> None:
    store = Bounded(0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(StoreTimeout, match=r"^Drv GET of key 'a' failed: no answer within 0.05 s$"):
        await store.run_call(_hang(), "Drv GET", "key 'a'", in_place=in_place)
    assert loop.time() - started < 1


async def test_driver_errors_become_store_errors_with_their_cause() -> None:
    store = Bounded()
    error = DriverError("connection reset\nmore detail")
    with pytest.raises(StoreError) as caught:
        await store.run_call(_fail(error), "Drv SET", "key 'b'", errors=(DriverError,))
    assert type(caught.value) is StoreError
    assert str(caught.value) == "Drv SET of key 'b' failed: DriverError: connection reset"
    assert caught.value.__cause__ is error
    with pytest.raises(StoreTimeout, match="DriverTimeout"):
        await store.run_call(
            _fail(DriverTimeout("slow")),
            "Drv SET",
            "key 'b'",
            errors=(DriverError,),
            timeouts=(DriverTimeout,),
        )


async def test_other_errors_pass_through() -> None:
    store = Bounded()
    already = StoreError("already translated")
    with pytest.raises(StoreError) as caught:
        await store.run_call(_fail(already), "Drv", "x", errors=(Exception,))
    assert caught.value is already
    with pytest.raises(KeyError):
        await store.run_call(_fail(KeyError("k")), "Drv", "x", errors=(DriverError,))


async def test_what_is_put_into_words_only_when_a_call_fails() -> None:
    store = Bounded(0.05)
    described: list[str] = []

    def what() -> str:
        described.append("asked")
        return "many keys"

    assert await store.run_call(_answer(), "Drv MGET", what) == "ok"
    assert described == []
    with pytest.raises(StoreTimeout, match="Drv MGET of many keys failed"):
        await store.run_call(_hang(), "Drv MGET", what)
    assert described == ["asked"]


async def test_a_call_given_up_on_is_kept_until_it_unwinds() -> None:
    store = Bounded(0.01)
    unwinding: set[asyncio.Future[object]] = set()
    with pytest.raises(StoreTimeout):
        await store.run_call(_hang(), "Drv", "x", unwinding=unwinding)
    assert len(unwinding) == 1
    await asyncio.wait(set(unwinding), timeout=1)
    assert not unwinding


async def test_a_call_that_settles_in_time_by_itself_gets_no_timer_but_the_same_errors() -> None:
    store = Bounded(timeout=0.05)
    # No timer of its own: a call that says it settles in time is trusted with the bound...
    assert await store.run_call(_answer(), "Drv GET", "key 'a'", settles_in_time=True) == "ok"
    loop = asyncio.get_running_loop()
    started = loop.time()
    slow = asyncio.sleep(0.2, result="late")
    assert await store.run_call(slow, "Drv GET", "key 'a'", settles_in_time=True) == "late"
    assert loop.time() - started >= 0.2
    # ...and what it raises is translated as for any other call.
    with pytest.raises(StoreTimeout, match=r"Drv GET of key 'a' failed: no answer within"):
        await store.run_call(
            _fail(asyncio.TimeoutError()), "Drv GET", "key 'a'", settles_in_time=True
        )
    with pytest.raises(StoreError, match=r"Drv SET of key 'b' failed: DriverError"):
        await store.run_call(
            _fail(DriverError("down")),
            "Drv SET",
            "key 'b'",
            errors=(DriverError,),
            settles_in_time=True,
        )


def test_a_driver_timeout_defaults_to_half_the_bound_and_never_exceeds_it() -> None:
    assert driver_timeout("socket_timeout", None, 5.0) == 2.5
    assert driver_timeout("socket_timeout", "1.5", 5.0) == 1.5
    with pytest.raises(ConfigurationError, match=r"busy_timeout \(6 s\) must not exceed timeout"):
        driver_timeout("busy_timeout", 6, 5.0)
    with pytest.raises(ConfigurationError, match="socket_timeout must be a number of seconds"):
        driver_timeout("socket_timeout", "soon", 5.0)


def test_a_count_option_takes_digits_and_names_its_rule() -> None:
    assert check_count("pool_size", 3) == 3
    assert check_count("pool_size", "3") == 3  # as a URL's query gives it
    assert check_count("max_attempts", "0", minimum=0) == 0
    with pytest.raises(ConfigurationError, match="pool_size must be a positive integer, got 'x'"):
        check_count("pool_size", "x")
    for bad in (0, -1, True, 1.5, None, "1.5"):
        with pytest.raises(ConfigurationError, match="pool_size must be a positive integer, got"):
            check_count("pool_size", bad)
    with pytest.raises(ConfigurationError, match="tries must be an integer of at least 0, got -1"):
        check_count("tries", "-1", minimum=0)
