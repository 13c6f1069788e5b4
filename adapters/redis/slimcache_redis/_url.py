"""From a Redis URL and options to a client: what ``RedisStore.from_url`` reads and checks.

Every option may be given in the URL's query or as a keyword argument, never both. The store
reads its own (:data:`STORE_OPTIONS`); the other query options stay in the URL for redis-py to
parse, and one that neither reads (a misspelling) is refused before anything is opened. A
``redis+cluster://`` URL names the nodes to discover a cluster from. Every message shows the URL
with its password hidden.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import (
    URL_QUERY_ARGUMENT_PARSERS,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException

from slimcache import ConfigurationError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    DatabaseTarget,
    check_count,
    check_seconds,
    combine_options,
    driver_timeout,
    redact_url,
    reject_unknown_options,
)
from slimcache_redis._cluster import defeats_hash_tags, parse_cluster_nodes

__all__ = [
    "STORE_OPTIONS",
    "ClientFromURL",
    "check_prefix",
    "client_from_url",
    "database_target",
]

_SCHEMES = ("redis", "rediss", "unix")
_CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")

STORE_OPTIONS = (
    "prefix",
    "timeout",
    "socket_timeout",
    "socket_connect_timeout",
    "max_connections",
)
"""Options of from_url that the store reads itself; every other query option goes to redis-py."""


def check_prefix(prefix: object, *, cluster: bool = False) -> str:
    """Check a key prefix: a string, without an empty hash tag on a cluster.

    Raises:
        ConfigurationError: Naming the rule broken.
    """
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
    if cluster and defeats_hash_tags(prefix):
        raise ConfigurationError(
            f"prefix {prefix!r} holds an empty hash tag '{{}}': Redis Cluster would hash "
            "whole keys and spread each thread's keys over many slots"
        )
    return prefix


def database_target(client: redis.asyncio.Redis | redis.asyncio.RedisCluster) -> DatabaseTarget:
    """The server (a cluster's first node) and database index ``client`` talks to."""
    if isinstance(client, redis.asyncio.RedisCluster):
        nodes = list(client.nodes_manager.startup_nodes.values())
        return DatabaseTarget("redis", nodes[0].host, int(nodes[0].port)) if nodes else _REDIS
    found = client.connection_pool.connection_kwargs
    database = found.get("db")
    namespace = str(database) if isinstance(database, int) else None
    if isinstance(found.get("path"), str):  # a Unix socket
        return DatabaseTarget("redis", found["path"], None, namespace)
    host, port = found.get("host"), found.get("port")
    return DatabaseTarget(
        "redis",
        host if isinstance(host, str) else None,
        port if isinstance(port, int) else None,
        namespace,
    )


_REDIS = DatabaseTarget("redis")


class ClientFromURL(NamedTuple):
    """The client ``from_url`` built, and the checked options of the store that owns it."""

    client: redis.asyncio.Redis | redis.asyncio.RedisCluster
    prefix: str
    timeout: float


def client_from_url(url: str, keywords: Mapping[str, Any]) -> ClientFromURL:
    """Check ``url`` and the options, then build the client (no connection is opened yet).

    Args:
        url: The Redis URL.
        keywords: The keyword options, the store's and redis-py's (``None``: not given).

    Raises:
        ConfigurationError: The URL or an option is invalid or unknown, or given both ways.
    """
    if not isinstance(url, str):
        raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _SCHEMES + _CLUSTER_SCHEMES:
        raise ConfigurationError(
            "url must start with redis://, rediss://, unix://, redis+cluster:// or "
            f"rediss+cluster://, got {redact_url(url)!r}"
        )
    client_url, url_options = _split_query(url)
    reject_unknown_options(url, url_options, _known_url_options(scheme))
    merged = combine_options(url, url_options, keywords)
    bound = check_seconds("timeout", merged.get("timeout", DEFAULT_STORE_TIMEOUT))
    assert bound is not None
    options: dict[str, Any] = {"retry": _default_retry()}
    options.update(
        (name, value)
        for name, value in merged.items()
        if name not in STORE_OPTIONS and name not in url_options
    )
    for name in ("socket_timeout", "socket_connect_timeout"):
        options[name] = driver_timeout(name, merged.get(name), bound)
    if "max_connections" in merged:
        options["max_connections"] = check_count("max_connections", merged["max_connections"])
    cluster = scheme in _CLUSTER_SCHEMES
    prefix = check_prefix(merged.get("prefix", ""), cluster=cluster)
    client: redis.asyncio.Redis | redis.asyncio.RedisCluster
    if cluster:
        client = _cluster_client(url, client_url, options)
    else:
        try:
            client = redis.asyncio.Redis.from_url(client_url, **options)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"invalid Redis URL or option for {redact_url(url)!r}: {exc}"
            ) from exc
    return ClientFromURL(client, prefix, bound)


