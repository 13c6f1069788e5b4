"""No error message, chained cause or log line shows a store password.

A password is planted in every adapter's URL (or, for S3, which takes no credentials in its
URL, in its secret key and a query option); then bad options, unreachable servers and calls
that fail on the real servers each raise, and every message and log record is searched for it.
"""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from slimcache import (
    KeepMessages,
    MessageThreshold,
    SlimcacheError,
    SummarizeCompressor,
    open_store,
)
from slimcache.stores import redact_url
from slimcache.stores.protocol import SupportsClose
from tests.fakes import RecordingSummarizer, chat
from tests.servers.postgres_server import PostgresServer
from tests.servers.redis_server import RedisServer
from tests.servers.s3_server import S3Server

PASSWORD = "s3cr3t-Pa55w0rd"

pytestmark = pytest.mark.servers


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _bad_urls() -> list[str]:
    """URLs that fail when opened: unknown, repeated or malformed options and ports."""
    closed = _closed_port()
    return [
        f"redis://user:{PASSWORD}@127.0.0.1:{closed}/0?timout=1",
        f"redis://user:{PASSWORD}@127.0.0.1:{closed}/0?timeout=1&timeout=2",
        f"redis://user:{PASSWORD}@127.0.0.1:{closed}/0?timeout=soon",
        f"redis://user:{PASSWORD}@127.0.0.1:{closed}/0?db=zero",
        f"rediss://:{PASSWORD}@127.0.0.1:{closed}/0?prefix=a&prefix=b",
        f"unix://user:{PASSWORD}@/tmp/nowhere.sock?dbb=1",
        f"redis+cluster://user:{PASSWORD}@127.0.0.1:{closed}/3",
        f"redis+cluster://user:{PASSWORD}@127.0.0.1:notaport/",
        f"redis+cluster://user:{PASSWORD}@/",
        f"redis+cluster://user:{PASSWORD}@127.0.0.1:{closed}/?read_from_replica=1",
        f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1:notaport/db",
        f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1:{closed}/db?sslmode=require",
        f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1:{closed}/db?table=a&table=b",
        f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1:{closed}/db?timeout=-1",
        f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1:{closed}/db?table=no-dashes",
        f"postgres://user:{PASSWORD}@127.0.0.1:{closed}/db",
        f"postgresql://user:{PASSWORD}@127.0.0.1:{closed}/db",
        f"mysql+aiomysql://user:{PASSWORD}@127.0.0.1:{closed}/db",
        f"sqlite+aiosqlite:///cache.db?password={PASSWORD}",
        f"s3://key:{PASSWORD}@bucket/prefix",
        f"s3://bucket/prefix?aws_secret_access_key={PASSWORD}",
        f"memory://?password={PASSWORD}",
        f"nosuchscheme://user:{PASSWORD}@host/",
        f"user:{PASSWORD}@host/db",
    ]


