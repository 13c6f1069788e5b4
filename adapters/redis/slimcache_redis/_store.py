"""The Redis store: slimcache entries as plain Redis strings, read and written with redis-py."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from slimcache._exceptions import ConfigurationError, StoreError
from slimcache._store import validate_ttl

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


def _check_timeout(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number of seconds or None, got {value!r}")
    if not value > 0 or math.isinf(value):
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds, got {value!r}"
        )
    return float(value)


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


def _split_prefix(url: str) -> tuple[str, str | None]:
    """Remove the ``prefix`` query option, which redis-py does not know, from ``url``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "prefix"]
    if len(prefixes) > 1:
        raise ConfigurationError(f"the prefix option appears more than once in {url!r}")
    rest = urlencode([(name, value) for name, value in query if name != "prefix"])
    return urlunsplit(parts._replace(query=rest)), (prefixes[0] if prefixes else None)


def _describe_keys(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(key) for key in keys[:3])
    more = f", ... ({len(keys)} keys)" if len(keys) > 3 else ""
    return f"[{shown}{more}]"


class RedisStore:
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
        self._closed = False
        # Registered once: each call sends EVALSHA, loading the script only if Redis lacks it.
        self._compare_and_set = client.register_script(_COMPARE_AND_SET)
        self._compare_and_delete = client.register_script(_COMPARE_AND_DELETE)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = "",
        socket_timeout: float | None = 5.0,
        socket_connect_timeout: float | None = 5.0,
        max_connections: int | None = None,
        **client_options: Any,
    ) -> RedisStore:
        """Build a store, and the client it owns, from a Redis URL.

        Accepted forms: ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS) and
        ``unix:///path/to/redis.sock?db=0``. A ``prefix`` query option sets the key prefix
        (``redis://localhost/0?prefix=myapp:``); other query options go to redis-py, and win
        over keyword arguments as they do there.

        Args:
            url: The Redis URL.
            prefix: Key prefix; may also be given in the URL, but not both ways at once.
            socket_timeout: Seconds to wait for a reply before the operation fails.
            socket_connect_timeout: Seconds to wait for a connection to open.
            max_connections: Upper bound on the connection pool; ``None`` leaves redis-py's.
            **client_options: Passed to ``redis.asyncio.Redis.from_url`` (``password``,
                ``ssl_ca_certs``, ``retry``, ``decode_responses``, ...).

        Returns:
            A store that closes its client on :meth:`aclose`. No connection is opened yet.

        Raises:
            ConfigurationError: The URL or an option is invalid.
        """
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        scheme = urlsplit(url).scheme.lower()
        if scheme not in _SCHEMES:
            raise ConfigurationError(
                f"url must start with redis://, rediss:// or unix://, got {url!r}"
            )
        prefix = _check_prefix(prefix)
        socket_timeout = _check_timeout("socket_timeout", socket_timeout)
        socket_connect_timeout = _check_timeout("socket_connect_timeout", socket_connect_timeout)
        if max_connections is not None and (
            isinstance(max_connections, bool)
            or not isinstance(max_connections, int)
            or max_connections < 1
        ):
            raise ConfigurationError(
                f"max_connections must be a positive integer or None, got {max_connections!r}"
            )
        client_url, url_prefix = _split_prefix(url)
        if url_prefix is not None:
            if prefix and prefix != url_prefix:
                raise ConfigurationError(
                    f"prefix given twice with different values: {prefix!r} as an argument "
                    f"and {url_prefix!r} in the URL"
                )
            prefix = url_prefix
        options: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
            "retry": _default_retry(),
            **client_options,
        }
        if max_connections is not None:
            options["max_connections"] = max_connections
        try:
            client = redis.asyncio.Redis.from_url(client_url, **options)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"invalid Redis URL or option for {url!r}: {exc}") from exc
        return cls(client, prefix=prefix, owns_client=True)

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

    @contextmanager
    def _errors(self, operation: str, what: str) -> Iterator[None]:
        if self._closed:
            raise StoreError(f"Redis {operation} of {what} failed: the store is closed")
        try:
            yield
        except _DRIVER_ERRORS as exc:
            detail = str(exc) or type(exc).__name__
            raise StoreError(f"Redis {operation} of {what} failed: {detail}") from exc

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
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> RedisStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(client={self._client!r}, prefix={self._prefix!r})"
