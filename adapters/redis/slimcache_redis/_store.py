"""The Redis store: slimcache entries as plain Redis strings, read and written with redis-py.

One class serves a single Redis server and a Redis Cluster: on a cluster, keys are hash-tagged
per thread (see :mod:`slimcache_redis._cluster`), batch reads are split by hash slot, and the
reads of one turn of the event loop go out as one pipeline per node
(:mod:`slimcache_redis._cluster_reads`).

This module holds the store's operations; :mod:`slimcache_redis._url` reads a URL and its
options into a client, and :mod:`slimcache_redis._commands` writes the commands and scripts
the operations send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio
from redis.exceptions import RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from slimcache import ConfigurationError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    CallBoundedStore,
    DatabaseTarget,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
    check_ops,
    decode_value,
    run_op,
)
from slimcache_redis import _cluster_scan as cluster_scan
from slimcache_redis._cluster import cluster_key
from slimcache_redis._cluster_reads import ClusterReads
from slimcache_redis._cluster_transaction import cluster_transaction
from slimcache_redis._commands import (
    COMPARE_AND_DELETE,
    COMPARE_AND_SET,
    RAW,
    REPLACEMENT,
    check_str,
    compare_and_set_args,
    decode,
    encode,
    expected_of,
    glob_escape,
    transaction_command,
    ttl_ms,
)
from slimcache_redis._reads import CoalescedReads
from slimcache_redis._url import check_prefix, client_from_url, database_target

__all__ = ["RedisStore"]

_T = TypeVar("_T")

# What a SCAN pattern reads as a wildcard, escaped in a key prefix.

# Errors raised by redis-py (and by the socket layer beneath it) that mean the store failed.
# asyncio.TimeoutError is a separate class before Python 3.11. RedisClusterException (a
# cluster that cannot be reached, a slot no node serves) does not derive from RedisError.
_DRIVER_ERRORS = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError, UnicodeError)


async def _gather_all(calls: Sequence[Awaitable[_T]]) -> list[_T]:
    """Await ``calls`` concurrently; when one fails, cancel the others and raise."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()  # does nothing to the ones already finished


def _describe_keys(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(key) for key in keys[:3])
    more = f", ... ({len(keys)} keys)" if len(keys) > 3 else ""
    return f"[{shown}{more}]"


def _cancel_requests(task: asyncio.Task[Any] | None) -> int:
    """The cancellations of ``task`` not yet handled (always 0 before Python 3.11)."""
    cancelling = getattr(task, "cancelling", None)
    return 0 if cancelling is None else int(cancelling())


