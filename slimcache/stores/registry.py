"""Choosing a store by URL through the ``slimcache.stores`` entry-point group, or by object.

An adapter distribution registers one entry point per URL scheme, whose value is a callable
``factory(url, **options) -> Store`` (usually a ``from_url`` classmethod). A third party can
publish its own adapter the same way::

    [project.entry-points."slimcache.stores"]
    myscheme = "my_package:MyStore.from_url"

``open_store`` also takes a client or engine the application already has (a redis-py asyncio
client, an SQLAlchemy ``AsyncEngine``, a boto3 S3 client) and wraps it in the bundled adapter,
or a store, which it returns as it is. Client types are recognised through ``sys.modules``: a
driver the application never imported cannot have made the object, so nothing is imported to
find out.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from slimcache._bundled import BUNDLED, BundledAdapter, ClientType
from slimcache._exceptions import ConfigurationError, MissingExtraError
from slimcache._install import pip_install
from slimcache.stores.memory import MemoryStore
from slimcache.stores.protocol import Store
from slimcache.stores.toolkit import redact_url

__all__ = ["ENTRY_POINT_GROUP", "open_store", "store_schemes"]

ENTRY_POINT_GROUP = "slimcache.stores"

# The extra that installs the bundled adapter of each scheme.
_EXTRA_OF_SCHEME: dict[str, str] = {scheme: row.extra for row in BUNDLED for scheme in row.schemes}

# Common spellings that name a database but not the async driver slimcache needs.
_DRIVERLESS: dict[str, str] = {
    spelling: row.schemes[0] for row in BUNDLED for spelling in row.driverless
}

_STORE_METHODS = ("get", "set", "delete")


def _imported_class(module: str, name: str) -> type | None:
    """The class ``module.name`` if ``module`` is already imported, else ``None``."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) else None


def _client_adapter(obj: object) -> tuple[BundledAdapter, ClientType] | None:
    """The bundled adapter that takes ``obj`` and the client type it is, if one does.

    A class several adapters take (botocore's, whose clients serve many services) goes to the
    one for the client's service.

    Raises:
        ConfigurationError: ``obj`` is a client of a service no bundled adapter takes.
    """
    matches = [
        (row, client)
        for row in BUNDLED
        for client in row.clients
        if (cls := _imported_class(client.module, client.name)) is not None and isinstance(obj, cls)
    ]
    if not matches:
        return None
    if all(client.service is None for _, client in matches):
        return matches[0]
    service_model = getattr(getattr(obj, "meta", None), "service_model", None)
    service = getattr(service_model, "service_name", None)
    for row, client in matches:
        if client.service == service:
            return row, client
    services = [client.service for _, client in matches if client.service is not None]
    wanted = " or ".join(filter(None, (", ".join(services[:-1]), services[-1])))
    raise ConfigurationError(
        f"open_store() takes a boto3 client for {wanted}, got one for {service!r}"
    )


def _lookalike(obj: object) -> str | None:
    for row in BUNDLED:
        for lookalike in row.lookalikes:
            cls = _imported_class(lookalike.module, lookalike.name)
            if cls is not None and isinstance(obj, cls):
                return lookalike.hint
    return None


def _load_adapter(row: BundledAdapter, client: ClientType) -> Callable[..., Store]:
    try:
        module = importlib.import_module(row.module)
    except ImportError:
        raise MissingExtraError(
            f"a {client.description} needs the {row.extra} store, which is not installed; "
            f"run: {pip_install(row.extra)}"
        ) from None
    adapter: Callable[..., Store] = getattr(module, row.store)
    return adapter


def _wrap_client(
    obj: object, row: BundledAdapter, client: ClientType, options: dict[str, Any]
) -> Store:
    missing = [name for name in client.required if name not in options]
    if missing:
        given = ", ".join(f"{name}=..." for name in missing)
        raise ConfigurationError(
            f"a {client.description} needs {given}: open_store(client, {given})"
        )
    adapter = _load_adapter(row, client)
    try:
        return adapter(obj, **options)
    except TypeError as exc:
        # An option the adapter does not take; its constructor names it.
        raise ConfigurationError(
            f"invalid option for a store on a {client.description}: {exc}"
        ) from exc


def _either(descriptions: list[str]) -> str:
    """``a.b.C or D``: the descriptions joined by "or", the first one's module said once."""
    module = descriptions[0].rpartition(".")[0] + "."
    rest = [d.removeprefix(module) if module != "." else d for d in descriptions[1:]]
    return " or ".join([descriptions[0], *rest])


def _clients_taken() -> str:
    """The clients and engines open_store wraps, as its error names them."""
    return ", ".join(
        _either([client.description for client in row.clients]) for row in BUNDLED if row.clients
    )


def _store_for_object(obj: object, options: dict[str, Any]) -> Store:
    """Wrap a client in its adapter, or return a store as it is.

    Client types are checked first: a redis-py client has ``get``, ``set`` and ``delete`` too.
    """
    hint = _lookalike(obj)
    if hint is not None:
        raise ConfigurationError(f"open_store() got {hint}")
    found = _client_adapter(obj)
    if found is not None:
        return _wrap_client(obj, *found, options)
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
        f"adapter for ({_clients_taken()}); got {type(obj).__name__}"
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
        if scheme in _EXTRA_OF_SCHEME:
            raise MissingExtraError(
                f"the {scheme}:// store is not installed; "
                f"run: {pip_install(_EXTRA_OF_SCHEME[scheme])}"
            )
        if scheme in _DRIVERLESS:
            raise ConfigurationError(
                f"store URL scheme {scheme!r} names no async driver; "
                f"use {_DRIVERLESS[scheme]}:// instead"
            )
        known = ", ".join(f"{s}://" for s in sorted(set(_EXTRA_OF_SCHEME) | set(store_schemes())))
        raise ConfigurationError(f"unknown store URL scheme {scheme!r}; known schemes: {known}")
    try:
        factory: Callable[..., Store] = found.load()
    except ImportError as exc:
        hint = (
            pip_install(_EXTRA_OF_SCHEME[scheme])
            if scheme in _EXTRA_OF_SCHEME
            else f"pip install the package providing {found.value}"
        )
        raise MissingExtraError(
            f"the {scheme}:// store could not be imported ({exc}); run: {hint}"
        ) from None
    return factory(url, **options)
