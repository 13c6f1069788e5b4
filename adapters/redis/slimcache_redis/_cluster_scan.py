"""Listing the keys of a Redis Cluster page by page: its primaries one after another.

``SCAN`` walks one server's keys, so a cluster's are listed node by node: the primaries in
the order of their names, each scanned to its end before the next. The cursor names the node
and its ``SCAN`` cursor (``"10.0.0.2:7001@1792"``). Keys are stored in their tagged form (see
:mod:`slimcache_redis._cluster`), which a ``MATCH`` pattern cannot follow, so each node's keys
under the store's prefix are read and those whose original key starts with the prefix asked
for are kept.

While slots move between nodes (a resharding, a failover) a key may be missed or listed twice;
a node that is no longer a primary when its cursor comes back is left, and the listing goes on
with the next primary by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slimcache import ConfigurationError
from slimcache_redis._cluster import original_key
from slimcache_redis._commands import decode, encode, glob_escape

__all__ = ["scan_page"]

Call = Callable[[str, str, Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""How the store makes a call: the command, what it is about, the call (bounded, translated)."""

ClusterPage = tuple[str, int]
"""Where a page starts: a primary's name and its ``SCAN`` cursor."""


async def scan_page(
    client: Any, call: Call, store_prefix: str, prefix: str, *, cursor: str | None, count: int
) -> tuple[list[str], str | None]:
    """One page of the keys under ``prefix``: one ``SCAN`` of one primary.

    Args:
        client: The store's ``RedisCluster`` client.
        call: How the store makes a call.
        store_prefix: The store's own prefix, before every key's cluster name.
        prefix: What the keys listed start with.
        cursor: ``None`` for the first page; then the cursor the previous page returned.
        count: ``SCAN``'s ``COUNT``.

    Raises:
        ConfigurationError: ``cursor`` is not one a cluster's ``scan_keys`` returned.
    """
    primaries = sorted(node.name for node in client.get_primaries())
    start = start_of(primaries, cursor)
    if start is None:
        return [], None
    node, position = start
    pattern = encode(glob_escape(store_prefix) + "*")
    positions, found = await call(
        "SCAN",
        f"keys under {prefix!r} on node {node}",
        lambda: client.scan(
            position, match=pattern, count=count, target_nodes=client.get_node(node_name=node)
        ),
    )
    keys = keys_under(found, store_prefix, prefix)
    return keys, next_page(primaries, node, int(positions[node]))


def start_of(primaries: list[str], cursor: str | None) -> ClusterPage | None:
    """Where the page of ``cursor`` starts among ``primaries`` (their names, in order), or
    ``None`` when none is left to scan.

    Raises:
        ConfigurationError: ``cursor`` is not one a cluster's ``scan_keys`` returned.
    """
    if cursor is None:
        return (primaries[0], 0) if primaries else None
    node, at, position = cursor.rpartition("@")
    if not at or not node or not position.isdigit():
        raise ConfigurationError(f"cursor must be one scan_keys returned, got {cursor!r}")
    if node in primaries:
        return node, int(position)
    return _after(primaries, node)


def next_page(primaries: list[str], node: str, position: int) -> str | None:
    """The cursor after a page of ``node`` whose ``SCAN`` returned ``position``."""
    if position != 0:
        return f"{node}@{position}"
    after = _after(primaries, node)
    return None if after is None else f"{after[0]}@0"


def keys_under(found: list[Any], store_prefix: str, prefix: str) -> list[str]:
    """The keys of ``found`` (names under ``store_prefix``) whose original starts with
    ``prefix``, as the store's callers name them."""
    start = len(store_prefix)
    names = [name if isinstance(name, str) else decode(name) for name in found]
    keys = [original_key(name[start:]) for name in names]
    return [key for key in keys if key.startswith(prefix)]


def _after(primaries: list[str], node: str) -> ClusterPage | None:
    later = [name for name in primaries if name > node]
    return (later[0], 0) if later else None
