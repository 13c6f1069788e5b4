"""From a ``dynamodb://TABLE`` URL and options to a boto3 client: what ``from_url`` checks.

The URL names the table; its query may hold the options of :data:`URL_OPTIONS`, each of which
may be given as a keyword instead, never both. Credentials never go in the URL: boto3 finds
them (environment, profile, role) or they are passed as keywords. Every check runs before the
client is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.exceptions import BotoCoreError

from slimcache import ConfigurationError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    check_count,
    check_seconds,
    combine_options,
    redact_url,
    reject_unknown_options,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "URL_OPTIONS",
    "ClientFromURL",
    "client_from_url",
    "endpoint_of",
    "validate_table_name",
]

DEFAULT_MAX_POOL_CONNECTIONS = 10

_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_REGION = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

URL_OPTIONS = {
    "timeout": "timeout",
    "endpoint_url": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_pool_connections": "max_pool_connections",
    "create_table": "create_table",
}
"""Query options of a dynamodb:// URL, and the from_url keyword each one fills."""

# Keyword options from_url hands to boto3 as they are (credentials, TLS).
_CLIENT_OPTIONS = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "verify", "use_ssl"}
)
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def endpoint_of(client: object) -> tuple[str | None, int | None]:
    """The host and port of the endpoint a boto3 client talks to, when it tells."""
    try:
        parts = urlsplit(getattr(getattr(client, "meta", None), "endpoint_url", None) or "")
        return parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return None, None


def validate_table_name(table: object) -> str:
    """Check ``table`` against DynamoDB's table naming rules and return it.

    Raises:
        ConfigurationError: The name is not 3-255 letters, digits, ``_``, ``.`` and ``-``.
    """
    if not isinstance(table, str):
        raise ConfigurationError(f"table must be a string, got {type(table).__name__}")
    if not _TABLE_NAME.match(table):
        raise ConfigurationError(
            f"table must be 3-255 characters of letters, digits, '_', '.' and '-', got {table!r}"
        )
    return table


def check_create_table(value: object) -> bool:
    """Read the ``create_table`` option: a bool, or ``true``/``false`` as a URL gives it.

    Raises:
        ConfigurationError: Anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise ConfigurationError(f"create_table must be true or false, got {value!r}")


class ClientFromURL(NamedTuple):
    """The client ``from_url`` built, and the checked options of the store around it."""

    client: DynamoDBClient
    table: str
    timeout: float
    create_table: bool


def client_from_url(
    url: str,
    keywords: Mapping[str, object],
    profile_name: str | None,
    client_options: dict[str, Any],
) -> ClientFromURL:
    """Check ``url`` and the options, then build the boto3 client.

    Args:
        url: The ``dynamodb://`` URL.
        keywords: The options of :data:`URL_OPTIONS` given as keywords (``None``: not given).
        profile_name: A profile of the shared AWS config files.
        client_options: Credentials, TLS and ``config``, handed to boto3.

    Raises:
        ConfigurationError: The URL, an option or the table name is invalid, an option is
            given both ways, or the connect and read timeouts exceed ``timeout``.
    """
    table, query = _table_of(url)
    options = combine_options(url, _url_options(url, query), keywords)
    unknown = sorted(set(client_options) - _CLIENT_OPTIONS - {"config"})
    if unknown:
        known = ", ".join(sorted(_CLIENT_OPTIONS | {"config", "profile_name"}))
        raise ConfigurationError(f"unknown DynamoDBStore option {unknown[0]!r} (known: {known})")
    bound = check_seconds("timeout", options.get("timeout", DEFAULT_STORE_TIMEOUT))
    assert bound is not None
    create = check_create_table(options.get("create_table", True))
    config_options = _client_config(options, bound)
    extra_config = client_options.pop("config", None)
    boto_kwargs: dict[str, Any] = dict(client_options)
    if "endpoint_url" in options:
        boto_kwargs["endpoint_url"] = _endpoint(options["endpoint_url"])
    if "region_name" in options:
        boto_kwargs["region_name"] = _region(options["region_name"])
    if profile_name is not None and not isinstance(profile_name, str):
        raise ConfigurationError(
            f"profile_name must be a string, got {type(profile_name).__name__}"
        )
    client = _make_client(config_options, extra_config, profile_name, boto_kwargs)
    return ClientFromURL(client, table, bound, create)


def _table_of(url: str) -> tuple[str, str]:
    """The table a ``dynamodb://`` URL names, and its query."""
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme.lower() != "dynamodb":
        raise ConfigurationError(f"DynamoDBStore needs a dynamodb:// URL, got {redact_url(url)!r}")
    if parts.username is not None or parts.password is not None or ":" in parts.netloc:
        raise ConfigurationError(
            "a dynamodb:// URL names only the table (dynamodb://TABLE?region=...); pass "
            "credentials as options or let boto3 find them"
        )
    if parts.path not in ("", "/") or parts.fragment:
        raise ConfigurationError(
            f"a dynamodb:// URL has no path or fragment, got {redact_url(url)!r}"
        )
    return validate_table_name(unquote(parts.netloc)), parts.query


