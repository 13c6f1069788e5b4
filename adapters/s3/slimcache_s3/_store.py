"""The S3 store: one object per key, TTL in the object's metadata, boto3 calls in worker threads."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

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
    check_seconds,
    combine_options,
    decode_value,
    redact_url,
    validate_ttl,
)
from slimcache_s3._keys import body_value, encode_body, object_key, validate_prefix

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3Store"]

_log = logging.getLogger("slimcache_s3")

_T = TypeVar("_T")

# Stored as the object's user metadata: the header x-amz-meta-expires-at, Unix seconds.
EXPIRES_AT = "expires-at"

# No retries by default: the time bound is spent on one attempt, and a retried conditional
# write can report as lost a write its first attempt made.
DEFAULT_MAX_ATTEMPTS = 0
DEFAULT_MAX_POOL_CONNECTIONS = 10

# Current S3 naming rules for general purpose buckets.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IPV4_LIKE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_REGION = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# Query options of an s3:// URL, and the from_url keyword each one fills.
_URL_OPTIONS = {
    "timeout": "timeout",
    "endpoint_url": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_attempts": "max_attempts",
    "max_pool_connections": "max_pool_connections",
    "addressing_style": "addressing_style",
}
# Keyword options from_url hands to boto3 as they are (credentials, TLS, extra botocore Config).
_CLIENT_OPTIONS = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "verify", "use_ssl"}
)
_ADDRESSING_STYLES = ("auto", "path", "virtual")
_KEY_REPR_LIMIT = 120


def validate_bucket_name(bucket: object) -> str:
    """Check ``bucket`` against S3's bucket naming rules and return it.

    Raises:
        ConfigurationError: The name breaks a rule; the message says which.
    """
    if not isinstance(bucket, str):
        raise ConfigurationError(f"bucket must be a string, got {type(bucket).__name__}")
    if not _BUCKET_NAME.match(bucket):
        raise ConfigurationError(
            f"bucket must be 3-63 characters of lowercase letters, digits, '.' and '-', "
            f"starting and ending with a letter or digit, got {bucket!r}"
        )
    if ".." in bucket or ".-" in bucket or "-." in bucket:
        raise ConfigurationError(f"bucket must not have '..', '.-' or '-.', got {bucket!r}")
    if _IPV4_LIKE.match(bucket):
        raise ConfigurationError(f"bucket must not look like an IP address, got {bucket!r}")
    if bucket.startswith(_RESERVED_BUCKET_PREFIXES) or bucket.endswith(_RESERVED_BUCKET_SUFFIXES):
        raise ConfigurationError(f"bucket uses a prefix or suffix S3 reserves, got {bucket!r}")
    return bucket


def _integer(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ConfigurationError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer of at least {minimum}, got {value!r}")
    return value


def _endpoint(value: object) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"endpoint_url must be a string, got {type(value).__name__}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"endpoint_url must be an http:// or https:// URL with a host, got {value!r}"
        )
    return value


def _region(value: object) -> str:
    if not isinstance(value, str) or not _REGION.match(value):
        raise ConfigurationError(
            f"region_name must be an AWS region name such as 'us-east-1', got {value!r}"
        )
    return value


def _short(key: str) -> str:
    text = repr(key)
    return text if len(text) <= _KEY_REPR_LIMIT else text[: _KEY_REPR_LIMIT - 3] + "..."


def _status(exc: ClientError) -> tuple[str, int]:
    """Return the error code and HTTP status of a failed S3 call."""
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return code, status


def _is_missing_key(exc: ClientError) -> bool:
    code, status = _status(exc)
    # HEAD answers carry no body, hence no code: a bare 404 there means the key.
    return code == "NoSuchKey" or (status == 404 and code in ("404", "NotFound"))


def _is_condition_failed(exc: ClientError) -> bool:
    code, status = _status(exc)
    return status == 412 or code == "PreconditionFailed"


def _is_conditional_conflict(exc: ClientError) -> bool:
    code, _ = _status(exc)
    return code == "ConditionalRequestConflict"


def _lost_the_condition(exc: ClientError) -> bool:
    """Whether a conditional write or delete failed because the object changed or vanished."""
    return _is_missing_key(exc) or _is_condition_failed(exc) or _is_conditional_conflict(exc)


def _check_expected(expected: object) -> None:
    if not isinstance(expected, str):
        raise ConfigurationError(f"expected must be a string, got {type(expected).__name__}")


class _Read(NamedTuple):
    """An object as read: its value, its ETag, and whether its TTL has run out."""

    value: str
    etag: str
    expired: bool


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
        config = getattr(getattr(client, "meta", None), "config", None)
        pool = getattr(config, "max_pool_connections", None)
        self._concurrency = pool if isinstance(pool, int) and pool > 0 else 10
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
        if not isinstance(url, str):
            raise ConfigurationError(f"store URL must be a string, got {type(url).__name__}")
        parts = urlsplit(url)
        if parts.scheme.lower() != "s3":
            raise ConfigurationError(f"S3Store needs an s3:// URL, got {redact_url(url)!r}")
        if parts.username is not None or parts.password is not None or ":" in parts.netloc:
            raise ConfigurationError(
                "an s3:// URL names only the bucket (s3://bucket/prefix); pass credentials and "
                "the endpoint as options"
            )
        if parts.fragment:
            raise ConfigurationError(f"an s3:// URL has no fragment, got {redact_url(url)!r}")
        bucket = validate_bucket_name(parts.netloc)
        path = unquote(parts.path).lstrip("/")
        if prefix is None:
            prefix = path if not path or path.endswith("/") else path + "/"
        elif path:
            raise ConfigurationError(
                f"the prefix is given twice: in the URL path ({path!r}) and as prefix={prefix!r}"
            )

        keywords: dict[str, object] = {
            "timeout": timeout,
            "endpoint_url": endpoint_url,
            "region_name": region_name,
            "connect_timeout": connect_timeout,
            "read_timeout": read_timeout,
            "max_attempts": max_attempts,
            "max_pool_connections": max_pool_connections,
            "addressing_style": addressing_style,
        }
        try:
            pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        except ValueError:
            raise ConfigurationError(f"malformed query in store URL {redact_url(url)!r}") from None
        url_options: dict[str, str] = {}
        for name, value in pairs:
            target = _URL_OPTIONS.get(name)
            if target is None:
                known = ", ".join(sorted(_URL_OPTIONS))
                raise ConfigurationError(f"unknown s3:// option {name!r} (known: {known})")
            if target in url_options:
                raise ConfigurationError(f"s3:// option {name!r} is given twice")
            url_options[target] = value
        options = combine_options(url, url_options, keywords)

        unknown = sorted(set(client_options) - _CLIENT_OPTIONS - {"config"})
        if unknown:
            known = ", ".join(sorted(_CLIENT_OPTIONS | {"config", "profile_name"}))
            raise ConfigurationError(f"unknown S3Store option {unknown[0]!r} (known: {known})")

        bound = check_seconds("timeout", options.get("timeout", DEFAULT_STORE_TIMEOUT))
        assert bound is not None
        config_options = _client_config(options, bound)
        extra_config = client_options.pop("config", None)
        boto_kwargs: dict[str, Any] = dict(client_options)
        if "endpoint_url" in options:
            boto_kwargs["endpoint_url"] = _endpoint(options["endpoint_url"])
        if "region_name" in options:
            boto_kwargs["region_name"] = _region(options["region_name"])
        if profile_name is not None and not isinstance(profile_name, str):
            raise ConfigurationError(
                f"profile_name must be a string, got {type(profile_name).__name__}"
            )
        validate_prefix(prefix)
        client = _make_client(config_options, extra_config, profile_name, boto_kwargs)
        return cls(client, bucket, prefix=prefix, timeout=bound)

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
        return await self._run("get", key, name, lambda: self._get_sync(key, name))

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
        await self._run(
            "set",
            key,
            name,
            lambda: self._client.put_object(
                Bucket=self._bucket, Key=name, Body=body, Metadata=metadata
            ),
        )

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
            lambda: self._set_if_absent_sync(name, body, metadata),
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
                lambda: self._set_if_absent_sync(name, body, metadata),
            )
        _check_expected(expected)
        return await self._run(
            "compare_and_set",
            key,
            name,
            lambda: self._compare_and_set_sync(key, name, expected, body, metadata),
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
            lambda: self._compare_and_delete_sync(key, name, expected),
        )

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error.

        Raises:
            StoreError: S3 failed.
        """
        name = self.object_key(key)
        await self._run(
            "delete",
            key,
            name,
            lambda: self._client.delete_object(Bucket=self._bucket, Key=name),
        )

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

    # -- helpers, the *_sync ones run in a worker thread ----------------------------------------

    def _prepare(
        self, key: str, value: str, ttl: float | None
    ) -> tuple[str, bytes, dict[str, str]]:
        if not isinstance(value, str):
            raise ConfigurationError(f"value must be a string, got {type(value).__name__}")
        ttl = validate_ttl(ttl)
        name = self.object_key(key)
        metadata = {} if ttl is None else {EXPIRES_AT: repr(self._clock() + ttl)}
        return name, encode_body(value), metadata

    async def _run(self, operation: str, key: str, name: str, call: Callable[[], _T]) -> _T:
        """Run ``call`` on the store's threads within the store's timeout."""
        self.check_open(operation)
        where = f"key {_short(key)} (object {name!r} in bucket {self._bucket!r})"
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

    def _expired(self, metadata: Mapping[str, str], name: str) -> bool:
        raw = metadata.get(EXPIRES_AT)
        if raw is None:
            return False
        try:
            expires_at = float(raw)
        except ValueError:
            expires_at = math.nan
        if math.isnan(expires_at):
            # Some other program wrote it: keep the object rather than fail every read of it.
            _log.warning(
                "object %r in bucket %r has a malformed x-amz-meta-%s %r; treating it as "
                "never expiring",
                name,
                self._bucket,
                EXPIRES_AT,
                raw,
            )
            return False
        return expires_at <= self._clock()

    def _decode(self, key: str, name: str, body: bytes) -> str:
        """The value an object holds: after the header this store writes, else the whole body."""
        where = f"object {name!r} in bucket {self._bucket!r} (key {_short(key)})"
        raw = body_value(body)
        if raw is None:
            _log.warning(
                "%s was not written by slimcache's S3Store (no header line); reading its "
                "whole content as the value",
                where,
            )
            raw = body
        return decode_value(raw, where=where)

    def _read_sync(self, key: str, name: str) -> _Read | None:
        """Read the object under ``name``; ``None`` when there is none."""
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=name)
        except ClientError as exc:
            if _is_missing_key(exc):
                return None
            raise
        with response["Body"] as stream:
            body = stream.read()
        expired = self._expired(response.get("Metadata", {}), name)
        return _Read(self._decode(key, name, body), response["ETag"], expired)

    def _get_sync(self, key: str, name: str) -> str | None:
        found = self._read_sync(key, name)
        if found is None:
            return None
        if found.expired:
            self._delete_expired_sync(name, found.etag)
            return None
        return found.value

    def _compare_and_set_sync(
        self, key: str, name: str, expected: str, body: bytes, metadata: dict[str, str]
    ) -> bool:
        found = self._read_sync(key, name)
        if found is None or found.expired or found.value != expected:
            return False
        try:
            # Only over the object just compared: any write since then changed the ETag.
            self._client.put_object(
                Bucket=self._bucket, Key=name, Body=body, Metadata=metadata, IfMatch=found.etag
            )
        except ClientError as exc:
            if _lost_the_condition(exc):
                return False
            raise
        return True

    def _compare_and_delete_sync(self, key: str, name: str, expected: str) -> bool:
        found = self._read_sync(key, name)
        if found is None or found.expired or found.value != expected:
            return False
        try:
            self._client.delete_object(Bucket=self._bucket, Key=name, IfMatch=found.etag)
        except ClientError as exc:
            if _lost_the_condition(exc):
                return False
            raise
        return True

    def _delete_expired_sync(self, name: str, etag: str) -> None:
        # Only the object that was read: a fresh one written since then has another ETag.
        try:
            self._client.delete_object(Bucket=self._bucket, Key=name, IfMatch=etag)
        except ClientError as exc:
            if _is_missing_key(exc) or _is_condition_failed(exc):
                return
            # The read itself succeeded; an expired object left behind is harmless.
            _log.warning("could not delete expired object %r: %s", name, exc)

    def _set_if_absent_sync(self, name: str, body: bytes, metadata: dict[str, str]) -> bool:
        # Two rounds: the object can vanish between the failed write and the look at it.
        for _ in range(2):
            try:
                self._client.put_object(
                    Bucket=self._bucket, Key=name, Body=body, Metadata=metadata, IfNoneMatch="*"
                )
                return True
            except ClientError as exc:
                if _is_conditional_conflict(exc):
                    return False
                if not _is_condition_failed(exc):
                    raise
            try:
                head = self._client.head_object(Bucket=self._bucket, Key=name)
            except ClientError as exc:
                if _is_missing_key(exc):
                    continue
                raise
            if not self._expired(head.get("Metadata", {}), name):
                return False
            try:
                # Replace the expired object only if nobody replaced it first.
                self._client.put_object(
                    Bucket=self._bucket,
                    Key=name,
                    Body=body,
                    Metadata=metadata,
                    IfMatch=head["ETag"],
                )
                return True
            except ClientError as exc:
                if _is_missing_key(exc):
                    continue
                if _is_condition_failed(exc) or _is_conditional_conflict(exc):
                    return False
                raise
        return False


