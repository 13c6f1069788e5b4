"""From a database URL and options to an engine: what ``SQLStore.from_url`` reads and checks.

The store's own options (:data:`STORE_OPTIONS`) may be given in the URL's query or as keywords,
never both; any other query option goes to the driver, and one the driver does not read either
(a misspelling) is refused before anything is opened. Every message shows the URL with its
password hidden.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from inspect import signature
from typing import Any, Final, NamedTuple

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from slimcache import ConfigurationError, MissingExtraError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    check_count,
    check_seconds,
    combine_options,
    driver_timeout,
    pip_install,
    redact_url,
    reject_unknown_options,
)

__all__ = ["DEFAULT_TABLE", "STORE_OPTIONS", "EngineFromURL", "check_table", "engine_from_url"]

DEFAULT_TABLE: Final = "slimcache_entries"

# URL drivers this store speaks, and the slimcache extra that installs each driver.
_DRIVERS: Final[dict[str, str]] = {
    "sqlite+aiosqlite": "sql",
    "postgresql+asyncpg": "postgres",
}

# Unquoted-identifier rules, capped at PostgreSQL's 63-byte identifier limit.
_TABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

STORE_OPTIONS: Final = (
    "table",
    "timeout",
    "pool_size",
    "busy_timeout",
    "connect_timeout",
    "command_timeout",
)
"""from_url options that may also be given in the URL's query (``?table=cache&timeout=2``)."""

# What SQLAlchemy's pysqlite dialect reads of a SQLite URL's query, and the parameters of a
# SQLite URI (with uri=true they go to SQLite itself).
_SQLITE_URL_OPTIONS: Final = frozenset(
    {"uri", "timeout", "isolation_level", "detect_types", "check_same_thread", "cached_statements"}
    | {"mode", "cache", "immutable", "nolock", "psow", "vfs", "modeof"}
)
# What SQLAlchemy's asyncpg dialect reads itself; the rest go to asyncpg.connect().
_ASYNCPG_DIALECT_OPTIONS: Final = frozenset(
    {"prepared_statement_cache_size", "prepared_statement_name_func"}
)


def check_table(table: object) -> str:
    """Check a table name: an unquoted SQL identifier that SQLite does not reserve.

    Raises:
        ConfigurationError: Naming the rule and the name given.
    """
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        raise ConfigurationError(
            f"table must be a SQL identifier (a letter or '_' then letters, digits or '_', "
            f"at most 63 characters), got {table!r}"
        )
    if table.lower().startswith("sqlite_"):
        raise ConfigurationError(f"table must not start with 'sqlite_' (reserved), got {table!r}")
    return table


class EngineFromURL(NamedTuple):
    """The engine ``from_url`` opened, and the checked options of the store that owns it."""

    engine: AsyncEngine
    table: str
    timeout: float
    busy_timeout: float


def engine_from_url(
    url: str, keywords: Mapping[str, object], engine_options: dict[str, Any]
) -> EngineFromURL:
    """Check ``url`` and the options, then create the engine.

    Args:
        url: The database URL.
        keywords: The store's options given as keywords (``None``: not given).
        engine_options: Keywords for ``create_async_engine``; the pool's size and timeout and
            the driver's timeouts are added to them.

    Raises:
        ConfigurationError: The URL or an option is invalid or unknown, or given both ways.
        MissingExtraError: The URL's driver is not installed.
    """
    parsed, url_options = _split_url(url)
    options = combine_options(url, url_options, keywords)
    table = check_table(options.get("table", DEFAULT_TABLE))
    bound = check_seconds("timeout", options.get("timeout", DEFAULT_STORE_TIMEOUT))
    assert bound is not None
    busy = driver_timeout("busy_timeout", options.get("busy_timeout"), bound)
    connect = driver_timeout("connect_timeout", options.get("connect_timeout"), bound)
    command = driver_timeout("command_timeout", options.get("command_timeout"), bound)
    if "pool_size" in options:
        engine_options["pool_size"] = check_count("pool_size", options["pool_size"])
    if not _in_memory(parsed):
        # In-memory SQLite shares one connection (no pool to wait on); elsewhere waiting
        # for a pooled connection is bounded like the rest of the call.
        engine_options.setdefault("pool_timeout", bound)
    connect_args = dict(engine_options.pop("connect_args", None) or {})
    if parsed.drivername == "postgresql+asyncpg":
        for name, seconds in (("timeout", connect), ("command_timeout", command)):
            if name in connect_args:
                raise ConfigurationError(
                    f"connect_args[{name!r}] is set by the store; give "
                    f"{'connect_timeout' if name == 'timeout' else name} instead"
                )
            connect_args[name] = seconds
    elif "timeout" not in connect_args:
        # sqlite3's own busy wait, in force until the connect hook sets busy_timeout.
        connect_args["timeout"] = busy
    if connect_args:
        engine_options["connect_args"] = connect_args
    return EngineFromURL(_create_engine(parsed, engine_options), table, bound, busy)


def _split_url(url: str) -> tuple[URL, dict[str, str]]:
    """The URL without the store's own options, and those options as its query gave them."""
    parsed = _parse_url(url)
    url_options: dict[str, str] = {}
    for name in STORE_OPTIONS:
        value = parsed.query.get(name)
        if isinstance(value, tuple):
            raise ConfigurationError(
                f"option {name!r} appears more than once in {redact_url(url)!r}"
            )
        if value is not None:
            url_options[name] = value
    reject_unknown_options(url, parsed.query, _known_url_options(parsed.drivername))
    return parsed.difference_update_query(list(url_options)), url_options


def _parse_url(url: str) -> URL:
    if not isinstance(url, str):
        raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is no number
        raise ConfigurationError(
            f"url {redact_url(url)!r} is not a valid database URL: {exc}"
        ) from None
    if parsed.drivername not in _DRIVERS:
        known = ", ".join(f"{name}://" for name in _DRIVERS)
        raise ConfigurationError(
            f"url scheme {parsed.drivername!r} is not supported by SQLStore (use {known})"
        )
    return parsed


def _known_url_options(drivername: str) -> frozenset[str]:
    """Every query option a URL of ``drivername`` may hold: the store's and its driver's."""
    known = set(STORE_OPTIONS)
    if drivername.startswith("sqlite"):
        return frozenset(known | _SQLITE_URL_OPTIONS)
    known |= _ASYNCPG_DIALECT_OPTIONS
    try:
        asyncpg = importlib.import_module("asyncpg")
    except ImportError:  # from_url says what to install, once the options are right
        return frozenset(known | {"ssl", "server_settings", "timeout", "command_timeout"})
    parameters = signature(asyncpg.connect).parameters
    return frozenset(known | set(parameters) - {"dsn", "loop", "connection_class"})


def _in_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def _create_engine(parsed: URL, engine_options: dict[str, Any]) -> AsyncEngine:
    try:
        return create_async_engine(parsed, **engine_options)
    except ImportError as exc:
        extra = _DRIVERS[parsed.drivername]
        raise MissingExtraError(
            f"the {parsed.drivername}:// store needs its driver ({exc.name or exc}); "
            f"run: {pip_install(extra)}"
        ) from None
    except (ArgumentError, TypeError) as exc:
        raise ConfigurationError(f"invalid engine options for {parsed.drivername}: {exc}") from exc
