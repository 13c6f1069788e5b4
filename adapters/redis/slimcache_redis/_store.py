"""The Redis store: slimcache entries as plain Redis strings, read and written with redis-py."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from slimcache import ConfigurationError
from slimcache.adapters import (
    ClosingStore,
    check_seconds,
    combine_options,
    positive_int,
    translate_errors,
    validate_ttl,
)

__all__ = ["RedisStore"]

_SCHEMES = ("redis", "rediss", "unix")

# Redis rejects an expiry whose absolute time overflows a signed 64-bit count of milliseconds;
# anything past this bound (about 146 million years) is refused before reaching the server.
_MAX_TTL_MS = 2**62

# Values are UTF-8 on the wire. "surrogatepass" lets every Python str round-trip exactly,
# including lone surrogates, which strict UTF-8 cannot encode.
_ENCODING = "utf-8"
_ERRORS = "surrogatepass"

# Errors raised by redis-py (and by the socket layer beneath it) that mean the store failed.
# asyncio.TimeoutError is a separate class before Python 3.11.
_DRIVER_ERRORS = (RedisError, OSError, asyncio.TimeoutError, UnicodeError)

# KEYS[1]: the key. ARGV[1]: "1" when the key must hold ARGV[2], "0" when it must hold nothing
# (Redis has already dropped an expired key). ARGV[3]: the new value. ARGV[4]: PX milliseconds,
# or "" for no expiry.
_COMPARE_AND_SET = """
local current = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if current ~= ARGV[2] then return 0 end
elseif current then
  return 0