def _default_retry() -> Retry:
    # One quick retry replaces a pooled connection that went stale (server restarted, idle
    # link dropped) without the caller noticing. A timeout is not retried: that would double
    # the time a call may take, and a server that does not answer now will not a moment later.
    return Retry(
        ExponentialBackoff(cap=0.2, base=0.02), retries=1, supported_errors=(RedisConnectionError,)
    )


def _known_url_options(scheme: str) -> frozenset[str]:
    """Every query option a URL of ``scheme`` may hold: the store's, and those redis-py reads
    (its URL parsers, and the connection's and, for a cluster, the cluster client's keywords).
    """
    connection: type = (
        UnixDomainSocketConnection
        if scheme == "unix"
        else SSLConnection
        if scheme.startswith("rediss")
        else Connection
    )
    classes: list[type] = list(connection.__mro__)
    if scheme in _CLUSTER_SCHEMES:
        classes.append(redis.asyncio.RedisCluster)
    names = set(STORE_OPTIONS) | set(URL_QUERY_ARGUMENT_PARSERS)
    for cls in classes:
        init = vars(cls).get("__init__")
        if init is None:
            continue
        for parameter in inspect.signature(init).parameters.values():
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                names.add(parameter.name)
    names.discard("self")
    return frozenset(names)


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """Return ``url`` without the options the store reads, and every query option it had.

    The other options stay in the URL, for redis-py to parse as it does.
    """
    parts = urlsplit(url)
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in options:
            raise ConfigurationError(
                f"option {name!r} appears more than once in {redact_url(url)!r}"
            )
        options[name] = value
    rest = urlencode(
        [(name, value) for name, value in options.items() if name not in STORE_OPTIONS]
    )
    return urlunsplit(parts._replace(query=rest)), options


def _cluster_client(
    url: str, client_url: str, options: dict[str, Any]
) -> redis.asyncio.RedisCluster:
    """Build the cluster client of a ``redis+cluster://`` or ``rediss+cluster://`` URL.

    ``client_url`` is ``url`` without the store's own options; its other query options are
    parsed by redis-py, as for a single server.
    """
    parts = urlsplit(client_url)
    if parts.path not in ("", "/", "/0"):
        raise ConfigurationError(
            f"a Redis Cluster has only database 0; {redact_url(url)!r} "
            f"names {parts.path.lstrip('/')!r}"
        )
    userinfo, nodes = parse_cluster_nodes(parts.netloc, url)
    base = "rediss" if parts.scheme.lower().startswith("rediss") else "redis"
    # redis-py reads credentials and typed query options from a one-node URL; the nodes
    # themselves go in as startup nodes.
    try:
        parsed: dict[str, Any] = dict(
            parse_url(urlunsplit((base, f"{userinfo}localhost", "", parts.query, "")))
        )
    except ValueError as exc:
        raise ConfigurationError(
            f"invalid Redis URL or option for {redact_url(url)!r}: {exc}"
        ) from exc
    for name in ("host", "port"):
        parsed.pop(name, None)
    if parsed.pop("connection_class", None) is SSLConnection:
        parsed["ssl"] = True
    startup = [ClusterNode(host, port) for host, port in nodes]
    try:
        return redis.asyncio.RedisCluster(startup_nodes=startup, **parsed, **options)
    except (ValueError, TypeError, RedisClusterException) as exc:
        raise ConfigurationError(
            f"invalid Redis URL or option for {redact_url(url)!r}: {exc}"
        ) from exc
