"""Choosing a store by URL through the ``slimcache.stores`` entry-point group, or by object.

An adapter distribution registers one entry point per URL scheme, whose value is a callable
``factory(url, **options) -> Store`` (usually a ``from_url`` classmethod). A third party can
publish its own adapter the same way::

    [project.entry-points."slimcache.stores"]
    myscheme = "my_package:MyStore.from_url"

``open_store`` also takes a client or engine the application already has (a redis-py asyncio
client, an SQLAlchemy ``AsyncEngine``, a boto3 S3 or DynamoDB client) and wraps it in the
bundled adapter, or a store, which it returns as it is. Client types are recognised through
``sys.modules``: a driver the application never imported cannot have made the object, so
nothing is imported to find out.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from slimcache._exceptions import ConfigurationError, MissingExtraError
from slimcache._install import pip_install
from slimcache.stores.memory import MemoryStore
from slimcache.stores.protocol import Store
from slimcache.stores.toolkit import redact_url

__all__ = ["ENTRY_POINT_GROUP", "open_store", "store_schemes"]

ENTRY_POINT_GROUP = "slimcache.stores"

# Schemes served by the adapters that ship with slimcache, and the extra that installs each.
_KNOWN_EXTRAS: dict[str, str] = {
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "sqlite+aiosqlite": "sql",
    "postgresql+asyncpg": "postgres",
    "s3": "s3",
    "dynamodb": "dynamodb",
}

# Common spellings that name a database but not the async driver slimcache needs.
_DRIVERLESS: dict[str, str] = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


@dataclass(frozen=True)
class _ClientAdapter:
    """A client or engine type a bundled adapter accepts, and that adapter.

    Attributes:
        module: The module defining the client class.
        name: The client class.
        adapter: ``"module:Class"`` of the store that takes the client as its first argument.
        extra: The slimcache extra that installs the adapter.
        description: How error messages name the client.
        service: For a boto3 client, the service it must be a client of.
        required: Options the store cannot do without.
    """

    module: str
    name: str
    adapter: str
    extra: str
    description: str
    service: str | None = None
    required: tuple[str, ...] = ()


_CLIENT_ADAPTERS = (
    _ClientAdapter(
        module="redis.asyncio.client",
        name="Redis",
        adapter="slimcache_redis:RedisStore",
        extra="redis",
        description="redis.asyncio.Redis",
    ),
    _ClientAdapter(
        module="redis.asyncio.cluster",
        name="RedisCluster",
        adapter="slimcache_redis:RedisStore",
        extra="redis",
        description="redis.asyncio.RedisCluster",
    ),
    _ClientAdapter(
        module="sqlalchemy.ext.asyncio.engine",
        name="AsyncEngine",
        adapter="slimcache_sql:SQLStore",
        extra="sql",
        description="SQLAlchemy AsyncEngine",
    ),
    _ClientAdapter(
        module="botocore.client",
        name="BaseClient",
        adapter="slimcache_s3:S3Store",
        extra="s3",
        description="boto3 S3 client",
        service="s3",
        required=("bucket",),
    ),
    _ClientAdapter(
        module="botocore.client",
        name="BaseClient",
        adapter="slimcache_dynamodb:DynamoDBStore",
        extra="dynamodb",
        description="boto3 DynamoDB client",
        service="dynamodb",
        required=("table",),
    ),
)

# Objects that look like a supported client but would not work: (module, class, what it is and
# what to pass instead). aiobotocore's clients derive from botocore's, so they come first.
_LOOKALIKES = (
    ("aiobotocore.client", "AioBaseClient", "an aiobotocore client; pass a boto3 S3 client"),
    ("redis.client", "Redis", "a synchronous redis.Redis; pass a redis.asyncio.Redis"),
    (
        "redis.cluster",
        "RedisCluster",
        "a synchronous redis.cluster.RedisCluster; pass a redis.asyncio.RedisCluster",
    ),
    (
        "sqlalchemy.engine.base",
        "Engine",
        "a synchronous SQLAlchemy Engine; pass an AsyncEngine (create_async_engine)",
    ),
)

_STORE_METHODS = ("get", "set", "delete")


def _imported_class(module: str, name: str) -> type | None:
    """The class ``module.name`` if ``module`` is already imported, else ``None``."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) else None


def _client_adapter(obj: object) -> _ClientAdapter | None:
    """The adapter for a client: of those taking its class, the one for its service (boto3's
    clients share one class), else the first, whose check then names the service it wants."""
    found = [
        known
        for known in _CLIENT_ADAPTERS
        if (cls := _imported_class(known.module, known.name)) is not None and isinstance(obj, cls)
    ]
    service = getattr(
        getattr(getattr(obj, "meta", None), "service_model", None), "service_name", None
    )
    for known in found:
        if known.service is not None and known.service == service:
            return known
    return found[0] if found else None


def _lookalike(obj: object) -> str | None:
    for module, name, hint in _LOOKALIKES:
        cls = _imported_class(module, name)
        if cls is not None and isinstance(obj, cls):
            return hint
    return None


def _load_adapter(known: _ClientAdapter) -> Callable[..., Store]:
    module_name, _, class_name = known.adapter.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise MissingExtraError(
            f"a {known.description} needs the {known.extra} store, which is not installed; "
            f"run: {pip_install(known.extra)}"
        ) from None
    adapter: Callable[..., Store] = getattr(module, class_name)
    return adapter


