"""What the boto3-based stores share: the client options they check and the client they build.

The bundled S3 and DynamoDB stores take the same connection options (``endpoint_url``,
``region_name``, ``connect_timeout``, ``read_timeout``, ``max_pool_connections``, credentials,
TLS and an extra ``botocore.config.Config``) and check them the same way, before anything is
built::

    from slimcache.stores.boto import (
        boto_client_config,
        boto_client_kwargs,
        check_boto_client_options,
        make_boto_client,
    )

    check_boto_client_options("MyStore", client_options)
    config = boto_client_config(options, timeout)
    extra_config, kwargs = boto_client_kwargs(options, client_options, profile_name)
    client = make_boto_client("sqs", "SQS", config, extra_config, profile_name, kwargs)

boto3 and botocore are imported only inside the functions that build a client: slimcache
itself does not depend on them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

from slimcache._exceptions import ConfigurationError
from slimcache.stores.toolkit import (
    DEFAULT_STORE_TIMEOUT,
    check_count,
    check_seconds,
    combine_options,
    redact_url,
    reject_unknown_options,
)

__all__ = [
    "BOTO_CLIENT_OPTIONS",
    "BOTO_URL_OPTIONS",
    "DEFAULT_MAX_POOL_CONNECTIONS",
    "boto_client_config",
    "boto_client_kwargs",
    "check_boto_options",
    "check_endpoint_url",
    "check_region_name",
    "endpoint_of",
    "make_boto_client",
    "pool_size",
    "query_options",
    "split_store_url",
]

DEFAULT_MAX_POOL_CONNECTIONS = 10
"""Connections a boto3-based store's client pools unless ``max_pool_connections`` says."""

BOTO_CLIENT_OPTIONS = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "verify", "use_ssl"}
)
"""Keyword options a boto3-based ``from_url`` hands to boto3 as they are (credentials, TLS)."""

BOTO_URL_OPTIONS = {
    "timeout": "timeout",
    "endpoint_url": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_pool_connections": "max_pool_connections",
}
"""Query options every boto3-based store's URL takes, and the ``from_url`` keyword each fills."""

_REGION = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def endpoint_of(client: object) -> tuple[str | None, int | None]:
    """The host and port of the endpoint a boto3 client talks to, when it tells.

    Args:
        client: A boto3 client, or anything else (which tells nothing).

    Returns:
        ``(host, port)``, either ``None`` when the client does not tell.
    """
    try:
        parts = urlsplit(getattr(getattr(client, "meta", None), "endpoint_url", None) or "")
        return parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return None, None


def pool_size(client: object) -> int:
    """How many connections a boto3 client pools: its ``max_pool_connections``, else 10.

    Args:
        client: A boto3 client, or anything else (which gets the default).

    Returns:
        A positive number of connections.
    """
    config = getattr(getattr(client, "meta", None), "config", None)
    pool = getattr(config, "max_pool_connections", None)
    return pool if isinstance(pool, int) and pool > 0 else DEFAULT_MAX_POOL_CONNECTIONS


def split_store_url(
    url: object, scheme: str, store: str, article: str, names: str, *, path: bool
) -> SplitResult:
    """Split a store URL that must have ``scheme`` and hold no credentials nor fragment.

    Args:
        url: The store URL as given.
        scheme: The scheme it must have (any case), such as ``"s3"``.
        store: The store class's name, for the messages.
        article: ``"a"`` or ``"an"``, as the messages say the URL: ``"an s3:// URL"``.
        names: What the URL names, and where credentials go instead, for the message on a
            URL with a user, a password or a port.
        path: Whether the URL may have a path.

    Returns:
        The URL's parts.

    Raises:
        ConfigurationError: The URL is not a string, has another scheme, holds a user, a
            password or a port, has a fragment, or has a path where it may not.
    """
    if not isinstance(url, str):
        raise ConfigurationError(f"store URL must be a string, got {type(url).__name__}")
    what = f"{article} {scheme}:// URL"
    parts = urlsplit(url)
    if parts.scheme.lower() != scheme:
        raise ConfigurationError(f"{store} needs {what}, got {redact_url(url)!r}")
    if parts.username is not None or parts.password is not None or ":" in parts.netloc:
        raise ConfigurationError(f"{what} names only {names}")
    if path and parts.fragment:
        raise ConfigurationError(f"{what} has no fragment, got {redact_url(url)!r}")
    if not path and (parts.path not in ("", "/") or parts.fragment):
        raise ConfigurationError(f"{what} has no path or fragment, got {redact_url(url)!r}")
    return parts


