"""From a ``dynamodb://TABLE`` URL and options to a boto3 client: what ``from_url`` checks.

The URL names the table; its query may hold the options of :data:`URL_OPTIONS`, each of which
may be given as a keyword instead, never both. Credentials never go in the URL: boto3 finds
them (environment, profile, role) or they are passed as keywords. Every check runs before the
client is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast
from urllib.parse import unquote

from slimcache import ConfigurationError
from slimcache.stores import (
    BOTO_URL_OPTIONS,
    boto_client_config,
    boto_client_kwargs,
    check_boto_options,
    make_boto_client,
    query_options,
    split_store_url,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "URL_OPTIONS",
    "ClientFromURL",
    "client_from_url",
    "validate_table_name",
]

_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")

# What a dynamodb:// URL names, and where credentials go instead.
_NAMES = (
    "the table (dynamodb://TABLE?region=...); pass credentials as options or let boto3 find them"
)

URL_OPTIONS = {**BOTO_URL_OPTIONS, "create_table": "create_table"}
"""Query options of a dynamodb:// URL, and the from_url keyword each one fills."""

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


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
    options = query_options(url, query, URL_OPTIONS, "dynamodb", keywords, suggest=True)
    bound = check_boto_options("DynamoDBStore", options, client_options)
    create = check_create_table(options.get("create_table", True))
    # One attempt per request: the store retries what DynamoDB refused without doing it
    # (throttling) itself, within its bound.
    config_options = boto_client_config(options, bound)
    extra_config, boto_kwargs = boto_client_kwargs(options, client_options, profile_name)
    client = cast(
        "DynamoDBClient",
        make_boto_client(
            "dynamodb", "DynamoDB", config_options, extra_config, profile_name, boto_kwargs
        ),
    )
    return ClientFromURL(client, table, bound, create)


def _table_of(url: str) -> tuple[str, str]:
    """The table a ``dynamodb://`` URL names, and its query."""
    parts = split_store_url(url, "dynamodb", "DynamoDBStore", "a", _NAMES, path=False)
    return validate_table_name(unquote(parts.netloc)), parts.query
