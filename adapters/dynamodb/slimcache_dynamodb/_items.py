"""The layout of the store's items: their keys, attributes, size and expiry.

A store key may be any string, and a DynamoDB string key must be valid UTF-8 of 1 to 2048
bytes. The item key (the table's hash key) is:

* ``k:`` then the key itself, when it is valid UTF-8 (no lone surrogates) that fits;
* ``h:`` then the SHA-256 of the key (UTF-8, ``surrogatepass``) otherwise. The markers differ,
  so a hashed key never equals a short key's item key.

Each item holds the value as binary (UTF-8, ``surrogatepass``, so any string round-trips), a
random write id that changes on every write (what the batch's conditions compare), and, for
an entry with a TTL, its deadline: ``expires_at``, whole Unix seconds by the writer's clock,
rounded up, which is also the table's TTL attribute. DynamoDB deletes expired items late
(within days), so a read decides expiry by the deadline itself.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from typing import Any, NamedTuple

from slimcache.stores import decode_value

__all__ = [
    "EXPIRES_AT",
    "KEY",
    "MAX_ITEM_BYTES",
    "VALUE",
    "WRITE_ID",
    "Stored",
    "describe_key",
    "item_key",
    "item_size",
    "key_of",
    "new_item",
    "read_item",
]

KEY = "k"
"""The hash key of a table the store creates (a table of its own may name it otherwise)."""
VALUE = "v"
WRITE_ID = "w"
EXPIRES_AT = "expires_at"
"""The deadline of an entry with a TTL, and the table's TTL attribute."""

MAX_ITEM_BYTES = 400 * 1024
"""DynamoDB's limit on one item: attribute names and values, in bytes."""

_MAX_KEY_BYTES = 2048
_SHORT = "k:"
_HASHED = "h:"
# A number's size as DynamoDB counts it: at most 21 bytes.
_NUMBER_BYTES = 21
_KEY_REPR_LIMIT = 120


def describe_key(key: str) -> str:
    """A store key as messages show it: its ``repr``, cut to 120 characters."""
    text = repr(key)
    return text if len(text) <= _KEY_REPR_LIMIT else text[: _KEY_REPR_LIMIT - 3] + "..."


def item_key(key: str) -> str:
    """The hash key of the item holding store key ``key``; distinct keys never share one."""
    try:
        size = len(key.encode("utf-8")) + len(_SHORT)
    except UnicodeEncodeError:  # a lone surrogate: no DynamoDB string can hold it
        size = _MAX_KEY_BYTES + 1
    if size <= _MAX_KEY_BYTES:
        return _SHORT + key
    return _HASHED + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_of(name: str) -> str | None:
    """The store key an item key holds, or ``None`` for a hashed one (or a foreign item)."""
    return name[len(_SHORT) :] if name.startswith(_SHORT) else None


def item_size(key_attribute: str, name: str, body: bytes, deadline: int | None) -> int:
    """The size of an item as DynamoDB counts it against its 400 KB limit."""
    size = len(key_attribute) + len(name.encode("utf-8"))
    size += len(VALUE) + len(body) + len(WRITE_ID) + 32
    if deadline is not None:
        size += len(EXPIRES_AT) + _NUMBER_BYTES
    return size


def deadline_of(now: float, ttl: float | None) -> int | None:
    """The stored deadline of an entry written at ``now`` with ``ttl``: whole seconds, up."""
    return None if ttl is None else math.ceil(now + ttl)


def new_item(key_attribute: str, name: str, body: bytes, deadline: int | None) -> dict[str, Any]:
    """The item a write puts, with a fresh write id."""
    item: dict[str, Any] = {
        key_attribute: {"S": name},
        VALUE: {"B": body},
        WRITE_ID: {"S": secrets.token_hex(16)},
    }
    if deadline is not None:
        item[EXPIRES_AT] = {"N": str(deadline)}
    return item


class Stored(NamedTuple):
    """An item as read: its value, its raw attributes, and whether its deadline has passed."""

    value: str
    item: dict[str, Any]
    expired: bool


def read_item(item: dict[str, Any], now: float, where: str) -> Stored:
    """Read an item: a value the store wrote (binary), or another program's string value.

    An item without a readable value or deadline reads as the empty value / no deadline, so
    slimcache sees a value it cannot parse (a miss the next write repairs), never an error.
    """
    raw = item.get(VALUE, {})
    binary = raw.get("B")
    value = str(raw.get("S", "")) if binary is None else decode_value(bytes(binary), where=where)
    expired = False
    deadline = item.get(EXPIRES_AT, {}).get("N")
    if deadline is not None:
        try:
            expired = float(deadline) <= now
        except ValueError:
            expired = False
    return Stored(value, item, expired)
