"""The DynamoDB store: one item per key, the deadline in the item, boto3 calls in worker threads.

This module holds the store's operations; :mod:`slimcache_dynamodb._url` reads a URL and its
options into a boto3 client, :mod:`slimcache_dynamodb._table` finds or creates the table,
:mod:`slimcache_dynamodb._requests` makes the requests behind each single-key operation,
:mod:`slimcache_dynamodb._batch` runs a batch as transactions, :mod:`slimcache_dynamodb._items`
lays the items out and :mod:`slimcache_dynamodb._retry` retries throttled requests.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    ReadTimeoutError,
)

from slimcache import ConfigurationError, StoreError, StoreTimeout
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    BoundedStore,
    DatabaseTarget,
    SetOp,
    StoreOp,
    check_ops,
    check_seconds,
    endpoint_of,
    pool_size,
    positive_int,
    run_bounded,
    store_error,
    validate_ttl,
)
from slimcache_dynamodb._batch import Planned, parts, run_part
from slimcache_dynamodb._items import (
    KEY,
    MAX_ITEM_BYTES,
    deadline_of,
    describe_key,
    item_key,
    item_size,
    new_item,
)
from slimcache_dynamodb._requests import Items
from slimcache_dynamodb._retry import Attempts
from slimcache_dynamodb._table import Table
from slimcache_dynamodb._url import (
    check_create_table,
    client_from_url,
    validate_table_name,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["DynamoDBStore"]

_T = TypeVar("_T")

DEFAULT_SETUP_TIMEOUT = 60.0
"""Seconds :meth:`DynamoDBStore.setup` waits for a table to be created and active."""

_ERRORS = (BotoCoreError, ClientError)
_TIMEOUTS = (ReadTimeoutError, ConnectTimeoutError)


def _check_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _body(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


class DynamoDBStore(BoundedStore):
    """A store keeping each key in one item of a DynamoDB table.

    Every boto3 call runs on a thread pool the store owns (as many threads as the client has
    connections), so the event loop never waits on the network. Each call fails with
    :class:`~slimcache.StoreError` after ``timeout`` seconds without an answer; a request
    DynamoDB throttled (``ProvisionedThroughputExceededException``, ``ThrottlingException``,
    ``RequestLimitExceeded``) is sent again after a pause while that fits in the bound, then
    fails with ``StoreError`` too.

    The table is found on first use, and created when it does not exist (one string hash key
    ``k``, on-demand billing, TTL on ``expires_at``) unless ``create_table`` is off; a table of
    one's own works as it is when its key schema is one string hash key. Keys may hold any
    characters: a key that is no valid UTF-8 or too long for a DynamoDB key is kept under its
    SHA-256. Values are kept as binary attributes, so any string round-trips.

    A TTL is kept as the item's deadline, whole Unix seconds by the writer's clock rounded up
    (``expiry_clock = "writer"``), which is also the table's TTL attribute. DynamoDB deletes
    expired items late (within days), so every read and every conditional write decides expiry
    by the deadline and the caller's clock: an item past it reads as absent.

    ``set_if_absent``, ``compare_and_set`` and ``compare_and_delete`` are one conditional
    request each (``ConditionExpression``). ``batch`` reads the items it names in one
    transaction and writes them in another, on the condition that nobody wrote them in between
    (then it runs again): atomic up to 100 items and 4 MB, in consecutive atomic parts beyond.
    ``get_many`` reads 100 keys a ``BatchGetItem``. An item over DynamoDB's 400 KB limit is
    refused with ``StoreError`` before anything is written.

    Args:
        client: A boto3 DynamoDB client. :meth:`aclose` closes it.
        table: The table's name.
        create_table: Create the table on first use when it does not exist; when ``False``, a
            missing table makes every call fail with ``StoreError`` saying how to create it.
        clock: Wall clock in Unix seconds, for the deadlines; replaceable in tests.
        timeout: Seconds each call may take, end to end, before it fails with ``StoreError``.

    Raises:
        ConfigurationError: The table name or timeout is invalid, or ``client`` is not a
            DynamoDB client.
    """

    expiry_clock = "writer"  # deadlines by the writer's clock (see SupportsOwnExpiry)

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        create_table: bool = True,
        clock: Callable[[], float] = time.time,
        timeout: float = DEFAULT_STORE_TIMEOUT,
    ) -> None:
        for method in ("get_item", "put_item", "transact_write_items", "close"):
            if not callable(getattr(client, method, None)):
                raise ConfigurationError(
                    f"client must be a boto3 DynamoDB client, got {type(client).__name__} "
                    f"(it has no {method}())"
                )
        self.bound_calls(timeout)
        self._client = client
        self._table = Table(
            client, validate_table_name(table), create=check_create_table(create_table)
        )
        self._items: Items | None = None
        self._clock = clock
        self._target = DatabaseTarget("aws.dynamodb", *endpoint_of(client), None, table)
        concurrency = pool_size(client)
        # One thread per pooled connection: more could only wait for a connection.
        self._executor = ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="slimcache-dynamodb"
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout: float | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        max_pool_connections: int | None = None,
        create_table: bool | None = None,
        profile_name: str | None = None,
        **client_options: Any,
    ) -> DynamoDBStore:
        """Build a store and its boto3 client from ``dynamodb://TABLE?option=value&...``.

        The query may hold ``timeout``, ``endpoint_url``, ``region`` (or ``region_name``),
        ``connect_timeout``, ``read_timeout``, ``max_pool_connections`` and ``create_table``
        (``true`` or ``false``); giving one of them both in the URL and as a keyword argument
        is an error. Credentials never go in the URL: pass them as keywords, or let boto3 find
        them (environment, profile, role).

        Args:
            url: For example ``dynamodb://slimcache?region=eu-west-1``, or
                ``dynamodb://cache?endpoint_url=http://127.0.0.1:8000`` for DynamoDB Local.
            timeout: Seconds each call may take, end to end (default
                :data:`~slimcache.stores.toolkit.DEFAULT_STORE_TIMEOUT`).
            endpoint_url: Server to talk to instead of AWS (DynamoDB Local, moto, ...).
            region_name: AWS region.
            connect_timeout: Seconds to wait for a connection (default: half of ``timeout``).
            read_timeout: Seconds to wait for a response (default: the rest of ``timeout``).
            max_pool_connections: Size of the connection pool and of the store's thread pool
                (default 10).
            create_table: Create the table on first use when it does not exist (default).
            profile_name: A profile of the shared AWS config files.
            **client_options: ``aws_access_key_id``, ``aws_secret_access_key``,
                ``aws_session_token``, ``verify``, ``use_ssl``, or ``config`` (a
                ``botocore.config.Config`` merged over the one built from the options above).

        Raises:
            ConfigurationError: The URL, an option or the table name is invalid, an option is
                given both ways, or the connect and read timeouts exceed ``timeout``.
        """
        opened = client_from_url(
            url,
            {
                "timeout": timeout,
                "endpoint_url": endpoint_url,
                "region_name": region_name,
                "connect_timeout": connect_timeout,
                "read_timeout": read_timeout,
                "max_pool_connections": max_pool_connections,
                "create_table": create_table,
            },
            profile_name,
            client_options,
        )
        return cls(
            opened.client,
            opened.table,
            create_table=opened.create_table,
            timeout=opened.timeout,
        )

    @property
    def table(self) -> str:
        """The table holding the items."""
        return self._table.name

    @property
    def client(self) -> DynamoDBClient:
        """The boto3 DynamoDB client the store calls."""
        return self._client

    @property
    def database_target(self) -> DatabaseTarget:
        """DynamoDB, its endpoint's host and port and the table, as telemetry reports them."""
        return self._target

    async def setup(self, *, timeout: float = DEFAULT_SETUP_TIMEOUT) -> None:
        """Find the table, or create it and wait until it is active; safe to call again.

        Every call does this on first use, within its own bound; creating a table on AWS can
        take longer than that, so a deployment that lets the store create its table calls this
        once at start-up.

        Args:
            timeout: Seconds to wait for the table.

        Raises:
            ConfigurationError: ``timeout`` is not a positive number of seconds.
            StoreError: The table is missing and creation is off, has another key schema, or
                DynamoDB failed.
            StoreTimeout: The table was not active within ``timeout``.
        """
        seconds = check_seconds("timeout", timeout)
        assert seconds is not None
        self.check_open("setup")
        deadline = time.monotonic() + seconds
        where = f"table {self._table.name!r}"
        work = self._submit(lambda: self._ready(Attempts(deadline)))
        try:
            await run_bounded(work, seconds)
        except asyncio.TimeoutError:
            raise StoreTimeout(
                f"DynamoDB setup of {where} failed: not active within {seconds:g} s"
            ) from None
        except StoreError:
            raise
        except _ERRORS as exc:
            raise store_error("DynamoDB setup", where, exc, timeouts=_TIMEOUTS) from exc

    # -- the Store protocol -------------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        """Return the value under ``key``, or ``None`` when absent or past its deadline.

        Raises:
            StoreError: DynamoDB failed.
        """
        name = item_key(_check_text("key", key))
        return await self._run(
            "get",
            self._where(key),
            lambda items, attempts: items.get(attempts, key, name, self._clock()),
        )

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in order: one ``BatchGetItem`` per 100 distinct keys.

        Raises:
            StoreError: DynamoDB failed, or throttled some keys until the time bound.
        """
        names = {item_key(_check_text("key", key)): key for key in keys}
        if not names:
            return []
        found = await self._run(
            "get_many",
            f"{len(names)} keys (table {self._table.name!r})",
            lambda items, attempts: items.get_many(attempts, names, self._clock()),
        )
        return [found[item_key(key)] for key in keys]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (forever if ``None``).

        Raises:
            ConfigurationError: ``value`` is not a string or ``ttl`` is invalid.
            StoreError: The item would exceed 400 KB, or DynamoDB failed.
        """
        planned = self._plan("set", key, value, ttl)
        await self._run(
            "set",
            self._where(key),
            lambda items, attempts: items.put(attempts, self._item(items, planned)),
        )

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` holds nothing, or an entry past its deadline.

        One conditional ``PutItem``: of many concurrent callers, one gets ``True``.

        Returns:
            Whether this call wrote the value.

        Raises:
            ConfigurationError: ``value`` is not a string or ``ttl`` is invalid.
            StoreError: The item would exceed 400 KB, or DynamoDB failed.
        """
        planned = self._plan("set_if_absent", key, value, ttl)
        return await self._run(
            "set_if_absent",
            self._where(key),
            lambda items, attempts: items.put_if_absent(
                attempts, self._item(items, planned), self._clock()
            ),
        )

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` holds ``expected`` (``None``: nothing live).

        One conditional ``PutItem``, on the value held and the deadline.

        Returns:
            Whether this call wrote the value.

        Raises:
            ConfigurationError: ``value`` or ``expected`` is not a string, or ``ttl`` is invalid.
            StoreError: The item would exceed 400 KB, or DynamoDB failed.
        """
        if expected is None:
            return await self.set_if_absent(key, value, ttl=ttl)
        planned = self._plan("compare_and_set", key, value, ttl)
        held = _body(_check_text("expected", expected))
        return await self._run(
            "compare_and_set",
            self._where(key),
            lambda items, attempts: items.put_if_holds(
                attempts, self._item(items, planned), held, self._clock()
            ),
        )

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected``: one conditional ``DeleteItem``.

        Returns:
            Whether this call deleted the entry.

        Raises:
            ConfigurationError: ``expected`` is not a string.
            StoreError: DynamoDB failed.
        """
        name = item_key(_check_text("key", key))
        held = _body(_check_text("expected", expected))
        return await self._run(
            "compare_and_delete",
            self._where(key),
            lambda items, attempts: items.delete_if_holds(attempts, name, held, self._clock()),
        )

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error.

        Raises:
            StoreError: DynamoDB failed.
        """
        name = item_key(_check_text("key", key))
        await self._run(
            "delete", self._where(key), lambda items, attempts: items.delete(attempts, name)
        )

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        """Run ``ops`` in order, each with the meaning of its own method, as transactions.

        The items the batch names are read in one ``TransactGetItems``, the operations run on
        that snapshot, and what they write goes in one ``TransactWriteItems`` on the condition
        that none of the items changed since the read (else the batch runs again from the
        read). Up to 100 items and 4 MB of writes the batch is atomic; a larger one runs as
        consecutive atomic parts, so a failure can leave earlier parts applied.

        Returns:
            One result per operation, as :class:`~slimcache.stores.SupportsBatch` says.

        Raises:
            ConfigurationError: An operation is malformed (checked before anything runs).
            StoreError: An item would exceed 400 KB (before anything runs), other writers
                kept changing the items until the time bound, or DynamoDB failed.
        """
        checked = check_ops(ops)
        if not checked:
            return []
        planned = [self._plan_op(op) for op in checked]
        results: list[Any] = []
        for part in parts(planned):
            results += await self._run(
                "batch",
                f"{len(part)} operations (table {self._table.name!r})",
                functools.partial(self._run_part, part),
            )
        return results

    async def scan_keys(
        self, prefix: str, *, cursor: str | None = None, count: int = 100
    ) -> tuple[list[str], str | None]:
        """Up to ``count`` keys that start with ``prefix``, after ``cursor`` (see
        :class:`~slimcache.stores.SupportsScanKeys`).

        A strongly consistent ``Scan`` filtered on the prefix, requests following one another
        until ``count`` keys are found, the table ends or half the call's bound is spent; a
        page may hold fewer keys than ``count``, none even, with a cursor to go on from. A key
        kept under its hash (no valid UTF-8, or too long) is not listed; an entry past its
        deadline that DynamoDB has not removed yet is.

        Raises:
            ConfigurationError: ``prefix`` or ``cursor`` is not a string, or ``count`` is not a
                positive integer.
            StoreError: DynamoDB failed.
        """
        _check_text("prefix", prefix)
        if cursor is not None:
            _check_text("cursor", cursor)
        positive_int("count", count)
        listed = item_key(prefix)
        if not listed.startswith(item_key("")):  # no key in plain form can start with it
            return [], None
        budget = self.timeout / 2
        return await self._run(
            "scan_keys",
            f"prefix {describe_key(prefix)} (table {self._table.name!r})",
            lambda items, attempts: items.scan(attempts, listed, cursor, count, budget),
        )

    async def aclose(self) -> None:
        """Stop the store's threads and close the boto3 client; the store is unusable afterwards.

        Calls still under way are not waited for: their threads end when the client's own
        timeouts run out at the latest.
        """
        if not self.mark_closed():
            return
        self._executor.shutdown(wait=False)
        await asyncio.to_thread(self._client.close)

    def __repr__(self) -> str:
        return f"DynamoDBStore(table={self._table.name!r})"

    # -- running a call ------------------------------------------------------------------------

    def _plan(self, operation: str, key: str, value: str, ttl: float | None) -> Planned:
        """Check a write before anything is sent: its item key, body, deadline and size."""
        _check_text("key", key)
        _check_text("value", value)
        ttl = validate_ttl(ttl)
        name, body = item_key(key), _body(value)
        deadline = deadline_of(self._clock(), ttl)
        attribute = KEY if self._items is None else self._items.key_attribute
        size = item_size(attribute, name, body, deadline)
        if size > MAX_ITEM_BYTES:
            raise StoreError(
                f"DynamoDB {operation} of key {describe_key(key)} refused before writing: the "
                f"item would be {size} bytes, over DynamoDB's item limit of 400 KB "
                f"({MAX_ITEM_BYTES} bytes)"
            )
        return Planned(SetOp(key, value, ttl), name, body, deadline, size)

    def _plan_op(self, op: StoreOp) -> Planned:
        value = getattr(op, "value", None)
        if value is None:
            return Planned(op, item_key(op.key))
        planned = self._plan("batch", op.key, value, getattr(op, "ttl", None))
        return Planned(op, planned.name, planned.body, planned.deadline, planned.size)

    def _item(self, items: Items, planned: Planned) -> dict[str, Any]:
        assert planned.body is not None
        return new_item(items.key_attribute, planned.name, planned.body, planned.deadline)

    def _run_part(self, part: list[Planned], items: Items, attempts: Attempts) -> list[Any]:
        return run_part(self._client, items, attempts, part, self._clock)

    def _ready(self, attempts: Attempts) -> Items:
        """The table's items, once the table is there (found or created on first use)."""
        if self._items is None:
            key = self._table.key_attribute(attempts)
            self._items = Items(self._client, self._table.name, key)
        return self._items

    def _submit(self, work: Callable[[], _T]) -> asyncio.Future[_T]:
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(context.run, work)
        )

    def _where(self, key: str) -> str:
        return f"key {describe_key(key)} (table {self._table.name!r})"

    async def _run(self, operation: str, what: str, call: Callable[[Items, Attempts], _T]) -> _T:
        """Run ``call`` on the store's threads within the store's timeout.

        ``what`` names what the call is on, for its errors.
        """
        self.check_open(operation)
        deadline = time.monotonic() + self.timeout

        def work() -> _T:
            attempts = Attempts(deadline)
            return call(self._ready(attempts), attempts)

        # Cancelling the wait returns at once; the thread finishes on its own.
        return await self.run_call(
            self._submit(work),
            f"DynamoDB {operation}",
            what,
            errors=_ERRORS,
            timeouts=_TIMEOUTS,
            in_place=True,
        )
