"""A toolkit for store adapter authors: the checks, error rules and lifetime stores share.

The bundled adapters (Redis, SQL, S3) are built on it and import nothing private from slimcache;
a third-party adapter can do the same::

    from slimcache.stores.toolkit import ClosingStore, translate_errors, validate_ttl

    class MyStore(ClosingStore):
        async def get(self, key: str) -> str | None:
            self.check_open("get")
            with translate_errors("MyStore get", repr(key), (MyDriverError, OSError)):
                return await self._client.get(key)

        async def aclose(self) -> None:
            self.mark_closed()

The rules they share:

- **Errors.** Every driver failure becomes :class:`~slimcache.StoreError` naming the operation
  and the key, with the driver's exception chained as ``__cause__`` (a
  :class:`~slimcache.StoreTimeout` when the server did not answer in time); a bad argument is a
  :class:`~slimcache.ConfigurationError` raised before anything is sent.
- **Timeouts.** Every call is bounded: ``DEFAULT_STORE_TIMEOUT`` seconds unless configured,
  checked with :func:`check_seconds`, and enforced with :func:`run_bounded`, which returns at
  the bound even when the cancelled driver call takes long to unwind. A store whose every call
  is bounded so says with a ``call_timeout`` property
  (:class:`~slimcache.stores.SupportsCallTimeout`), and the compressor then sets no timer of
  its own.
- **Options.** A ``from_url`` option may be given in the URL's query or as a keyword argument,
  never both: :func:`combine_options` raises instead of silently picking one.
- **Values.** Bytes that are not UTF-8 (written by some other program) are decoded with
  replacement characters and logged by :func:`decode_value`, never raised: slimcache then sees
  a value it cannot parse, which is a cache miss that the next write repairs.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from slimcache._exceptions import ConfigurationError, StoreError, StoreTimeout
from slimcache.stores.protocol import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
    check_ops,
    positive_int,
    validate_ttl,
)

__all__ = [
    "DEFAULT_STORE_TIMEOUT",
    "BoundedStore",
    "CallBoundedStore",
    "ClosingStore",
    "check_count",
    "check_ops",
    "check_seconds",
    "combine_options",
    "decode_value",
    "driver_timeout",
    "positive_int",
    "redact_url",
    "reject_unknown_options",
    "run_bounded",
    "run_op",
    "store_error",
    "translate_errors",
    "validate_ttl",
]

logger = logging.getLogger("slimcache")

DEFAULT_STORE_TIMEOUT = 5.0
"""Seconds one store call may take by default before it fails with ``StoreError``."""

_Self = TypeVar("_Self", bound="ClosingStore")
_T = TypeVar("_T")

# asyncio.timeout (Python 3.11+): bounds a call in the caller's own task; before it, a call
# that is to be bounded in place runs as a task of its own all the same.
_TIMEOUT_SCOPE: Any = getattr(asyncio, "timeout", None)

# Calls abandoned at their time bound that are still unwinding, referenced until they finish.
_UNWINDING: set[asyncio.Future[Any]] = set()


async def run_bounded(
    call: Awaitable[_T],
    seconds: float,
    *,
    unwinding: set[asyncio.Future[Any]] | None = None,
) -> _T:
    """Await ``call`` for at most ``seconds``, however long the driver takes to give up.

    ``asyncio.wait_for`` waits for a cancelled call to finish unwinding, and a driver may unwind
    by talking to the very server that is stuck (a rollback waiting on a lock, a connection
    close). The call runs as a task of its own instead, handing its outcome straight to the
    future awaited here (one task, one future and one timer per call): past the bound, or when
    the caller is cancelled (its own ``wait_for``), the task is cancelled and left to unwind in
    the background, and this returns at once.

    Args:
        call: The driver call.
        seconds: The bound.
        unwinding: Where abandoned calls are kept until they finish (a store can wait for them
            in ``aclose``); a module-level set by default.

    Raises:
        asyncio.TimeoutError: The call did not finish in time.
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[_T] = loop.create_future()
    task = loop.create_task(_deliver(call, outcome))
    timer = loop.call_later(seconds, _expire, outcome)
    try:
        return await outcome
    except BaseException:
        if not task.done():
            task.cancel()
            kept = _UNWINDING if unwinding is None else unwinding
            kept.add(task)
            task.add_done_callback(kept.discard)
        raise
    finally:
        timer.cancel()


