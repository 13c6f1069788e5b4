"""From an ``s3://bucket/prefix`` URL and options to a boto3 client: what ``from_url`` checks.

The URL names the bucket and, in its path, the prefix; its query may hold the options of
:data:`URL_OPTIONS`, each of which may be given as a keyword instead, never both. Credentials
never go in the URL. Every check runs before the client is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast
from urllib.parse import SplitResult, unquote

from slimcache import ConfigurationError
from slimcache.stores import (
    BOTO_URL_OPTIONS,
    boto_client_config,
    boto_client_kwargs,
    check_boto_options,
    check_count,
    make_boto_client,
    query_options,
    split_store_url,
)
from slimcache_s3._keys import validate_prefix

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "URL_OPTIONS",
    "ClientFromURL",
    "client_from_url",
    "validate_bucket_name",
]

# No retries by default: the time bound is spent on one attempt, and a retried conditional
# write can report as lost a write its first attempt made.
DEFAULT_MAX_ATTEMPTS = 0

# Current S3 naming rules for general purpose buckets.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IPV4_LIKE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")

# What an s3:// URL names, and where credentials go instead.
_NAMES = "the bucket (s3://bucket/prefix); pass credentials and the endpoint as options"

URL_OPTIONS = {
    **BOTO_URL_OPTIONS,
    "max_attempts": "max_attempts",
    "addressing_style": "addressing_style",
}
"""Query options of an s3:// URL, and the from_url keyword each one fills."""

_ADDRESSING_STYLES = ("auto", "path", "virtual")


def validate_bucket_name(bucket: object) -> str:
    """Check ``bucket`` against S3's bucket naming rules and return it.

    Raises:
        ConfigurationError: The name breaks a rule; the message says which.
    """
    if not isinstance(bucket, str):
        raise ConfigurationError(f"bucket must be a string, got {type(bucket).__name__}")
    if not _BUCKET_NAME.match(bucket):
        raise ConfigurationError(
            f"bucket must be 3-63 characters of lowercase letters, digits, '.' and '-', "
            f"starting and ending with a letter or digit, got {bucket!r}"
        )
    if ".." in bucket or ".-" in bucket or "-." in bucket:
        raise ConfigurationError(f"bucket must not have '..', '.-' or '-.', got {bucket!r}")
    if _IPV4_LIKE.match(bucket):
        raise ConfigurationError(f"bucket must not look like an IP address, got {bucket!r}")
    if bucket.startswith(_RESERVED_BUCKET_PREFIXES) or bucket.endswith(_RESERVED_BUCKET_SUFFIXES):
        raise ConfigurationError(f"bucket uses a prefix or suffix S3 reserves, got {bucket!r}")
    return bucket


class ClientFromURL(NamedTuple):
    """The client ``from_url`` built, and the checked options of the store around it."""

    client: S3Client
    bucket: str
    prefix: str
    timeout: float


def client_from_url(
    url: str,
    prefix: str | None,
    keywords: Mapping[str, object],
    profile_name: str | None,
    client_options: dict[str, Any],
) -> ClientFromURL:
    """Check ``url``, ``prefix`` and the options, then build the boto3 client.

    Args:
        url: The ``s3://`` URL.
        prefix: The prefix given as a keyword (``None``: the URL's path).
        keywords: The options of :data:`URL_OPTIONS` given as keywords (``None``: not given).
        profile_name: A profile of the shared AWS config files.
        client_options: Credentials, TLS and ``config``, handed to boto3.

    Raises:
        ConfigurationError: The URL, an option or the bucket name is invalid, an option is
            given both ways, or the connect and read timeouts of all attempts exceed
            ``timeout``.
    """
    parts, bucket = _bucket_of(url)
    path = unquote(parts.path).lstrip("/")
    if prefix is None:
        prefix = path if not path or path.endswith("/") else path + "/"
    elif path:
        raise ConfigurationError(
            f"the prefix is given twice: in the URL path ({path!r}) and as prefix={prefix!r}"
        )
    options = query_options(url, parts.query, URL_OPTIONS, "s3", keywords)

    bound = check_boto_options("S3Store", options, client_options)
    config_options = _client_config(options, bound)
    extra_config, boto_kwargs = boto_client_kwargs(options, client_options, profile_name)
    validate_prefix(prefix)
    client = cast(
        "S3Client",
        make_boto_client("s3", "S3", config_options, extra_config, profile_name, boto_kwargs),
    )
    return ClientFromURL(client, bucket, prefix, bound)


def _bucket_of(url: str) -> tuple[SplitResult, str]:
    """The parts of an ``s3://`` URL, and the bucket it names."""
    parts = split_store_url(url, "s3", "S3Store", "an", _NAMES, path=True)
    return parts, validate_bucket_name(parts.netloc)


def _client_config(options: Mapping[str, object], timeout: float) -> dict[str, Any]:
    """Validate the connection options and return the ``botocore.config.Config`` arguments.

    Each attempt gets ``timeout / attempts`` seconds, split between connecting and reading
    unless the caller set one or both.
    """
    retries = check_count(
        "max_attempts", options.get("max_attempts", DEFAULT_MAX_ATTEMPTS), minimum=0
    )
    config = boto_client_config(options, timeout, retries=retries)
    style = options.get("addressing_style")
    if style is not None:
        if style not in _ADDRESSING_STYLES:
            raise ConfigurationError(
                f"addressing_style must be one of {', '.join(_ADDRESSING_STYLES)}, got {style!r}"
            )
        config["s3"] = {"addressing_style": style}
    return config