def query_options(
    url: str,
    query: str,
    known: Mapping[str, str],
    scheme: str,
    keywords: Mapping[str, object],
    *,
    suggest: bool = False,
) -> dict[str, Any]:
    """The options a store URL's query and ``from_url``'s keywords give, by keyword.

    Args:
        url: The store URL (printed redacted).
        query: Its query.
        known: Each query option the store reads, and the ``from_url`` keyword it fills.
        scheme: The URL's scheme, for the messages.
        keywords: The options given as keywords (``None``: not given), combined with the
            query's by :func:`~slimcache.stores.combine_options`.
        suggest: Refuse an unknown option with
            :func:`~slimcache.stores.reject_unknown_options`, which names a known one it
            resembles, rather than with the list of known ones alone.

    Returns:
        The options by keyword.

    Raises:
        ConfigurationError: The query is malformed, an option is unknown, two options fill
            the same keyword, or an option is given both in the query and as a keyword.
    """
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(f"malformed query in store URL {redact_url(url)!r}") from None
    if suggest:
        reject_unknown_options(url, [name for name, _ in pairs], known)
    options: dict[str, str] = {}
    for name, value in pairs:
        target = known.get(name)
        if target is None:
            names = ", ".join(sorted(known))
            raise ConfigurationError(f"unknown {scheme}:// option {name!r} (known: {names})")
        if target in options:
            raise ConfigurationError(f"{scheme}:// option {name!r} is given twice")
        options[target] = value
    return combine_options(url, options, keywords)


def check_boto_options(
    store: str, options: Mapping[str, object], client_options: Mapping[str, object]
) -> float:
    """Check the keywords handed to boto3, then return the store's bound on a call.

    Args:
        store: The store class's name, for the message.
        options: The store's options; ``timeout`` is read (default
            :data:`~slimcache.stores.DEFAULT_STORE_TIMEOUT`).
        client_options: The extra keyword options ``from_url`` was given: only
            :data:`BOTO_CLIENT_OPTIONS` and ``config`` are known.

    Returns:
        The bound, in seconds.

    Raises:
        ConfigurationError: A client option is unknown (the message names it and the known
            ones), or ``timeout`` is invalid.
    """
    unknown = sorted(set(client_options) - BOTO_CLIENT_OPTIONS - {"config"})
    if unknown:
        known = ", ".join(sorted(BOTO_CLIENT_OPTIONS | {"config", "profile_name"}))
        raise ConfigurationError(f"unknown {store} option {unknown[0]!r} (known: {known})")
    bound = check_seconds("timeout", options.get("timeout", DEFAULT_STORE_TIMEOUT))
    assert bound is not None
    return bound


