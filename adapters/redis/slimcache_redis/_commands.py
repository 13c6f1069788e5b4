"""What the Redis store sends: values on the wire, TTLs in milliseconds, the compare scripts,
SCAN patterns.

Values are UTF-8 on the wire. ``"surrogatepass"`` lets every Python ``str`` round-trip exactly,
including lone surrogates, which strict UTF-8 cannot encode. Bytes some other program wrote
that are not UTF-8 read back with replacement characters (``decode_value``), never as an error.
"""

from __future__ import annotations

import math
import re

from redis.client import NEVER_DECODE

from slimcache import ConfigurationError
from slimcache.stores import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    StoreOp,
    validate_ttl,
)

__all__ = [
    "COMPARE_AND_DELETE",
    "COMPARE_AND_SET",
    "RAW",
    "REPLACEMENT",
    "check_str",
    "compare_and_set_args",
    "decode",
    "encode",
    "expected_of",
    "glob_escape",
    "transaction_command",
    "ttl_ms",
]

_ENCODING = "utf-8"
_ERRORS = "surrogatepass"

REPLACEMENT = "\ufffd"
"""The character a value holds where it was stored as bytes that are not UTF-8."""

RAW = {NEVER_DECODE: True}
"""Keywords asking redis-py for raw bytes even from a client built with
``decode_responses=True``, so that such a client cannot fail on bytes that are not UTF-8: the
store decodes them itself."""

# Redis rejects an expiry whose absolute time overflows a signed 64-bit count of milliseconds;
# anything past this bound (about 146 million years) is refused before reaching the server.
_MAX_TTL_MS = 2**62

COMPARE_AND_SET = """
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
"""KEYS[1]: the key. ARGV[1]: "1" when the key must hold ARGV[2], "0" when it must hold
nothing (Redis has already dropped an expired key). ARGV[3]: the new value. ARGV[4]: PX
milliseconds, or "" for no expiry."""

COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
"""KEYS[1]: the key. ARGV[1]: the value it must hold to be deleted."""


def encode(text: str) -> bytes:
    """``text`` as the store sends it."""
    return text.encode(_ENCODING, _ERRORS)


def decode(raw: bytes) -> str:
    """A key as :func:`encode` sent it."""
    return raw.decode(_ENCODING, _ERRORS)


def check_str(name: str, value: object) -> str:
    """Check that an argument is a string.

    Raises:
        ConfigurationError: Naming the argument and the type given.
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string, got {type(value).__name__}")
    return value


def ttl_ms(ttl: float | None) -> int | None:
    """A TTL in whole milliseconds for ``SET ... PX``, rounded up (``None``: no expiry).

    Raises:
        ConfigurationError: ``ttl`` is not ``None`` or a positive number, or too large for
            Redis.
    """
    seconds = validate_ttl(ttl)
    if seconds is None:
        return None
    # Round up so a sub-millisecond TTL still expires (PX 0 is an error) and never early.
    ms = max(1, math.ceil(seconds * 1000))
    if ms > _MAX_TTL_MS:
        raise ConfigurationError(f"ttl is too large for Redis, got {ttl!r} seconds")
    return ms


def expected_of(op: StoreOp) -> str:
    """The value a compare operation expects, or ``""``."""
    if isinstance(op, (CompareAndSetOp, CompareAndDeleteOp)):
        return op.expected or ""
    return ""


def compare_and_set_args(wanted: bytes | None, data: bytes, px: int | None) -> list[bytes]:
    """ARGV of the compare-and-set script: whether a value is expected, it, the new value and
    its TTL in milliseconds (empty for none)."""
    expiry = b"" if px is None else str(px).encode()
    if wanted is None:
        return [b"0", b"", data, expiry]
    return [b"1", wanted, data, expiry]


def transaction_command(name: bytes, op: StoreOp) -> tuple[bytes | str | int, ...]:
    """The Redis command carrying out ``op`` (already checked by ``check_ops``) on the Redis
    key ``name``, as a ``MULTI``/``EXEC`` transaction sends it."""
    if isinstance(op, GetOp):
        return ("GET", name)
    if isinstance(op, DeleteOp):
        return ("DEL", name)
    if isinstance(op, CompareAndDeleteOp):
        return ("EVAL", COMPARE_AND_DELETE, 1, name, encode(op.expected))
    data = encode(op.value)
    px = ttl_ms(op.ttl)
    if isinstance(op, CompareAndSetOp):
        wanted = None if op.expected is None else encode(op.expected)
        return ("EVAL", COMPARE_AND_SET, 1, name, *compare_and_set_args(wanted, data, px))
    expires = () if px is None else ("PX", px)
    condition = ("NX",) if isinstance(op, SetIfAbsentOp) else ()
    return ("SET", name, data, *condition, *expires)


# What a SCAN MATCH pattern reads as glob syntax.
_GLOB = re.compile(r"[*?\[\]\\]")


def glob_escape(text: str) -> str:
    """``text`` as a ``SCAN`` ``MATCH`` pattern that matches it literally."""
    return _GLOB.sub(r"\\\g<0>", text)