end
if ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
end
return 1
"""

# KEYS[1]: the key. ARGV[1]: the value it must hold to be deleted.
_COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def _default_retry() -> Retry:
    # One quick retry replaces a pooled connection that went stale (server restarted, idle
    # link dropped) without the caller noticing; a server that stays down fails at once
    # instead of being retried for seconds.
    return Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=1)


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
    return prefix


def _check_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _ttl_ms(ttl: float | None) -> int | None:
    seconds = validate_ttl(ttl)
    if seconds is None:
        return None
    # Round up so a sub-millisecond TTL still expires (PX 0 is an error) and never early.
    ms = max(1, math.ceil(seconds * 1000))
    if ms > _MAX_TTL_MS:
        raise ConfigurationError(f"ttl is too large for Redis, got {ttl!r} seconds")
    return ms


# Options of from_url that the store reads itself; every other query option goes to redis-py.
_STORE_OPTIONS = ("prefix", "socket_timeout", "socket_connect_timeout", "max_connections")


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """Return ``url`` without the options the store reads, and every query option it had.

    The other options stay in the URL, for redis-py to parse as it does.
    """
    parts = urlsplit(url)
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in options:
            raise ConfigurationError(f"option {name!r} appears more than once in {url!r}")
        options[name] = value
    rest = urlencode(
        [(name, value) for name, value in options.items() if name not in _STORE_OPTIONS]
    )
    return urlunsplit(parts._replace(query=rest)), options


def _max_connections(value: object) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ConfigurationError(
                f"max_connections must be a positive integer, got {value!r}"
            ) from None
    return positive_int("max_connections", value)


def _describe_keys(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(key) for key in keys[:3])
    more = f", ... ({len(keys)} keys)" if len(keys) > 3 else ""
    return f"[{shown}{more}]"


class RedisStore(ClosingStore):
    """A slimcache store kept in Redis (6.2 or newer), through redis-py's asyncio client.

    Each entry is a Redis string under ``prefix + key``; TTLs use ``SET ... PX``, so Redis
    itself expires entries. Every driver error is raised as :class:`~slimcache.StoreError`
    with the redis-py exception as its ``__cause__``.

    Args:
        client: A ``redis.asyncio.Redis`` client. Either ``decode_responses`` setting works.
        prefix: Prepended to every key, so several applications can share one database.
        owns_client: When ``True``, :meth:`aclose` also closes ``client`` and its pool.

    Raises:
        ConfigurationError: ``client`` is not a ``redis.asyncio.Redis`` or ``prefix`` is not a
            string.

    Example::

        client = redis.asyncio.Redis(host="localhost")
        store = RedisStore(client, prefix="myapp:")
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        prefix: str = "",
        owns_client: bool = False,
    ) -> None:
        if not isinstance(client, redis.asyncio.Redis):
            raise ConfigurationError(
                f"client must be a redis.asyncio.Redis, got {type(client).__name__}"
            )
        self._client = client
        self._prefix = _check_prefix(prefix)
        self._owns_client = bool(owns_client)
        # Registered once: each call sends EVALSHA, loading the script only if Redis lacks it.
        self._compare_and_set = client.register_script(_COMPARE_AND_SET)
        self._compare_and_delete = client.register_script(_COMPARE_AND_DELETE)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str | None = None,
        socket_timeout: float | None = None,
        socket_connect_timeout: float | None = None,
        max_connections: int | None = None,
        **client_options: Any,
    ) -> RedisStore:
        """Build a store, and the client it owns, from a Redis URL.

        Accepted forms: ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS) and
        ``unix:///path/to/redis.sock?db=0``. Every option may be given in the URL's query
        (``redis://localhost/0?prefix=myapp:&socket_timeout=2``) or as a keyword argument, but
        not both ways at once. Query options the store does not read go to redis-py.

        Args:
            url: The Redis URL.
            prefix: Key prefix (default none).
            socket_timeout: Seconds to wait for a reply before the operation fails (default 5).
            socket_connect_timeout: Seconds to wait for a connection to open (default 5).
            max_connections: Upper bound on the connection pool; ``None`` leaves redis-py's.
            **client_options: Passed to ``redis.asyncio.Redis.from_url`` (``password``,
                ``ssl_ca_certs``, ``retry``, ``decode_responses``, ...).

        Returns:
            A store that closes its client on :meth:`aclose`. No connection is opened yet.

        Raises:
            ConfigurationError: The URL or an option is invalid, or an option is given both in
                the URL and as a keyword argument.
        """
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        scheme = urlsplit(url).scheme.lower()
        if scheme not in _SCHEMES:
            raise ConfigurationError(
                f"url must start with redis://, rediss:// or unix://, got {url!r}"
            )
        client_url, url_options = _split_query(url)
        keywords: dict[str, Any] = {
            "prefix": prefix,
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
            "max_connections": max_connections,
            **client_options,
        }
        merged = combine_options(url, url_options, keywords)
        options: dict[str, Any] = {"retry": _default_retry()}
        options.update(
            (name, value)
            for name, value in merged.items()
            if name not in _STORE_OPTIONS and name not in url_options
        )
        for name in ("socket_timeout", "socket_connect_timeout"):
            options[name] = check_seconds(name, merged.get(name, 5.0))
        if "max_connections" in merged:
            options["max_connections"] = _max_connections(merged["max_connections"])
        store_prefix = _check_prefix(merged.get("prefix", ""))
        try:
            client = redis.asyncio.Redis.from_url(client_url, **options)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"invalid Redis URL or option for {url!r}: {exc}") from exc
        return cls(client, prefix=store_prefix, owns_client=True)

    @property
    def client(self) -> redis.asyncio.Redis:
        """The redis-py client this store talks through."""
        return self._client

    @property
    def prefix(self) -> str:
        """The prefix prepended to every key."""
        return self._prefix

    def _key(self, key: str) -> bytes:
        return (self._prefix + _check_str("key", key)).encode(_ENCODING, _ERRORS)

    @staticmethod
    def _decode(raw: bytes | str | None) -> str | None:
        if raw is None or isinstance(raw, str):
            return raw
        return raw.decode(_ENCODING, _ERRORS)

    def _errors(self, operation: str, what: str) -> AbstractContextManager[None]:
        self.check_open(operation)
        return translate_errors(f"Redis {operation}", what, _DRIVER_ERRORS)

    async def get(self, key: str) -> str | None:
        """Return the value under ``key``, or ``None`` when it is absent or expired.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        with self._errors("GET", f"key {key!r}"):
            return self._decode(await self._client.get(name))

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in order, in one ``MGET`` round trip.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        names = [self._key(key) for key in keys]
        if not names:
            return []
        with self._errors("MGET", f"keys {_describe_keys(keys)}"):
            return [self._decode(raw) for raw in await self._client.mget(names)]

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
        name = self._key(key)
        data = _check_str("value", value).encode(_ENCODING, _ERRORS)
        px = _ttl_ms(ttl)
        with self._errors("SET", f"key {key!r}"):
            await self._client.set(name, data, px=px)

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` holds nothing, atomically (``SET NX``).

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key already existed.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number of seconds.
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        data = _check_str("value", value).encode(_ENCODING, _ERRORS)
        px = _ttl_ms(ttl)
        with self._errors("SET NX", f"key {key!r}"):
            return bool(await self._client.set(name, data, px=px, nx=True))

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` holds ``expected`` (``None``: nothing), atomically.

        A Lua script compares and writes in one step on the server.

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key held something else.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number of seconds.
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        data = _check_str("value", value).encode(_ENCODING, _ERRORS)
        px = _ttl_ms(ttl)
        expiry = b"" if px is None else str(px).encode()
        if expected is None:
            args = [b"0", b"", data, expiry]
        else:
            wanted = _check_str("expected", expected).encode(_ENCODING, _ERRORS)
            args = [b"1", wanted, data, expiry]
        with self._errors("compare-and-set", f"key {key!r}"):
            return bool(await self._compare_and_set(keys=[name], args=args))

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it holds ``expected``, atomically (a Lua script).

        Returns:
            ``True`` if this call deleted the entry, ``False`` otherwise.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        wanted = _check_str("expected", expected).encode(_ENCODING, _ERRORS)
        with self._errors("compare-and-delete", f"key {key!r}"):
            return bool(await self._compare_and_delete(keys=[name], args=[wanted]))

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error.

        Raises:
            StoreError: Redis could not be reached or refused the command.
        """
        name = self._key(key)
        with self._errors("DEL", f"key {key!r}"):
            await self._client.delete(name)

    async def aclose(self) -> None:
        """Mark the store closed and, when it owns its client, close the client's connections.

        Calling it again does nothing.
        """
        if self.mark_closed() and self._owns_client:
            await self._client.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(client={self._client!r}, prefix={self._prefix!r})"