def check_endpoint_url(value: object) -> str:
    """Check the ``endpoint_url`` option and return it.

    Args:
        value: The option as given.

    Returns:
        The ``http://`` or ``https://`` URL.

    Raises:
        ConfigurationError: It is not a string, or not an http(s) URL with a host.
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"endpoint_url must be a string, got {type(value).__name__}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"endpoint_url must be an http:// or https:// URL with a host, got {value!r}"
        )
    return value


def check_region_name(value: object) -> str:
    """Check the ``region_name`` option and return it.

    Args:
        value: The option as given.

    Returns:
        The region name, such as ``us-east-1``.

    Raises:
        ConfigurationError: It is not a string shaped like an AWS region name.
    """
    if not isinstance(value, str) or not _REGION.match(value):
        raise ConfigurationError(
            f"region_name must be an AWS region name such as 'us-east-1', got {value!r}"
        )
    return value


def boto_client_config(
    options: Mapping[str, object], timeout: float, *, retries: int | None = None
) -> dict[str, Any]:
    """Check the connection options and return the ``botocore.config.Config`` arguments.

    Each attempt gets ``timeout / attempts`` seconds, split in half between connecting and
    reading unless the caller set one or both.

    Args:
        options: The checked-so-far options: ``connect_timeout``, ``read_timeout`` and
            ``max_pool_connections`` are read, each optional.
        timeout: The store's bound on a call, in seconds.
        retries: How many times botocore retries a request (``max_attempts``), each retry
            getting its share of ``timeout``; ``None``: one attempt and no retry, the store
            retrying what it can itself.

    Returns:
        ``connect_timeout``, ``read_timeout``, ``retries`` and ``max_pool_connections``.

    Raises:
        ConfigurationError: An option is invalid, or the connect and read timeouts of an
            attempt do not fit in its share of ``timeout``.
    """
    attempts = 1 if retries is None else retries + 1
    share = timeout / attempts
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
        each = (
            ""
            if retries is None
            else f"of each of the {attempts} attempts (max_attempts={retries} retries) "
        )
        raise ConfigurationError(
            f"connect_timeout + read_timeout ({connect!r} + {read!r} s) {each}must fit in "
            f"timeout ({timeout:g} s): raise timeout or lower them"
        )
    return {
        "connect_timeout": connect_seconds,
        "read_timeout": read_seconds,
        # With no retries asked for, botocore tries once: it would also resend a write that
        # timed out, which may have landed.
        "retries": (
            {"total_max_attempts": 1, "mode": "standard"}
            if retries is None
            else {"max_attempts": retries, "mode": "standard"}
        ),
        "max_pool_connections": check_count(
            "max_pool_connections",
            options.get("max_pool_connections", DEFAULT_MAX_POOL_CONNECTIONS),
        ),
    }


def boto_client_kwargs(
    options: Mapping[str, object], client_options: dict[str, Any], profile_name: object
) -> tuple[object, dict[str, Any]]:
    """Take ``config`` out of ``client_options`` and check the endpoint, region and profile.

    Args:
        options: The checked-so-far options: ``endpoint_url`` and ``region_name`` are read,
            each optional.
        client_options: Credentials, TLS and ``config``; ``config`` is popped from it.
        profile_name: A profile of the shared AWS config files, or ``None``.

    Returns:
        The extra ``config`` (``None``: not given) and the keyword arguments for the client.

    Raises:
        ConfigurationError: The endpoint, region or profile name is invalid.
    """
    extra_config = client_options.pop("config", None)
    kwargs: dict[str, Any] = dict(client_options)
    if "endpoint_url" in options:
        kwargs["endpoint_url"] = check_endpoint_url(options["endpoint_url"])
    if "region_name" in options:
        kwargs["region_name"] = check_region_name(options["region_name"])
    if profile_name is not None and not isinstance(profile_name, str):
        raise ConfigurationError(
            f"profile_name must be a string, got {type(profile_name).__name__}"
        )
    return extra_config, kwargs


def make_boto_client(
    service: str,
    title: str,
    config_options: Mapping[str, Any],
    extra_config: object,
    profile_name: str | None,
    kwargs: Mapping[str, Any],
) -> Any:
    """Build a boto3 client in a session of its own.

    A session per store: boto3's default session is not safe to share across threads.

    Args:
        service: The boto3 service name, such as ``"s3"``.
        title: The service as the message names it, such as ``"S3"``.
        config_options: The arguments of :func:`boto_client_config`.
        extra_config: A ``botocore.config.Config`` merged over them, or ``None``.
        profile_name: A profile of the shared AWS config files, or ``None``.
        kwargs: The keyword arguments of :func:`boto_client_kwargs`.

    Returns:
        The client.

    Raises:
        ConfigurationError: ``extra_config`` is not a ``Config``, or boto3 cannot build the
            client (an unknown profile, a bad option).
    """
    import boto3.session
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    config = Config(**config_options)
    if extra_config is not None:
        if not isinstance(extra_config, Config):
            raise ConfigurationError(
                f"config must be a botocore.config.Config, got {type(extra_config).__name__}"
            )
        config = config.merge(extra_config)
    try:
        session = boto3.session.Session(profile_name=profile_name)
        return session.client(service, config=config, **kwargs)  # type: ignore[call-overload]
    except (BotoCoreError, ValueError) as exc:
        raise ConfigurationError(f"cannot build the {title} client: {exc}") from exc