async def _deliver(call: Awaitable[_T], outcome: asyncio.Future[_T]) -> None:
    """Await ``call`` and settle ``outcome`` with its result or exception.

    Once ``outcome`` is settled by the time bound, or cancelled with its caller, the call's own
    outcome has no one to go to: the caller already had its error.
    """
    try:
        result = await call
    except asyncio.CancelledError:
        outcome.cancel()
        raise
    except BaseException as exc:
        if not outcome.done():
            outcome.set_exception(exc)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit: the loop must see them too
    else:
        if not outcome.done():
            outcome.set_result(result)


def _expire(outcome: asyncio.Future[Any]) -> None:
    if not outcome.done():
        outcome.set_exception(asyncio.TimeoutError())


def check_seconds(name: str, value: object, *, allow_none: bool = False) -> float | None:
    """Check a duration option: a positive, finite number of seconds (a numeric string too,
    as URL query options are strings).

    Raises:
        ConfigurationError: Naming the option and the value given.
    """
    if value is None:
        if allow_none:
            return None
        raise ConfigurationError(f"{name} must be a number of seconds, got None")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not value > 0 or math.isinf(value) or math.isnan(value):
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds, got {value!r}"
        )
    return float(value)


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """Check a whole-number option (a pool size, a number of retries): an integer of at least
    ``minimum`` (a string of digits too, as URL query options are strings).

    Raises:
        ConfigurationError: Naming the option, the rule and the value given.
    """
    rule = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ConfigurationError(f"{name} must be {rule}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be {rule}, got {value!r}")
    return value


def driver_timeout(name: str, value: object, timeout: float) -> float:
    """Check a driver's own timeout option (a socket or lock wait): by default half the call
    bound, never more than all of it.

    Half, because one call may wait twice: for a connection, then for its reply.

    Raises:
        ConfigurationError: Naming the option, for a value that is no duration or exceeds
            ``timeout``.
    """
    if value is None:
        return timeout / 2
    seconds = check_seconds(name, value)
    assert seconds is not None
    if seconds > timeout:
        raise ConfigurationError(
            f"{name} ({seconds:g} s) must not exceed timeout ({timeout:g} s), which bounds "
            "each call; raise timeout as well"
        )
    return seconds


