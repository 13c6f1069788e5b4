"""From an ``s3://bucket/prefix`` URL and options to a boto3 client: what ``from_url`` checks.

The URL names the bucket and, in its path, the prefix; its query may hold the options of
:data:`URL_OPTIONS`, each of which may be given as a keyword instead, never both. Credentials
never go in the URL. Every check runs before the client is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from botocore.exceptions import BotoCoreError

from slimcache import ConfigurationError
from slimcache.stores import (
    DEFAULT_STORE_TIMEOUT,
    check_count,
    check_seconds,
    combine_options,
    redact_url,
)
from slimcache_s3._keys import validate_prefix

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_POOL_CONNECTIONS",
    "URL_OPTIONS",
    "ClientFromURL",
    "client_from_url",
    "endpoint_of",
    "validate_bucket_name",
]

# No retries by default: the time bound is spent on one attempt, and a retried conditional
# write can report as lost a write its first attempt made.
DEFAULT_MAX_ATTEMPTS = 0
DEFAULT_MAX_POOL_CONNECTIONS = 10

# Current S3 naming rules for general purpose buckets.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IPV4_LIKE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_REGION = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

URL_OPTIONS = {
    "timeout": "timeout",
    "endpoint_url": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_attempts": "max_attempts",
    "max_pool_connections": "max_pool_connections",
    "addressing_style": "addressing_style",
}
"""Query options of an s3:// URL, and the from_url keyword each one fills."""

# Keyword options from_url hands to boto3 as they are (credentials, TLS, extra botocore Config).
_CLIENT_OPTIONS = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "verify", "use_ssl"}
)
_ADDRESSING_STYLES = ("auto", "path", "virtual")


def endpoint_of(client: object) -> tuple[str | None, int | None]:
    """The host and port of the endpoint a boto3 client talks to, when it tells."""
    try:
        parts = urlsplit(getattr(getattr(client, "meta", None), "endpoint_url", None) or "")
        return parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return None, None


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
    """Check ``url`` and the options, then build the boto3 client.

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
    options = combine_options(url, _url_options(url, parts.query), keywords)

    unknown = sorted(set(client_options) - _CLIENT_OPTIONS - {"config"})
    if unknown:
        known = ", ".join(sorted(_CLIENT_OPTIONS | {"config", "profile_name"}))
        raise ConfigurationError(f"unknown S3Store option {unknown[0]!r} (known: {known})")

    bound = check_seconds("timeout", options.get("timeout", DEFAULT_STORE_TIMEOUT))
    assert bound is not None
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
    validate_prefix(prefix)
    client = _make_client(config_options, extra_config, profile_name, boto_kwargs)
    return ClientFromURL(client, bucket, prefix, bound)


def _bucket_of(url: str) -> tuple[SplitResult, str]:
    """The parts of an ``s3://`` URL, and the bucket it names."""
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme.lower() != "s3":
        raise ConfigurationError(f"S3Store needs an s3:// URL, got {redact_url(url)!r}")
    if parts.username is not None or parts.password is not None or ":" in parts.netloc:
        raise ConfigurationError(
            "an s3:// URL names only the bucket (s3://bucket/prefix); pass credentials and "
            "the endpoint as options"
        )
    if parts.fragment:
        raise ConfigurationError(f"an s3:// URL has no fragment, got {redact_url(url)!r}")
    return parts, validate_bucket_name(parts.netloc)


def _url_options(url: str, query: str) -> dict[str, str]:
    """The options a URL's query gives, under the keyword each one fills."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(f"malformed query in store URL {redact_url(url)!r}") from None
    url_options: dict[str, str] = {}
    for name, value in pairs:
        target = URL_OPTIONS.get(name)
        if target is None:
            known = ", ".join(sorted(URL_OPTIONS))
            raise ConfigurationError(f"unknown s3:// option {name!r} (known: {known})")
        if target in url_options:
            raise ConfigurationError(f"s3:// option {name!r} is given twice")
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

    Each attempt gets ``timeout / attempts`` seconds, split between connecting and reading
    unless the caller set one or both.
    """
    retries = check_count(
        "max_attempts", options.get("max_attempts", DEFAULT_MAX_ATTEMPTS), minimum=0
    )
    share = timeout / (retries + 1)
    connect = options.get("connect_timeout")
    read = options.get("read_timeout")
    connect_seconds = None if connect is None else check_seconds("connect_timeout", connect)
    read_seconds = None if read is None else check_seconds("read_timeout", read)
    if connect_seconds is None:
        connect_seconds = share / 2 if read_seconds is None else share - read_seconds
    if read_seconds is None:
        read_seconds = share - connect_seconds
    if (
        connect_seconds <= 0
        or read_seconds <= 0
        or connect_seconds + read_seconds > share * (1 + 1e-9)
    ):
        raise ConfigurationError(
            f"connect_timeout + read_timeout ({connect!r} + {read!r} s) of each of the "
            f"{retries + 1} attempts (max_attempts={retries} retries) must fit in "
            f"timeout ({timeout:g} s): raise timeout or lower them"
        )
    config: dict[str, Any] = {
        "connect_timeout": connect_seconds,
        "read_timeout": read_seconds,
        "retries": {"max_attempts": retries, "mode": "standard"},
        "max_pool_connections": check_count(
            "max_pool_connections",
            options.get("max_pool_connections", DEFAULT_MAX_POOL_CONNECTIONS),
        ),
    }
    style = options.get("addressing_style")
    if style is not None:
        if style not in _ADDRESSING_STYLES:
            raise ConfigurationError(
                f"addressing_style must be one of {', '.join(_ADDRESSING_STYLES)}, got {style!r}"
            )
        config["s3"] = {"addressing_style": style}
    return config


def _make_client(
    config_options: dict[str, Any],
    extra_config: object,
    profile_name: str | None,
    boto_kwargs: dict[str, Any],
) -> S3Client:
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
        return session.client("s3", config=config, **boto_kwargs)
    except (BotoCoreError, ValueError) as exc:
        raise ConfigurationError(f"cannot build the S3 client: {exc}") from exc