def _client_config(options: Mapping[str, object], timeout: float) -> dict[str, Any]:
    """Validate the connection options and return the ``botocore.config.Config`` arguments.

    Each attempt gets ``timeout / attempts`` seconds, split between connecting and reading
    unless the caller set one or both.
    """
    retries = _integer("max_attempts", options.get("max_attempts", DEFAULT_MAX_ATTEMPTS), minimum=0)
    share = timeout / (retries + 1)
    connect = options.get("connect_timeout")
    read = options.get("read_timeout")
    connect_seconds = None if connect is None else check_seconds("connect_timeout", connect)
    read_seconds = None if read is None else check_seconds("read_timeout", read)
    if connect_seconds is None:
        connect_seconds = share / 2 if read_seconds is None else share - read_seconds
    if read_seconds is None:
        read_seconds = share - connect_seconds
    if (
        connect_seconds <= 0
        or read_seconds <= 0
        or connect_seconds + read_seconds > share * (1 + 1e-9)
    ):
        raise ConfigurationError(
            f"connect_timeout + read_timeout ({connect!r} + {read!r} s) of each of the "
            f"{retries + 1} attempts (max_attempts={retries} retries) must fit in "
            f"timeout ({timeout:g} s): raise timeout or lower them"
        )
    config: dict[str, Any] = {
        "connect_timeout": connect_seconds,
        "read_timeout": read_seconds,
        "retries": {"max_attempts": retries, "mode": "standard"},
        "max_pool_connections": _integer(
            "max_pool_connections",
            options.get("max_pool_connections", DEFAULT_MAX_POOL_CONNECTIONS),
            minimum=1,
        ),
    }
    style = options.get("addressing_style")
    if style is not None:
        if style not in _ADDRESSING_STYLES:
            raise ConfigurationError(
                f"addressing_style must be one of {', '.join(_ADDRESSING_STYLES)}, got {style!r}"
            )
        config["s3"] = {"addressing_style": style}
    return config


def _make_client(
    config_options: dict[str, Any],
    extra_config: object,
    profile_name: str | None,
    boto_kwargs: dict[str, Any],
) -> S3Client:
    import boto3.session
    from botocore.config import Config

    config = Config(**config_options)
    if extra_config is not None:
        if not isinstance(extra_config, Config):
            raise ConfigurationError(
                f"config must be a botocore.config.Config, got {type(extra_config).__name__}"
            )
        config = config.merge(extra_config)
    try:
        # A session per store: boto3's default session is not safe to share across threads.
        session = boto3.session.Session(profile_name=profile_name)
        return session.client("s3", config=config, **boto_kwargs)
    except (BotoCoreError, ValueError) as exc:
        raise ConfigurationError(f"cannot build the S3 client: {exc}") from exc