def _texts(exc: BaseException) -> list[str]:
    """Every message of ``exc``, its causes and contexts, and its traceback as printed."""
    texts = ["".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
    seen: BaseException | None = exc
    while seen is not None:
        texts.append(str(seen))
        texts.append(repr(seen))
        seen = seen.__cause__ or seen.__context__
    return texts


async def _failure(action: Callable[[], Awaitable[Any]], what: str) -> BaseException:
    try:
        await action()
    except Exception as exc:
        return exc
    raise AssertionError(f"expected a failure: {what}")


async def _use(url: str, **options: Any) -> None:
    """Open ``url`` and call it through a compressor, bypassing the cache on errors (logged)."""
    store = open_store(url, **options)
    try:
        await store.get("k")
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()


async def _compress_through(url: str, **options: Any) -> None:
    """A compressor on ``url`` that bypasses the failing store: it logs, and raises nothing."""
    store = open_store(url, **options)
    try:
        compressor = SummarizeCompressor(
            RecordingSummarizer(),
            store,
            trigger=MessageThreshold(6),
            keep=KeepMessages(4),
            on_store_error="bypass",
        )
        result = await compressor.compress_detailed(chat(10), thread_id="t")
        assert result.outcome == "uncached"
        raise SlimcacheError("the store was bypassed, as logged")
    finally:
        if isinstance(store, SupportsClose):
            await store.aclose()


async def test_no_message_or_log_line_shows_a_store_password(
    caplog: pytest.LogCaptureFixture,
    redis_server: RedisServer,
    postgres_server: PostgresServer,
    s3_server: S3Server,
) -> None:
    caplog.set_level(logging.DEBUG)
    closed = _closed_port()
    host = f"127.0.0.1:{redis_server.port}"
    failures: list[BaseException] = []
    for url in _bad_urls():
        failures.append(await _failure(lambda url=url: _use(url), url))  # type: ignore[misc]

    unreachable = [
        f"redis://user:{PASSWORD}@127.0.0.1:{closed}/0?timeout=1",
        f"redis+cluster://user:{PASSWORD}@127.0.0.1:{closed}/?timeout=1",
        f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1:{closed}/db?timeout=1",
    ]
    # Calls the real servers refuse: a password Redis does not have, a database that is not.
    refused = [
        f"redis://someone:{PASSWORD}@{host}/0?timeout=2",
        f"postgresql+asyncpg://{postgres_server.user}:{PASSWORD}@{postgres_server.host}:"
        f"{postgres_server.port}/no_such_database?timeout=5",
    ]
    for url in unreachable + refused:
        failures.append(await _failure(lambda url=url: _use(url), url))  # type: ignore[misc]
        failures.append(
            await _failure(lambda url=url: _compress_through(url), url)  # type: ignore[misc]
        )
    s3 = {**s3_server.client_options, "aws_secret_access_key": PASSWORD, "timeout": 2}
    failures.append(await _failure(lambda: _use("s3://no-such-bucket/p", **s3), "no bucket"))
    s3_closed = {**s3, "endpoint_url": f"http://127.0.0.1:{closed}"}
    failures.append(await _failure(lambda: _use("s3://bucket/p", **s3_closed), "no s3"))
    failures.append(
        await _failure(lambda: _compress_through("s3://bucket/p", **s3_closed), "no s3")
    )

    assert len(failures) == len(_bad_urls()) + 2 * len(unreachable + refused) + 3
    assert all(isinstance(exc, SlimcacheError) for exc in failures), [
        f"{type(exc).__name__}: {exc}" for exc in failures if not isinstance(exc, SlimcacheError)
    ]
    leaks = [text for exc in failures for text in _texts(exc) if PASSWORD in text]
    leaks += [r.getMessage() for r in caplog.records if PASSWORD in r.getMessage()]
    assert leaks == []
    # The bypassed stores logged their failures, which were searched above.
    assert sum("compressing without the cache" in r.getMessage() for r in caplog.records) >= 6


def test_redact_url_hides_passwords_and_secret_options() -> None:
    assert redact_url("redis://u:pw@h:6379/0") == "redis://u:***@h:6379/0"
    assert redact_url("redis://:pw@h/0?timeout=1") == "redis://:***@h/0?timeout=1"
    assert redact_url("postgresql+asyncpg://u:p/w@d@h/db") == "postgresql+asyncpg://u:***@h/db"
    assert redact_url("redis+cluster://u:pw@a:1,b:2/") == "redis+cluster://u:***@a:1,b:2/"
    assert redact_url("s3://b/p?aws_secret_access_key=x&region=r") == (
        "s3://b/p?aws_secret_access_key=***&region=r"
    )
    assert redact_url("redis://h/0?password=x#f") == "redis://h/0?password=***#f"
    assert redact_url("u:pw@h/db") == "u:***@h/db"
    assert redact_url("sqlite+aiosqlite:///./x.db") == "sqlite+aiosqlite:///./x.db"
    assert redact_url("redis://u@h/0") == "redis://u@h/0"