def _url_options(url: str, query: str) -> dict[str, str]:
    """The options a URL's query gives, under the keyword each one fills."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(f"malformed query in store URL {redact_url(url)!r}") from None
    reject_unknown_options(url, [name for name, _ in pairs], URL_OPTIONS)
    url_options: dict[str, str] = {}
    for name, value in pairs:
        target = URL_OPTIONS[name]
        if target in url_options:
            raise ConfigurationError(f"dynamodb:// option {name!r} is given twice")
        url_options[target] = value
    return url_options


def _endpoint(value: object) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"endpoint_url must be a string, got {type(value).__name__}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"endpoint_url must be an http:// or https:// URL with a host, got {value!r}"
        )
    return value


def _region(value: object) -> str:
    if not isinstance(value, str) or not _REGION.match(value):
        raise ConfigurationError(
            f"region_name must be an AWS region name such as 'us-east-1', got {value!r}"
        )
    return value


def _client_config(options: Mapping[str, object], timeout: float) -> dict[str, Any]:
    """Validate the connection options and return the ``botocore.config.Config`` arguments.

    One attempt per request (the store retries throttled requests itself), whose connect and
    read timeouts fit in ``timeout``: half each unless the caller set one or both.
    """
    connect = options.get("connect_timeout")
    read = options.get("read_timeout")
    connect_seconds = None if connect is None else check_seconds("connect_timeout", connect)
    read_seconds = None if read is None else check_seconds("read_timeout", read)
    if connect_seconds is None:
        connect_seconds = timeout / 2 if read_seconds is None else timeout - read_seconds
    if read_seconds is None:
        read_seconds = timeout - connect_seconds
    if (
        connect_seconds <= 0
        or read_seconds <= 0
        or connect_seconds + read_seconds > timeout * (1 + 1e-9)
    ):
        raise ConfigurationError(
            f"connect_timeout + read_timeout ({connect!r} + {read!r} s) must fit in "
            f"timeout ({timeout:g} s): raise timeout or lower them"
        )
    return {
        "connect_timeout": connect_seconds,
        "read_timeout": read_seconds,
        # The store retries what DynamoDB refused without doing it (throttling) itself, within
        # its bound; botocore would also resend a write that timed out, which may have landed.
        "retries": {"total_max_attempts": 1, "mode": "standard"},
        "max_pool_connections": check_count(
            "max_pool_connections",
            options.get("max_pool_connections", DEFAULT_MAX_POOL_CONNECTIONS),
        ),
    }


def _make_client(
    config_options: dict[str, Any],
    extra_config: object,
    profile_name: str | None,
    boto_kwargs: dict[str, Any],
) -> DynamoDBClient:
    import boto3.session
    from botocore.config import Config

    config = Config(**config_options)
    if extra_config is not None:
        if not isinstance(extra_config, Config):
            raise ConfigurationError(
                f"config must be a botocore.config.Config, got {type(extra_config).__name__}"
            )
        config = config.merge(extra_config)
    try:
        # A session per store: boto3's default session is not safe to share across threads.
        session = boto3.session.Session(profile_name=profile_name)
        return session.client("dynamodb", config=config, **boto_kwargs)
    except (BotoCoreError, ValueError) as exc:
        raise ConfigurationError(f"cannot build the DynamoDB client: {exc}") from exc