# Query options whose values are secrets, wherever a URL names them (password=, ...token=).
_SECRET_OPTION = re.compile(r"pass|pwd|secret|token|credential|key", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` fit to print: its password, and the values of query options that look secret
    (``password``, ``aws_secret_access_key``, ``...token``), replaced by ``***``.

    Every message and log line about a store URL shows it through this. A password holding a
    raw ``/``, ``?`` or ``@`` is hidden too: the user part ends at the last ``@`` before the
    query.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme: the user part, if any, starts the string
        scheme, rest = "", url
    query_at = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, query_at)
    if at >= 0 and ":" in rest[:at]:
        user = rest[:at].split(":", 1)[0]
        rest = f"{user}:***{rest[at:]}"
        query_at = rest.find("?") if "?" in rest else len(rest)
    if query_at < len(rest) and rest[query_at] == "?":
        head, _, tail = rest[query_at + 1 :].partition("#")
        pairs = [
            (name, "***" if _SECRET_OPTION.search(name) and value else value)
            for name, _, value in (pair.partition("=") for pair in head.split("&"))
        ]
        query = "&".join(f"{name}={value}" if value else name for name, value in pairs)
        rest = rest[: query_at + 1] + query + (f"#{tail}" if tail else "")
    return f"{scheme}://{rest}" if sep else rest


def reject_unknown_options(url: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Refuse a URL query option no one reads, before anything is opened.

    Args:
        url: The URL (printed redacted).
        given: The options the URL's query holds.
        known: Every option the store or its driver reads.

    Raises:
        ConfigurationError: Naming the first unknown option, a known one it resembles, and
            the known ones.
    """
    names = sorted(set(known))
    for name in given:
        if name in names:
            continue
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigurationError(
            f"unknown option {name!r} in store URL {redact_url(url)}{hint} "
            f"(known: {', '.join(names)})"
        )


def combine_options(
    url: str, url_options: Mapping[str, str], keywords: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge a URL's query options with keyword options under the one rule: not both.

    Args:
        url: The URL, for the error message.
        url_options: Options parsed from the URL's query (strings).
        keywords: Keyword options; ``None`` means not given.

    Returns:
        Every option given either way (keyword values as given, URL values as strings).

    Raises:
        ConfigurationError: An option is given both in the URL and as a keyword.
    """
    merged: dict[str, Any] = {name: value for name, value in keywords.items() if value is not None}
    for name, value in url_options.items():
        if name in merged:
            raise ConfigurationError(
                f"option {name!r} is given both in the URL {redact_url(url)} and as a keyword "
                "argument; "
                "give it one way"
            )
        merged[name] = value
    return merged


# Timeouts whatever the driver: the builtin, and asyncio's (a class of its own before 3.11).
_TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, asyncio.TimeoutError)


@contextmanager
def translate_errors(
    operation: str,
    what: str,
    errors: tuple[type[BaseException], ...],
    *,
    timeouts: tuple[type[BaseException], ...] = (),
) -> Iterator[None]:
    """Turn the driver errors ``errors`` raised inside the block into :class:`StoreError`.

    Those that mean the store did not answer in time become :class:`StoreTimeout`: the
    builtin ``TimeoutError``, ``asyncio.TimeoutError`` and the classes in ``timeouts``.

    Args:
        operation: What was attempted, e.g. ``"Redis GET"``.
        what: What it was attempted on, e.g. ``"key 'a'"``.
        errors: The exception classes that mean the store failed.
        timeouts: The driver's own timeout classes, e.g. redis-py's ``TimeoutError``.
    """
    try:
        yield
    except StoreError:
        raise
    except errors as exc:
        raise store_error(operation, what, exc, timeouts=timeouts) from exc


def store_error(
    operation: str,
    what: str,
    exc: BaseException,
    *,
    timeouts: tuple[type[BaseException], ...] = (),
) -> StoreError:
    """The :class:`StoreError` (or :class:`StoreTimeout`) :func:`translate_errors` raises for
    the driver error ``exc``, for a store that catches driver errors itself on a hot path."""
    text = str(exc).strip()
    detail = text.splitlines()[0] if text else ""
    detail = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    kind = StoreTimeout if isinstance(exc, (*_TIMEOUT_ERRORS, *timeouts)) else StoreError
    return kind(f"{operation} of {what} failed: {detail}")


def decode_value(raw: bytes, *, where: str) -> str:
    """Decode a stored value: UTF-8 (lone surrogates allowed), else replacement characters.

    A value some other program wrote may hold any bytes; it is logged and returned in a form
    slimcache will not parse, so it reads as a cache miss instead of failing every request.
    """
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        logger.warning("%s holds bytes that are not UTF-8; treating it as foreign data", where)
        return raw.decode("utf-8", "replace")


class ClosingStore:
    """Mixin for a store's lifetime: ``async with`` support and a closed flag.

    Subclasses implement ``aclose`` (calling :meth:`mark_closed`) and call :meth:`check_open`
    at the start of every operation.
    """

    _closed: bool = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    def mark_closed(self) -> bool:
        """Mark the store closed; return ``False`` if it already was (``aclose`` is idempotent)."""
        if self._closed:
            return False
        self._closed = True
        return True

    def check_open(self, operation: str) -> None:
        """Raise :class:`StoreError` if the store is closed."""
        if self._closed:
            raise StoreError(f"{type(self).__name__}: {operation} on a closed store")

    async def aclose(self) -> None:
        """Release the store's resources; override and call :meth:`mark_closed`."""
        self.mark_closed()

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class BoundedStore(ClosingStore):
    """Mixin for a store whose every call ends within ``timeout`` seconds, whatever the server.

    The store calls :meth:`bound_calls` once, from ``__init__``, and runs each driver call
    through :meth:`run_call`, which bounds it, turns the driver's failures into
    :class:`~slimcache.StoreError` and running out of time into :class:`~slimcache.StoreTimeout`
    (``"Redis GET of key 'a' failed: no answer within 5 s"``).
    """

    _timeout: float = DEFAULT_STORE_TIMEOUT

    def bound_calls(self, timeout: object) -> float:
        """Set the bound on each call, checked as the ``timeout`` option.

        Returns:
            The bound, in seconds.

        Raises:
            ConfigurationError: ``timeout`` is not a positive, finite number of seconds.
        """
        seconds = check_seconds("timeout", timeout)
        assert seconds is not None
        self._timeout = seconds
        return seconds

    @property
    def timeout(self) -> float:
        """Seconds each call may take before it fails with :class:`~slimcache.StoreTimeout`."""
        return self._timeout

    async def run_call(
        self,
        call: Awaitable[_T],
        operation: str,
        what: str | Callable[[], str],
        *,
        errors: tuple[type[BaseException], ...] = (),
        timeouts: tuple[type[BaseException], ...] = (),
        in_place: bool = False,
        unwinding: set[asyncio.Future[Any]] | None = None,
        settles_in_time: bool = False,
    ) -> _T:
        """Await ``call`` within :attr:`timeout`, translating its failures.

        Args:
            call: The driver call.
            operation: What is attempted, e.g. ``"Redis GET"``.
            what: What it is attempted on, e.g. ``"key 'a'"``; a function when putting it
                into words costs something, called only when the call fails.
            errors: The driver's exception classes that mean the store failed (as for
                :func:`translate_errors`); a store that translates them inside ``call``
                itself leaves this empty.
            timeouts: The driver's own timeout classes, e.g. redis-py's ``TimeoutError``.
            in_place: Bound the call in the caller's own task (Python 3.11+), for a driver
                that unwinds a cancelled call without waiting on the server; otherwise the
                call runs as a task of its own (see :func:`run_bounded`).
            unwinding: Where calls given up on are kept until they have unwound (see
                :func:`run_bounded`).
            settles_in_time: ``call`` is settled within :attr:`timeout` by itself (an
                ``asyncio.TimeoutError`` past it), as a reply batched with others under one
                bound is: no timer of its own is set; its failures are translated all the
                same.

        Raises:
            StoreTimeout: No answer within the bound, or the driver timed out.
            StoreError: The driver failed with one of ``errors``.
        """
        try:
            if settles_in_time:
                return await call
            if in_place and _TIMEOUT_SCOPE is not None:
                async with _TIMEOUT_SCOPE(self._timeout):
                    return await call
            return await run_bounded(call, self._timeout, unwinding=unwinding)
        except asyncio.TimeoutError as exc:
            raise self._no_answer(operation, what) from exc
        except StoreError:
            raise
        except errors as exc:
            raise store_error(operation, _words(what), exc, timeouts=timeouts) from exc

    def _no_answer(self, operation: str, what: str | Callable[[], str]) -> StoreTimeout:
        return StoreTimeout(
            f"{operation} of {_words(what)} failed: no answer within {self._timeout:g} s"
        )


def _words(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


class CallBoundedStore(BoundedStore):
    """A :class:`BoundedStore` that states its bound for the compressor as ``call_timeout``
    (:class:`~slimcache.stores.SupportsCallTimeout`).

    Only for a store each of whose operations makes a single :meth:`~BoundedStore.run_call`,
    however many round trips it holds: one that makes several in a row would take longer.
    """

    @property
    def call_timeout(self) -> float:
        """The same bound, stated for the compressor
        (:class:`~slimcache.stores.SupportsCallTimeout`): every call, however many round trips
        it makes, ends within ``timeout``."""
        return self._timeout


async def run_op(store: Any, op: StoreOp) -> Any:
    """Carry out one batch operation with ``store``'s own methods, as a call of its own.

    For a store that runs some batches one call at a time (see
    :class:`slimcache.stores.SupportsBatch`): ``store`` needs the methods the operation names.

    Returns:
        The operation's result, as ``batch`` gives it.
    """
    if isinstance(op, GetOp):
        return await store.get(op.key)
    if isinstance(op, SetOp):
        return await store.set(op.key, op.value, ttl=op.ttl)
    if isinstance(op, SetIfAbsentOp):
        return await store.set_if_absent(op.key, op.value, ttl=op.ttl)
    if isinstance(op, CompareAndSetOp):
        return await store.compare_and_set(op.key, op.expected, op.value, ttl=op.ttl)
    if isinstance(op, CompareAndDeleteOp):
        return await store.compare_and_delete(op.key, op.expected)
    return await store.delete(op.key)
