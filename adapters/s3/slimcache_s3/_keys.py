"""Mapping store keys to S3 object keys, and the layout of the objects themselves.

A store key may be any string: ``/``, ``..``, ``%``, spaces, newlines, lone surrogates.
The object key is ``<prefix><marker><rest>``:

* ``k-`` then the key percent-encoded (UTF-8, ``surrogatepass``; only ``A-Z a-z 0-9 _ . - ~``
  stay literal, ``/`` and ``%`` included are encoded). Percent-encoding is reversible, so two
  distinct keys never share an encoding, and the marker keeps ``.`` and ``..`` from ever being
  a whole path segment.
* ``h-`` then the SHA-256 of the key, when the ``k-`` form would exceed S3's 1024-byte limit.
  The marker differs, so a hashed key can never equal a short key's encoding.

The body of every object is a one-line header carrying a random write id, then the value in
UTF-8 (``surrogatepass``). The write id makes each write's ETag unique even when two writes
store the same value, which the conditional writes in ``set_if_absent`` and
``compare_and_set`` rely on (S3's ETag is the MD5 of the body).
"""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
from urllib.parse import quote

from slimcache import ConfigurationError

__all__ = [
    "MAX_OBJECT_KEY_BYTES",
    "body_value",
    "encode_body",
    "object_key",
    "validate_prefix",
]

MAX_OBJECT_KEY_BYTES = 1024
_SHORT_MARKER = "k-"
_HASHED_MARKER = "h-"
_HASHED_LENGTH = len(_HASHED_MARKER) + 64

_BODY_MAGIC = b"slimcache-s3/1 "
_WRITE_ID_HEX = 32
_HEADER_LENGTH = len(_BODY_MAGIC) + _WRITE_ID_HEX + 1


def validate_prefix(prefix: object) -> str:
    """Check an object-key prefix and return it.

    Raises:
        ConfigurationError: The prefix is not a string, is not valid UTF-8, holds control
            characters, starts with ``/``, has a ``.`` or ``..`` path segment, or leaves no
            room for a key under S3's 1024-byte limit.
    """
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
    try:
        size = len(prefix.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigurationError(f"prefix must be valid UTF-8, got {prefix!r}") from None
    if any(unicodedata.category(char) == "Cc" for char in prefix):
        raise ConfigurationError(f"prefix must not contain control characters, got {prefix!r}")
    if prefix.startswith("/"):
        raise ConfigurationError(f"prefix must not start with '/', got {prefix!r}")
    if any(segment in (".", "..") for segment in prefix.split("/")):
        raise ConfigurationError(f"prefix must not have '.' or '..' segments, got {prefix!r}")
    if size + _HASHED_LENGTH > MAX_OBJECT_KEY_BYTES:
        raise ConfigurationError(
            f"prefix must be at most {MAX_OBJECT_KEY_BYTES - _HASHED_LENGTH} bytes of UTF-8, "
            f"got {size}"
        )
    return prefix


def object_key(prefix: str, key: str) -> str:
    """Return the S3 object key that holds store key ``key`` under ``prefix``.

    Distinct keys always give distinct object keys, and the result is at most 1024 bytes.
    """
    encoded = _SHORT_MARKER + quote(key, safe="", encoding="utf-8", errors="surrogatepass")
    # Everything after the prefix is ASCII, so characters count bytes.
    if len(prefix.encode("utf-8")) + len(encoded) <= MAX_OBJECT_KEY_BYTES:
        return prefix + encoded
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return prefix + _HASHED_MARKER + digest


def encode_body(value: str) -> bytes:
    """Return the object body for ``value``: header with a fresh write id, then the value."""
    write_id = secrets.token_hex(_WRITE_ID_HEX // 2).encode("ascii")
    return _BODY_MAGIC + write_id + b"\n" + value.encode("utf-8", "surrogatepass")


def body_value(body: bytes) -> bytes | None:
    """Return the value bytes of an object body, or ``None`` when it is not in this layout."""
    if not body.startswith(_BODY_MAGIC) or body[_HEADER_LENGTH - 1 : _HEADER_LENGTH] != b"\n":
        return None
    return body[_HEADER_LENGTH:]