def _wrap_client(obj: object, known: _ClientAdapter, options: dict[str, Any]) -> Store:
    if known.service is not None:
        service_model = getattr(getattr(obj, "meta", None), "service_model", None)
        service = getattr(service_model, "service_name", None)
        if service != known.service:
            raise ConfigurationError(
                f"open_store() takes a boto3 client for {known.service}, got one for {service!r}"
            )
    missing = [name for name in known.required if name not in options]
    if missing:
        given = ", ".join(f"{name}=..." for name in missing)
        raise ConfigurationError(
            f"a {known.description} needs {given}: open_store(client, {given})"
        )
    adapter = _load_adapter(known)
    try:
        return adapter(obj, **options)
    except TypeError as exc:
        # An option the adapter does not take; its constructor names it.
        raise ConfigurationError(
            f"invalid option for a store on a {known.description}: {exc}"
        ) from exc


def _store_for_object(obj: object, options: dict[str, Any]) -> Store:
    """Wrap a client in its adapter, or return a store as it is.

    Client types are checked first: a redis-py client has ``get``, ``set`` and ``delete`` too.
    """
    hint = _lookalike(obj)
    if hint is not None:
        raise ConfigurationError(f"open_store() got {hint}")
    known = _client_adapter(obj)
    if known is not None:
        return _wrap_client(obj, known, options)
    if isinstance(obj, Store):
        if not all(inspect.iscoroutinefunction(getattr(obj, name)) for name in _STORE_METHODS):
            raise ConfigurationError(
                f"{type(obj).__name__} has get, set and delete, but a store's must be async"
            )
        if options:
            raise ConfigurationError(
                "open_store() returns a store it is given as it is, so it takes no options; "
                f"got {', '.join(sorted(options))}"
            )
        return obj
    raise ConfigurationError(
        "store URL must be a string, or else a slimcache store or a client slimcache has an "
        "adapter for (redis.asyncio.Redis or RedisCluster, SQLAlchemy AsyncEngine, boto3 S3 "
        f"or DynamoDB client); got {type(obj).__name__}"
    )


def _scheme_of(url: str) -> str:
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        raise ConfigurationError(
            f"store URL {redact_url(url)!r} has no scheme (expected e.g. 'redis://...')"
        )
    return scheme.lower()


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def store_schemes() -> list[str]:
    """Return the URL schemes the installed adapters can open, sorted."""
    return sorted(set(_entry_points()) | {"memory"})


def open_store(url: object, **options: Any) -> Store:
    """Open the store a URL names, or the store for a client or engine already at hand.

    Args:
        url: A store URL: ``memory://``, ``redis://host:6379/0``, ``rediss://...``,
            ``unix:///path.sock``, ``redis+cluster://host:port[,host:port...]``,
            ``sqlite+aiosqlite:///path.db``, ``postgresql+asyncpg://user@host/db``,
            ``s3://bucket/prefix?endpoint_url=...``, ``dynamodb://table?region=...``, or a
            scheme a third-party adapter registers. Or an object: a ``redis.asyncio.Redis`` or
            ``RedisCluster`` client (gives a ``RedisStore``), an SQLAlchemy ``AsyncEngine`` (an
            ``SQLStore``), a boto3 S3 client (an ``S3Store``; pass ``bucket=``), a boto3
            DynamoDB client (a ``DynamoDBStore``; pass ``table=``), or a slimcache store,
            returned as it is. A client passed in stays the caller's to close, except that an
            ``S3Store`` and a ``DynamoDBStore`` close their boto3 client in ``aclose``.
        **options: Passed to the adapter's factory or constructor (timeouts, pool size,
            prefix, ...).

    Returns:
        A store; close it with ``await store.aclose()`` (or ``async with``) when it has one.

    Raises:
        ConfigurationError: The URL has no scheme or an unknown one, or the object is of a
            kind no adapter takes.
        MissingExtraError: The adapter for the scheme or the client is not installed; the
            message names the ``pip install`` to run.
    """
    if not isinstance(url, str):
        return _store_for_object(url, options)
    scheme = _scheme_of(url)
    found = _entry_points().get(scheme)
    if found is None:
        if scheme == "memory":
            return MemoryStore.from_url(url, **options)
        if scheme in _KNOWN_EXTRAS:
            extra = _KNOWN_EXTRAS[scheme]
            raise MissingExtraError(
                f"the {scheme}:// store is not installed; run: {pip_install(extra)}"
            )
        if scheme in _DRIVERLESS:
            raise ConfigurationError(
                f"store URL scheme {scheme!r} names no async driver; "
                f"use {_DRIVERLESS[scheme]}:// instead"
            )
        known = ", ".join(f"{s}://" for s in sorted(set(_KNOWN_EXTRAS) | set(store_schemes())))
        raise ConfigurationError(f"unknown store URL scheme {scheme!r}; known schemes: {known}")
    try:
        factory: Callable[..., Store] = found.load()
    except ImportError as exc:
        hint = (
            pip_install(_KNOWN_EXTRAS[scheme])
            if scheme in _KNOWN_EXTRAS
            else f"pip install the package providing {found.value}"
        )
        raise MissingExtraError(
            f"the {scheme}:// store could not be imported ({exc}); run: {hint}"
        ) from None
    return factory(url, **options)
