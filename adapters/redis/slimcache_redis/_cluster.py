"""Redis Cluster helpers: hash-tagged key names and the node list of a ``redis+cluster://`` URL.

Every key slimcache writes for a thread has the form ``[namespace ":"] "thread_" encoded-id ":"
suffix``, where the encoded id never holds ``:``, ``{`` or ``}``: the index, the ranges and the
lease (``index``, ``summary:<start>-<end>``, ``lease``) and the other per-thread keys
(``messages``, ``session``, ``wrapped:index``, ...).

On a cluster, :func:`cluster_key` wraps that ``thread_<encoded-id>`` segment in braces, a Redis
hash tag: ``ns:thread_abc:summary:1-2`` is stored as ``ns:{thread_abc}:summary:1-2``. Redis then
hashes only ``thread_abc``, so all keys of one thread share one slot and the index and ranges
of a request are read with one ``MGET``; threads still spread over the cluster, one slot each.

The segment tagged is the first one in the key: ``thread_`` at the start or after a ``:``,
a valid encoded id, then ``:``. A namespace cannot end inside a segment, so for all keys of one
thread the first segment is the same one, whatever the suffix: usually the thread's own, or a
segment of the namespace itself (``"tenant:thread_1"``), which then puts that namespace's
threads in one slot.

The mapping is injective over all strings, so no two keys ever share a Redis key:

- a key with a segment and no ``{``, ``}`` or NUL gets the hash tag, and its tagged form holds
  exactly one ``{`` and one ``}``, so the original is the tagged form without them;
- any other key is stored as it is, except that a key which already *is* some key's tagged form
  (``ns:{thread_abc}:index``), or begins with NUL, gets one NUL put in front. No tagged form
  holds NUL, so it cannot meet an escaped key.

Keys holding braces (a namespace like ``"a{b}"``) are therefore not tagged, and Redis applies
whatever hash tag they carry themselves.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from slimcache import ConfigurationError
from slimcache.stores import redact_url

__all__ = [
    "cluster_key",
    "defeats_hash_tags",
    "original_key",
    "parse_cluster_nodes",
]

DEFAULT_PORT = 6379

# Put in front of the rare keys that are not tagged but look like a tagged key.
_ESCAPE = "\x00"

# A thread segment: "thread_" and an encoded id, at the start of the key or after a ":", and
# followed by a ":". Encoded-id characters exclude ":", so the run cannot stop early.
_SEGMENT = re.compile(
    r"(?:\A|(?<=:))thread_(?:(?:[A-Za-z0-9_.\-]|%[0-9A-Fa-f]{2})+|~[0-9A-Fa-f]{64})(?=:)"
)


def _tagged(key: str) -> str | None:
    """The tagged form of a key with no braces or NUL, or ``None`` if it has no segment."""
    segment = _SEGMENT.search(key)
    if segment is None:
        return None
    return f"{key[: segment.start()]}{{{segment.group()}}}{key[segment.end() :]}"


def _is_tagged_form(key: str) -> bool:
    """Whether ``key`` is what :func:`cluster_key` makes of some other key."""
    if key.count("{") != 1 or key.count("}") != 1 or _ESCAPE in key:
        return False
    return _tagged(key.replace("{", "").replace("}", "")) == key


def cluster_key(key: str) -> str:
    """Return the name ``key`` is stored under on a Redis Cluster.

    A key of the form ``[namespace ":"] "thread_" encoded-id ":" suffix`` (holding no ``{``,
    ``}`` or NUL) gets its ``thread_<encoded-id>`` segment wrapped in a hash tag, so that every
    key of one thread lands in one hash slot: ``ns:thread_abc:index`` becomes
    ``ns:{thread_abc}:index``. Any other key is returned unchanged, except that one which is
    already some key's tagged form, or starts with NUL, gets a NUL in front; this keeps the
    mapping injective.

    Args:
        key: A store key.

    Returns:
        The cluster name of the key, before the store's prefix is put in front.
    """
    if "{" not in key and "}" not in key and _ESCAPE not in key:
        tagged = _tagged(key)
        return key if tagged is None else tagged
    if key.startswith(_ESCAPE) or _is_tagged_form(key):
        return _ESCAPE + key
    return key


def original_key(name: str) -> str:
    """Return the key that :func:`cluster_key` stores under ``name``: its inverse.

    Args:
        name: A cluster name of a key, without the store's prefix.
    """
    if name.startswith(_ESCAPE):
        return name[1:]
    if _is_tagged_form(name):
        return name.replace("{", "").replace("}", "")
    return name


def defeats_hash_tags(text: str) -> bool:
    """Whether a key starting with ``text`` would be hashed whole by Redis Cluster.

    Redis hashes the part between the first ``{`` and the next ``}``; when that part is empty
    (``text`` holds ``{}`` at its first ``{``) it hashes the whole key, and no later hash tag
    counts.
    """
    opening = text.find("{")
    return opening >= 0 and text[opening + 1 : opening + 2] == "}"


_BRACKETED = re.compile(r"\[(?P<host>[^\]]+)\](?::(?P<port>[^:]*))?")


def _parse_node(text: str, url: str) -> tuple[str, int]:
    bracketed = _BRACKETED.fullmatch(text)
    if bracketed:
        host, port_text = bracketed["host"], bracketed["port"]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, None
    if not host:
        raise ConfigurationError(f"node {text!r} of {redact_url(url)!r} names no host")
    if port_text is None or port_text == "":
        return unquote(host), DEFAULT_PORT
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigurationError(
            f"node {text!r} of {redact_url(url)!r} has an invalid port {port_text!r}"
        )
    return unquote(host), int(port_text)


def parse_cluster_nodes(netloc: str, url: str) -> tuple[str, list[tuple[str, int]]]:
    """Split the network location of a ``redis+cluster://`` URL.

    Args:
        netloc: ``[user[:password]@]host[:port][,host[:port]...]``; IPv6 hosts in brackets.
        url: The whole URL, for error messages.

    Returns:
        The user-info part (with its ``@``, or ``""``) and the nodes as (host, port) pairs.

    Raises:
        ConfigurationError: A node has no host or an invalid port, or no node is given.
    """
    userinfo, at, hosts = netloc.rpartition("@")
    nodes = [_parse_node(part.strip(), url) for part in hosts.split(",") if part.strip()]
    if not nodes:
        raise ConfigurationError(
            f"{redact_url(url)!r} names no cluster node (expected host:port[,...])"
        )
    return (userinfo + at), nodes