class RedisStore(CallBoundedStore):
    """A slimcache store kept in Redis (6.2 or newer), through redis-py's asyncio client.

    Each entry is a Redis string under ``prefix + key``; TTLs use ``SET ... PX``, so Redis
    itself expires entries. Every driver error is raised as :class:`~slimcache.StoreError`
    with the redis-py exception as its ``__cause__``, and so is a call that gets no answer
    within ``timeout`` seconds (a frozen or unreachable server), whatever the client's own
    socket timeouts.

    On one server, the reads (:meth:`get`, :meth:`get_many`) made during one turn of the event
    loop (a server's concurrent requests reading their thread indexes) are sent together, as
    one pipeline on one connection, each caller getting its own reply or error: much less
    client CPU per read than a command of its own each.

    On a Redis Cluster (a ``redis.asyncio.RedisCluster`` client), keys that follow slimcache's
    key grammar are hash-tagged by thread, ``ns:{thread_abc}:index``, so that all keys of one
    thread live in one hash slot; other keys are stored as they are. :meth:`get_many` reads
    each slot's keys with one ``MGET``. The reads of one turn go out as one pipeline per node,
    each node's on its own, so that a node that fails only fails the reads sent to it.

    Args:
        client: A ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client. Either
            ``decode_responses`` setting works.
        prefix: Prepended to every key, so several applications can share one database.
        owns_client: When ``True``, :meth:`aclose` also closes ``client`` and its pool.
        timeout: Seconds each call may take, end to end, before it fails with ``StoreError``.

    Raises:
        ConfigurationError: ``client`` is neither client, ``prefix`` is not a string (or, on a
            cluster, holds an empty hash tag ``{}``), or ``timeout`` is not a positive number
            of seconds.

    Example::

        client = redis.asyncio.Redis(host="localhost")
        store = RedisStore(client, prefix="myapp:")
    """

    expiry_clock = "store"  # Redis expires keys by their TTL (see SupportsOwnExpiry)

    def __init__(
        self,
        client: redis.asyncio.Redis | redis.asyncio.RedisCluster,
        *,
        prefix: str = "",
        owns_client: bool = False,
        timeout: float = DEFAULT_STORE_TIMEOUT,
    ) -> None:
        if not isinstance(client, (redis.asyncio.Redis, redis.asyncio.RedisCluster)):
            raise ConfigurationError(
                "client must be a redis.asyncio.Redis or redis.asyncio.RedisCluster, "
                f"got {type(client).__name__}"
            )
        self.bound_calls(timeout)
        self._client = client
        self._cluster = isinstance(client, redis.asyncio.RedisCluster)
        self._discovery = asyncio.Lock()
        self._prefix = check_prefix(prefix, cluster=self._cluster)
        self._owns_client = bool(owns_client)
        # A transaction's replies are decoded by the client whatever a command asks for, so a
        # client built with decode_responses=True runs batches one call at a time (see batch).
        self._raw_transactions = not client.get_encoder().decode_responses
        # The reads of one turn of the event loop go out together: as one pipeline on one
        # server (not with a decoding client, which decodes a pipeline's replies), one per node
        # on a cluster (whose nodes parse each command of a pipeline as it asks).
        self._reads: CoalescedReads | None = None
        if isinstance(client, redis.asyncio.RedisCluster):
            self._reads = ClusterReads(client, self._timeout, self._discover)
        elif self._raw_transactions:
            self._reads = CoalescedReads(client, self._timeout)
        # Registered once: each call sends EVALSHA, loading the script only if Redis lacks it.
        self._compare_and_set = client.register_script(COMPARE_AND_SET)
        self._compare_and_delete = client.register_script(COMPARE_AND_DELETE)
        self._target = database_target(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str | None = None,
        timeout: float | None = None,
        socket_timeout: float | None = None,
        socket_connect_timeout: float | None = None,
        max_connections: int | None = None,
        **client_options: Any,
    ) -> RedisStore:
        """Build a store, and the client it owns, from a Redis URL.

        Accepted forms: ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS),
        ``unix:///path/to/redis.sock?db=0``, and for a Redis Cluster
        ``redis+cluster://[user:password@]host:port[,host:port...][/]`` (``rediss+cluster://``
        for TLS), naming one or more nodes to discover the cluster from. Every option may be
        given in the URL's query (``redis://localhost/0?prefix=myapp:&timeout=2``) or as a
        keyword argument, but not both ways at once. Query options the store does not read go
        to redis-py; one that neither reads (a misspelling) is refused at once.

        Args:
            url: The Redis URL.
            prefix: Key prefix (default none).
            timeout: Seconds each call may take, end to end (default
                :data:`~slimcache.stores.toolkit.DEFAULT_STORE_TIMEOUT`).
            socket_timeout: Seconds to wait for a reply (default half of ``timeout``; at most
                ``timeout``).
            socket_connect_timeout: Seconds to wait for a connection to open (default half of
                ``timeout``; at most ``timeout``).
            max_connections: Upper bound on the connection pool (on a cluster, per node);
                ``None`` leaves redis-py's.
            **client_options: Passed to ``redis.asyncio.Redis.from_url`` or
                ``redis.asyncio.RedisCluster`` (``password``, ``ssl_ca_certs``, ``retry``,
                ``decode_responses``, ...).

        Returns:
            A store that closes its client on :meth:`aclose`. No connection is opened yet.

        Raises:
            ConfigurationError: The URL or an option is invalid or unknown, or an option is
                given both in the URL and as a keyword argument. Messages show the URL with
                its password hidden.
        """
        opened = client_from_url(
            url,
            {
                "prefix": prefix,
                "timeout": timeout,
                "socket_timeout": socket_timeout,
                "socket_connect_timeout": socket_connect_timeout,
                "max_connections": max_connections,
                **client_options,
            },
        )
        return cls(opened.client, prefix=opened.prefix, owns_client=True, timeout=opened.timeout)

    @property
    def client(self) -> Any:
        """The redis-py client this store talks through.

        A ``redis.asyncio.Redis``, or a ``redis.asyncio.RedisCluster`` when :attr:`cluster` is
        true. Typed ``Any`` so that code written against either client type-checks as it is.
        """
        return self._client

    @property
    def cluster(self) -> bool:
        """Whether the client is a ``redis.asyncio.RedisCluster`` (keys are hash-tagged)."""
        return self._cluster

    @property
    def prefix(self) -> str:
        """The prefix prepended to every key."""
        return self._prefix

    @property
    def database_target(self) -> DatabaseTarget:
        """Redis, its server and database index, as telemetry reports them."""
        return self._target

    def _key(self, key: str) -> bytes:
        name = check_str("key", key)
        if self._cluster:
            name = cluster_key(name)
        return encode(self._prefix + name)

    def _write(self, key: str, value: str, ttl: float | None) -> tuple[bytes, bytes, int | None]:
        """Check a write: the Redis key, the value as sent and the TTL in milliseconds."""
        return self._key(key), encode(check_str("value", value)), ttl_ms(ttl)

    def _decode(self, raw: bytes | None, key: str) -> str | None:
        if raw is None:
            return None
        return decode_value(raw, where=f"Redis key {self._prefix + key!r}")

    def _raw(self, *command: bytes | str) -> Awaitable[Any]:
        """Send ``command``, its reply left as bytes whatever the client's decode_responses."""
        reply: Awaitable[Any] = self._client.execute_command(*command, **RAW)
        return reply

    async def _stored_form(self, name: bytes, key: str, expected: str) -> bytes:
        """Return the bytes ``key`` holds if they read back as ``expected``; else its encoding.

        A value holding U+FFFD may be how :meth:`get` showed bytes that are not UTF-8; the
        compare must then be against those very bytes, or no caller could ever replace them.
        """
        encoded = encode(expected)
        if REPLACEMENT not in expected:
            return encoded
        raw = await self._raw("GET", name)
        if isinstance(raw, bytes) and self._decode(raw, key) == expected:
            return raw
        return encoded

    async def _call(
        self,
        operation: str,
        what: str | Callable[[], str],
        call: Callable[[], Awaitable[_T]],
        *,
        settles_in_time: bool = False,
    ) -> _T:
        """Run one redis-py call within the store's timeout, translating its failures.

        Every call of the store goes through here, a cache hit's read included, so the driver's
        errors are caught in place. redis-py unwinds a cancelled call without waiting on the
        server (it drops the connection), so the bound is set in the caller's own task, for
        less per call than a task of its own; a read batched with others is bounded with them
        (``settles_in_time``). ``what`` may be a function, called only when the call fails.

        redis-py can also finish a command whose caller was cancelled meanwhile and return its
        reply as if nothing happened, the cancellation lost (about half the time when it
        arrives during the round trip): a caller cancelled during the call gets its
        ``CancelledError`` here, whatever the driver did with it.
        """
        task = asyncio.current_task()
        requested = _cancel_requests(task)
        result = await self.run_call(
            # A batched read finds the cluster with its batch, within their common bound.
            self._when_ready(call) if self._cluster and not settles_in_time else call(),
            f"Redis {operation}",
            what,
            errors=_DRIVER_ERRORS,
            timeouts=(RedisTimeoutError,),
            in_place=True,
            settles_in_time=settles_in_time,
        )
        if _cancel_requests(task) > requested:
            raise asyncio.CancelledError
        return result

    async def _when_ready(self, call: Callable[[], Awaitable[_T]]) -> _T:
        await self._discover()
        return await call()

    async def _discover(self) -> None:
        # redis-py's cluster client can close connections other tasks are using when many
        # commands arrive while it discovers the cluster (redis-py 8.1), so the store lets one
        # call at a time find the cluster; once it has, this returns at once.
        async with self._discovery:
            await self._client.initialize()

    async def get(self, key: str) -> str | None:
        """Return the value under ``key``, or ``None`` when it is absent or expired.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        self.check_open("GET")
        reads = self._reads
        if reads is None:
            raw = await self._call("GET", lambda: f"key {key!r}", lambda: self._raw("GET", name))
        else:  # batched with the other reads of this turn, under one bound
            raw = await self._call(
                "GET", lambda: f"key {key!r}", lambda: reads.read("GET", name), settles_in_time=True
            )
        return self._decode(raw, key)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in order, in one ``MGET`` round trip.

        On a cluster, one ``MGET`` per hash slot, sent concurrently: a thread's keys share a
        slot, so slimcache's reads of one thread stay a single ``MGET``.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        names = [self._key(key) for key in keys]
        if not names:
            return []
        self.check_open("MGET")
        found = await self._call(
            "MGET",
            lambda: f"keys {_describe_keys(keys)}",
            lambda: self._mget(names),
            settles_in_time=self._reads is not None,  # batched with the others, one bound
        )
        return [self._decode(raw, key) for raw, key in zip(found, keys, strict=True)]

    async def _mget(self, names: list[bytes]) -> list[bytes | None]:
        client = self._client
        if not isinstance(client, redis.asyncio.RedisCluster):
            send = self._raw if self._reads is None else self._reads.read
            found: list[bytes | None] = await send("MGET", *names)
            return found
        # MGET must not span slots on a cluster: one per slot, answers put back in order.
        slots: dict[int, list[int]] = {}
        for position, name in enumerate(names):
            slots.setdefault(client.keyslot(name), []).append(position)
        groups = list(slots.values())
        send = self._raw if self._reads is None else self._reads.read
        replies = await _gather_all(
            [send("MGET", *(names[position] for position in group)) for group in groups]
        )
        ordered: list[bytes | None] = [None] * len(names)
        for group, reply in zip(groups, replies, strict=True):
            for position, raw in zip(group, reply, strict=True):
                ordered[position] = raw
        return ordered

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value and TTL.

        Args:
            key: The key (the store's prefix is prepended).
            value: The value.
            ttl: Seconds until Redis expires the entry; ``None`` keeps it until deleted.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number of seconds.
            StoreError: Redis could not be reached or refused the command.
        """
        name, data, px = self._write(key, value, ttl)
        self.check_open("SET")
        await self._call("SET", f"key {key!r}", lambda: self._client.set(name, data, px=px))

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` holds nothing, atomically (``SET NX``).

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key already existed.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number of seconds.
            StoreError: Redis could not be reached or refused the command.
        """
        name, data, px = self._write(key, value, ttl)
        self.check_open("SET NX")
        written = await self._call(
            "SET NX", f"key {key!r}", lambda: self._client.set(name, data, px=px, nx=True)
        )
        return bool(written)

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` holds ``expected`` (``None``: nothing), atomically.

        A Lua script compares and writes in one step on the server. ``expected`` matches what
        :meth:`get` returns, bytes that are not UTF-8 included.

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key held something else.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number of seconds, or ``value`` or
                ``expected`` is not a string.
            StoreError: Redis could not be reached or refused the command.
        """
        name, data, px = self._write(key, value, ttl)
        if expected is not None:
            check_str("expected", expected)
        self.check_open("compare-and-set")

        async def compare_and_set() -> Any:
            wanted = None if expected is None else await self._stored_form(name, key, expected)
            args = compare_and_set_args(wanted, data, px)
            return await self._compare_and_set(keys=[name], args=args)

        written = await self._call("compare-and-set", f"key {key!r}", compare_and_set)
        return bool(written)

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected``, atomically (a Lua script).

        ``expected`` matches what :meth:`get` returns, bytes that are not UTF-8 included.

        Returns:
            ``True`` if this call deleted the entry, ``False`` otherwise.

        Raises:
            ConfigurationError: ``expected`` is not a string.
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        check_str("expected", expected)
        self.check_open("compare-and-delete")

        async def compare_and_delete() -> Any:
            wanted = await self._stored_form(name, key, expected)
            return await self._compare_and_delete(keys=[name], args=[wanted])

        deleted = await self._call("compare-and-delete", f"key {key!r}", compare_and_delete)
        return bool(deleted)

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        """Run ``ops`` in order in one round trip: one ``MULTI``/``EXEC`` transaction.

        The transaction runs atomically on the server; the compares are the same Lua scripts
        as :meth:`compare_and_set` and :meth:`compare_and_delete`, sent with ``EVAL``. On a
        cluster the keys must share a hash slot (one thread's keys do). Otherwise, for a
        compare against a value holding U+FFFD (see :meth:`compare_and_set`), and with a
        client built with ``decode_responses=True`` (it would decode the transaction's replies
        itself, failing on bytes that are not UTF-8), the operations are sent one call at a
        time instead.

        Returns:
            One result per operation (see :class:`slimcache.stores.SupportsBatch`).

        Raises:
            ConfigurationError: An operation is malformed (nothing is sent).
            StoreError: Redis could not be reached or refused a command.
        """
        checked = check_ops(ops)
        commands = [transaction_command(self._key(op.key), op) for op in checked]
        if not checked:
            return []
        self.check_open("MULTI/EXEC")
        what = f"{len(checked)} operations on keys {_describe_keys([op.key for op in checked])}"
        if (
            not self._raw_transactions
            or not self._one_slot(checked)
            or any(REPLACEMENT in expected_of(op) for op in checked)
        ):

            async def one_by_one() -> list[Any]:
                return [await run_op(self, op) for op in checked]

            # Still one call to its caller: the whole batch ends within the store's timeout.
            return await self._call("batch", what, one_by_one)

        async def transaction() -> list[Any]:
            client = self._client
            if isinstance(client, redis.asyncio.RedisCluster):  # one slot: straight to its node
                return await cluster_transaction(client, self._key(checked[0].key), commands)
            pipe = client.pipeline(transaction=True)
            for command in commands:
                pipe.execute_command(*command, **RAW)
            replies: list[Any] = await pipe.execute()
            return replies

        replies = await self._call("MULTI/EXEC", what, transaction)
        return [self._result(op, reply) for op, reply in zip(checked, replies, strict=True)]

    def _one_slot(self, ops: Sequence[StoreOp]) -> bool:
        """Whether the operations can run as one transaction: on a cluster, their keys must
        share a hash slot, as one thread's keys do."""
        client = self._client
        if not isinstance(client, redis.asyncio.RedisCluster):
            return True
        return len({client.keyslot(self._key(op.key)) for op in ops}) == 1

    def _result(self, op: StoreOp, reply: Any) -> Any:
        if isinstance(op, GetOp):
            return self._decode(reply, op.key)
        if isinstance(op, (SetOp, DeleteOp)):
            return None
        if isinstance(op, SetIfAbsentOp):
            return reply is not None
        return bool(reply)

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        self.check_open("DEL")
        await self._call("DEL", f"key {key!r}", lambda: self._client.delete(name))

    async def scan_keys(
        self, prefix: str, *, cursor: str | None = None, count: int = 100
    ) -> tuple[list[str], str | None]:
        """Some keys that start with ``prefix``: one ``SCAN`` with ``MATCH`` and ``COUNT``
        (see :class:`~slimcache.stores.SupportsScanKeys`); on a Redis Cluster, of one primary
        after another (see :mod:`slimcache_redis._cluster_scan`).

        Raises:
            ConfigurationError: ``cursor`` is not one ``scan_keys`` returned.
            StoreError: Redis could not be reached or refused the command.
        """
        if self._cluster:
            self.check_open("SCAN")
            return await cluster_scan.scan_page(self._client, self._call, self._prefix, prefix,
                                                cursor=cursor, count=count)  # fmt: skip
        if cursor is not None and not cursor.isdigit():
            raise ConfigurationError(f"cursor must be one scan_keys returned, got {cursor!r}")
        self.check_open("SCAN")
        pattern = encode(glob_escape(self._prefix + prefix) + "*")
        position, found = await self._call(
            "SCAN",
            f"keys under {prefix!r}",
            lambda: self._client.scan(int(cursor or 0), match=pattern, count=count),
        )
        start = len(self._prefix)
        keys = [(key if isinstance(key, str) else decode(key))[start:] for key in found]
        return keys, None if int(position) == 0 else str(position)

    async def aclose(self) -> None:
        """Mark the store closed and, when it owns its client, close the client's connections.

        Calling it again does nothing.
        """
        if self.mark_closed() and self._owns_client:
            await self._client.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(client={self._client!r}, prefix={self._prefix!r})"
