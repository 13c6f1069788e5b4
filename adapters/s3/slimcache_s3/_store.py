"""The S3 store: one object per key, TTL in the object's metadata, boto3 calls in worker threads.

This module holds the store's operations; :mod:`slimcache_s3._url` reads a URL and its options
into a boto3 client, :mod:`slimcache_s3._objects` makes the S3 requests behind each operation,
and :mod:`slimcache_s3._keys` maps store keys to object keys.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    ReadTimeoutError,
)

from slimcache import ConfigurationError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    BoundedStore,
    DatabaseTarget,
    endpoint_of,
    pool_size,
    validate_ttl,
)
from slimcache_s3._keys import encode_body, object_key, validate_prefix
from slimcache_s3._objects import EXPIRES_AT, Objects, describe_key
from slimcache_s3._url import client_from_url, validate_bucket_name

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3Store"]

_T = TypeVar("_T")


def _check_expected(expected: object) -> None:
    if not isinstance(expected, str):
        raise ConfigurationError(f"expected must be a string, got {type(expected).__name__}")


class S3Store(BoundedStore):
    """A store keeping each key in one S3 object, for S3 and S3-compatible servers.

    Every boto3 call runs on a thread pool the store owns (as many threads as the client has
    connections), so the event loop never waits on the network and a stuck endpoint cannot
    starve the loop's default executor, which other code shares. Each call fails with
    :class:`~slimcache.StoreError` after ``timeout`` seconds without an answer, whatever the
    client's own timeouts; a thread still waiting on the network then finishes on its own.

    Keys may hold any characters: they are percent-encoded (or hashed when long) into object
    keys under ``prefix``, see :meth:`object_key`. A TTL is kept in the object's metadata
    (``x-amz-meta-expires-at``, Unix seconds) and checked on every read; an expired object
    reads as absent and is deleted on that read. S3 never removes it by itself, so a bucket
    lifecycle rule is the way to bound storage for keys never read again. An object some other
    program wrote reads as its content decoded as UTF-8 (with a warning), never as an error.

    ``set_if_absent``, ``compare_and_set`` and ``compare_and_delete`` use conditional requests
    (``If-None-Match: *``, and ``If-Match`` on the ETag just read), which AWS S3 has honoured
    since 2024.

    Args:
        client: A boto3 S3 client. :meth:`aclose` closes it.
        bucket: An existing bucket.
        prefix: Prepended to every object key as it is (give it a trailing ``/`` to get a
            folder), so several stores can share a bucket.
        clock: Wall clock in Unix seconds, compared with the stored expiry times; replaceable
            in tests.
        timeout: Seconds each call may take, end to end, before it fails with ``StoreError``.

    Raises:
        ConfigurationError: The bucket name, prefix or timeout is invalid, or ``client`` is
            not an S3 client.
    """

    expiry_clock = "writer"  # expiry times by the writer's clock (see SupportsOwnExpiry)

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        *,
        prefix: str = "",
        clock: Callable[[], float] = time.time,
        timeout: float = DEFAULT_STORE_TIMEOUT,
    ) -> None:
        for method in ("get_object", "put_object", "head_object", "delete_object", "close"):
            if not callable(getattr(client, method, None)):
                raise ConfigurationError(
                    f"client must be a boto3 S3 client, got {type(client).__name__} "
                    f"(it has no {method}())"
                )
        self.bound_calls(timeout)
        self._client = client
        self._bucket = validate_bucket_name(bucket)
        self._prefix = validate_prefix(prefix)
        self._clock = clock
        self._objects = Objects(client, self._bucket, clock)
        self._target = DatabaseTarget("aws.s3", *endpoint_of(client), self._bucket)
        self._concurrency = pool_size(client)
        # One thread per pooled connection: more could only wait for a connection.
        self._executor = ThreadPoolExecutor(
            max_workers=self._concurrency, thread_name_prefix="slimcache-s3"
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str | None = None,
        timeout: float | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        max_attempts: int | None = None,
        max_pool_connections: int | None = None,
        addressing_style: str | None = None,
        profile_name: str | None = None,
        **client_options: Any,
    ) -> S3Store:
        """Build a store and its boto3 client from ``s3://bucket/prefix?option=value&...``.

        The URL's path, if any, becomes the prefix (with a trailing ``/``). Its query may hold
        ``timeout``, ``endpoint_url``, ``region`` (or ``region_name``), ``connect_timeout``,
        ``read_timeout``, ``max_attempts``, ``max_pool_connections`` and ``addressing_style``;
        giving one of them both in the URL and as a keyword argument is an error. Credentials
        never go in the URL: pass them as keywords, or let boto3 find them (environment,
        profile, role).

        The connect and read timeouts of every attempt add up to at most ``timeout``, so a
        thread talking to a stuck endpoint gives up within the bound too (boto3's back-off
        between retries comes on top, when ``max_attempts`` asks for retries).

        Args:
            url: For example ``s3://my-bucket/summaries?region=eu-west-1`` or
                ``s3://cache?endpoint_url=http://127.0.0.1:9000`` for an S3-compatible server.
            prefix: Object-key prefix, used as given; replaces the URL's path.
            timeout: Seconds each call may take, end to end (default
                :data:`~slimcache.stores.toolkit.DEFAULT_STORE_TIMEOUT`).
            endpoint_url: Server to talk to instead of AWS (MinIO, moto, Ceph, ...).
            region_name: AWS region.
            connect_timeout: Seconds to wait for a connection (default: half of what each
                attempt may take, ``timeout / (max_attempts + 1)``).
            read_timeout: Seconds to wait for a response (default: the rest of each attempt's
                share).
            max_attempts: Retries after a failed first attempt, in botocore's ``standard``
                retry mode (botocore's ``max_attempts``; default 0).
            max_pool_connections: Size of the connection pool and of the store's thread pool,
                which also bounds how many reads :meth:`get_many` runs at once (default 10).
            addressing_style: ``"auto"``, ``"path"`` or ``"virtual"`` bucket addressing.
            profile_name: A profile of the shared AWS config files.
            **client_options: ``aws_access_key_id``, ``aws_secret_access_key``,
                ``aws_session_token``, ``verify``, ``use_ssl``, or ``config`` (a
                ``botocore.config.Config`` merged over the one built from the options above).

        Raises:
            ConfigurationError: The URL, an option or the bucket name is invalid, an option is
                given both ways, or the connect and read timeouts of all attempts exceed
                ``timeout``.
        """
        opened = client_from_url(
            url,
            prefix,
            {
                "timeout": timeout,
                "endpoint_url": endpoint_url,
                "region_name": region_name,
                "connect_timeout": connect_timeout,
                "read_timeout": read_timeout,
                "max_attempts": max_attempts,
                "max_pool_connections": max_pool_connections,
                "addressing_style": addressing_style,
            },
            profile_name,
            client_options,
        )
        return cls(opened.client, opened.bucket, prefix=opened.prefix, timeout=opened.timeout)

    @property
    def bucket(self) -> str:
        """The bucket holding the objects."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """The prefix of every object key."""
        return self._prefix

    @property
    def client(self) -> S3Client:
        """The boto3 S3 client the store calls."""
        return self._client

    @property
    def database_target(self) -> DatabaseTarget:
        """S3, its endpoint's host and port and the bucket, as telemetry reports them."""
        return self._target

    def object_key(self, key: str) -> str:
        """Return the S3 object key that holds store key ``key``.

        ``<prefix>k-<key percent-encoded>``, or ``<prefix>h-<sha256 of key>`` when that would
        exceed S3's 1024-byte limit. Distinct keys never share an object key.

        Raises:
            ConfigurationError: ``key`` is not a string.
        """
        if not isinstance(key, str):
            raise ConfigurationError(f"key must be a string, got {type(key).__name__}")
        return object_key(self._prefix, key)

    # -- the Store protocol -------------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        """Return the value under ``key``, or ``None`` when absent or expired.

        Raises:
            StoreError: S3 failed, or the object is not one this store wrote.
        """
        name = self.object_key(key)
        return await self._run("get", key, name, lambda: self._objects.get(key, name))

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in order, reading up to the pool size at once.

        Raises:
            StoreError: A read failed.
        """
        names = {key: self.object_key(key) for key in keys}
        if not names:
            return []
        limit = asyncio.Semaphore(self._concurrency)

        async def read(key: str) -> str | None:
            async with limit:
                return await self.get(key)

        values = await asyncio.gather(*(read(key) for key in names))
        found = dict(zip(names, values, strict=True))
        return [found[key] for key in keys]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (forever if ``None``).

        Raises:
            ConfigurationError: ``value`` is not a string or ``ttl`` is invalid.
            StoreError: S3 failed.
        """
        name, body, metadata = self._prepare(key, value, ttl)
        await self._run("set", key, name, lambda: self._objects.put(name, body, metadata))

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` holds nothing or only an expired entry.

        Atomic through S3 conditional writes: of many concurrent callers, one gets ``True``.

        Returns:
            Whether this call wrote the value.

        Raises:
            ConfigurationError: ``value`` is not a string or ``ttl`` is invalid.
            StoreError: S3 failed.
        """
        name, body, metadata = self._prepare(key, value, ttl)
        return await self._run(
            "set_if_absent",
            key,
            name,
            lambda: self._objects.set_if_absent(name, body, metadata),
        )

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` holds ``expected`` (``None``: nothing live).

        The object is read, compared, then replaced with ``If-Match`` on the ETag that was
        read, so a write by anyone in between makes this call return ``False``; with
        ``expected=None`` it is :meth:`set_if_absent`.

        Returns:
            Whether this call wrote the value.

        Raises:
            ConfigurationError: ``value`` or ``expected`` is not a string, or ``ttl`` is invalid.
            StoreError: S3 failed.
        """
        name, body, metadata = self._prepare(key, value, ttl)
        if expected is None:
            return await self._run(
                "compare_and_set",
                key,
                name,
                lambda: self._objects.set_if_absent(name, body, metadata),
            )
        _check_expected(expected)
        return await self._run(
            "compare_and_set",
            key,
            name,
            lambda: self._objects.compare_and_set(key, name, expected, body, metadata),
        )

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected``: a read, then ``DELETE`` with ``If-Match``.

        Returns:
            Whether this call deleted the entry.

        Raises:
            ConfigurationError: ``expected`` is not a string.
            StoreError: S3 failed.
        """
        name = self.object_key(key)
        _check_expected(expected)
        return await self._run(
            "compare_and_delete",
            key,
            name,
            lambda: self._objects.compare_and_delete(key, name, expected),
        )

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error.

        Raises:
            StoreError: S3 failed.
        """
        name = self.object_key(key)
        await self._run("delete", key, name, lambda: self._objects.delete(name))

    async def scan_keys(
        self, prefix: str, *, cursor: str | None = None, count: int = 100
    ) -> tuple[list[str], str | None]:
        """Up to ``count`` keys that start with ``prefix``, after ``cursor``: one
        ``ListObjectsV2`` (see :class:`~slimcache.stores.SupportsScanKeys`). A key too long for
        an object key of its own (kept under its hash) is not listed; an expired entry that no
        read has deleted yet is.

        Raises:
            StoreError: S3 failed.
        """
        listed = object_key(self._prefix, prefix)
        after = "" if cursor is None else object_key(self._prefix, cursor)

        def page() -> Any:
            return self._client.list_objects_v2(
                Bucket=self._bucket, Prefix=listed, MaxKeys=count, StartAfter=after
            )

        reply = await self._run("scan_keys", prefix, listed, page)
        start = len(object_key(self._prefix, ""))
        names = [item["Key"][start:] for item in reply.get("Contents", [])]
        keys = [unquote(name, errors="surrogatepass") for name in names]
        return keys, keys[-1] if reply.get("IsTruncated") and keys else None

    async def aclose(self) -> None:
        """Stop the store's threads and close the boto3 client; the store is unusable afterwards.

        Calls still under way are not waited for: their threads end when the client's own
        timeouts run out at the latest.
        """
        if not self.mark_closed():
            return
        self._executor.shutdown(wait=False)
        # Closing the client's connection pools is quick; it goes through a thread all the
        # same, as every other boto3 call does.
        await asyncio.to_thread(self._client.close)

    def __repr__(self) -> str:
        return f"S3Store(bucket={self._bucket!r}, prefix={self._prefix!r})"

    # -- running a call ------------------------------------------------------------------------

    def _prepare(
        self, key: str, value: str, ttl: float | None
    ) -> tuple[str, bytes, dict[str, str]]:
        """Check a write: the object key, body and metadata (its expiry time) it writes."""
        if not isinstance(value, str):
            raise ConfigurationError(f"value must be a string, got {type(value).__name__}")
        ttl = validate_ttl(ttl)
        name = self.object_key(key)
        metadata = {} if ttl is None else {EXPIRES_AT: repr(self._clock() + ttl)}
        return name, encode_body(value), metadata

    async def _run(self, operation: str, key: str, name: str, call: Callable[[], _T]) -> _T:
        """Run ``call`` on the store's threads within the store's timeout."""
        self.check_open(operation)
        where = f"key {describe_key(key)} (object {name!r} in bucket {self._bucket!r})"
        context = contextvars.copy_context()
        work = asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(context.run, call)
        )
        # Cancelling the wait returns at once; the thread finishes on its own.
        return await self.run_call(
            work,
            f"S3 {operation}",
            where,
            errors=(BotoCoreError, ClientError),
            timeouts=(ReadTimeoutError, ConnectTimeoutError),
            in_place=True,
        )
