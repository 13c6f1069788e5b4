"""Behaviour of the S3 store against a real moto server over HTTP: URLs, key encoding, TTLs,
conditional writes, isolation, worker threads, error wrapping and a restarted endpoint.

The generic store behaviour is covered by the conformance suite; this module keeps to what is
particular to S3.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import boto3
import pytest
from botocore.exceptions import BotoCoreError, ClientError
from hypothesis import given, settings
from hypothesis import strategies as st
from slimcache_s3 import S3Store

from slimcache import ConfigurationError, StoreError, open_store
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT
from tests.servers.s3_server import S3Server, unique_bucket_name
from tests.servers.store_factories import StoreFactoryOf

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.servers

# Generous bounds that only stop a hang from stalling the run; they are not what is tested.
HANG_GUARD = 60.0
EXPIRY_DEADLINE = 15.0

NASTY_KEYS = [
    "",
    " ",
    ".",
    "..",
    "../../etc/passwd",
    "/leading",
    "trailing/",
    "a/b",
    "a%2Fb",
    "100%",
    "%",
    "%%41",
    "spaces in it",
    "line\nbreak\r\n",
    "tab\there",
    "nul\x00byte",
    "del\x7f",
    "query?x=1#frag",
    "plus+and&amp",
    "back\\slash",
    "ünïcödé 日本語",
    "emoji 🎉",
    "lone surrogate \ud800",
    "k-",
    "h-" + "0" * 64,
    "x" * 1100,
    "x" * 1101,
    "é" * 600,
]


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def unused_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def raw_client(s3_server: S3Server) -> Iterator[S3Client]:
    """A plain boto3 client on the test server, to look at objects behind a store's back."""
    client = s3_server.client()
    yield client
    client.close()


def object_keys(client: S3Client, bucket: str) -> list[str]:
    """Every object key in ``bucket``."""
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


async def wait_until_expired(store: S3Store, key: str) -> None:
    """Poll ``key`` until it reads as absent; fail if that takes unreasonably long."""
    deadline = time.monotonic() + EXPIRY_DEADLINE
    while await store.get(key) is not None:
        assert time.monotonic() < deadline, f"{key!r} never expired"
        await asyncio.sleep(0.05)


# -- from_url and configuration ---------------------------------------------------------------


async def test_from_url_takes_endpoint_and_region_from_the_query(
    s3_server: S3Server, raw_client: S3Client
) -> None:
    bucket = s3_server.create_bucket()
    url = f"s3://{bucket}/some/prefix?endpoint_url={s3_server.endpoint_url}&region=us-east-1"
    store = open_store(
        url,
        aws_access_key_id=s3_server.access_key,
        aws_secret_access_key=s3_server.secret_key,
    )
    assert isinstance(store, S3Store)
    async with store:
        assert store.bucket == bucket
        assert store.prefix == "some/prefix/"
        assert store.client.meta.region_name == "us-east-1"
        assert store.client.meta.endpoint_url == s3_server.endpoint_url
        await store.set("greeting", "hello")
        assert await store.get("greeting") == "hello"
    assert object_keys(raw_client, bucket) == ["some/prefix/k-greeting"]


def test_from_url_builds_the_client_config() -> None:
    store = S3Store.from_url(
        "s3://config-bucket?connect_timeout=1.5&read_timeout=3&max_attempts=4"
        "&max_pool_connections=7&addressing_style=path&region=eu-west-1&timeout=25",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    config: Any = store.client.meta.config  # the stubs leave its attributes out
    assert store.timeout == 25.0
    assert config.connect_timeout == 1.5
    assert config.read_timeout == 3.0
    # botocore counts max_attempts as retries: four retries, five attempts in all.
    assert config.retries == {"mode": "standard", "total_max_attempts": 5}
    assert config.max_pool_connections == 7
    assert config.s3 == {"addressing_style": "path"}
    assert store.client.meta.region_name == "eu-west-1"
    assert store.prefix == ""


@pytest.mark.parametrize(
    ("options", "connect", "read", "attempts"),
    [
        ({}, 2.5, 2.5, 1),
        ({"timeout": 2}, 1.0, 1.0, 1),
        ({"timeout": 6, "max_attempts": 2}, 1.0, 1.0, 3),
        ({"timeout": 6, "read_timeout": 5}, 1.0, 5.0, 1),
        ({"timeout": 6, "connect_timeout": 0.5}, 0.5, 5.5, 1),
        ({"timeout": 4, "max_attempts": 1, "connect_timeout": 0.5, "read_timeout": 1}, 0.5, 1, 2),
    ],
)
def test_client_timeouts_fit_in_the_call_timeout(
    options: dict[str, Any], connect: float, read: float, attempts: int
) -> None:
    store = S3Store.from_url(
        "s3://config-bucket/p",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        **options,
    )
    config: Any = store.client.meta.config
    assert store.timeout == options.get("timeout", DEFAULT_STORE_TIMEOUT)
    assert (config.connect_timeout, config.read_timeout) == (connect, read)
    assert config.retries == {"mode": "standard", "total_max_attempts": attempts}
    assert attempts * (config.connect_timeout + config.read_timeout) <= store.timeout
    assert config.max_pool_connections == 10
    assert store.prefix == "p/"


@pytest.mark.parametrize(
    ("query", "keyword"),
    [
        ("read_timeout=3", {"read_timeout": 9}),
        ("region=eu-west-1", {"region_name": "us-west-2"}),
        ("region_name=eu-west-1", {"region_name": "eu-west-1"}),
        ("timeout=2", {"timeout": 2}),
        ("endpoint_url=http://127.0.0.1:9", {"endpoint_url": "http://127.0.0.1:9"}),
    ],
)
def test_an_option_in_the_url_and_as_a_keyword_is_a_configuration_error(
    query: str, keyword: dict[str, Any]
) -> None:
    name = next(iter(keyword))
    with pytest.raises(ConfigurationError, match=f"{name}.*both in the URL"):
        S3Store.from_url(f"s3://config-bucket?{query}", **keyword)


@pytest.mark.parametrize(
    ("url", "options", "names"),
    [
        ("redis://bucket", {}, "s3://"),
        ("s3://", {}, "bucket"),
        ("s3://ab", {}, "bucket"),
        ("s3://Upper-Case", {}, "bucket"),
        ("s3://under_score", {}, "bucket"),
        ("s3://two..dots", {}, "bucket"),
        ("s3://192.168.10.20", {}, "bucket"),
        ("s3://xn--reserved", {}, "bucket"),
        ("s3://" + "b" * 64, {}, "bucket"),
        ("s3://user:secret@bucket", {}, "credentials"),
        ("s3://bucket:9000", {}, "endpoint"),
        ("s3://bucket?colour=red", {}, "colour"),
        ("s3://bucket?region=us-east-1&region_name=us-east-1", {}, "twice"),
        ("s3://bucket?connect_timeout=soon", {}, "connect_timeout"),
        ("s3://bucket?read_timeout=-1", {}, "read_timeout"),
        ("s3://bucket?read_timeout=inf", {}, "read_timeout"),
        ("s3://bucket?max_attempts=-1", {}, "max_attempts"),
        ("s3://bucket?max_pool_connections=1.5", {}, "max_pool_connections"),
        ("s3://bucket?endpoint_url=ftp://127.0.0.1", {}, "endpoint_url"),
        ("s3://bucket?endpoint_url=http://", {}, "endpoint_url"),
        ("s3://bucket?region=US%20East", {}, "region_name"),
        ("s3://bucket?addressing_style=sideways", {}, "addressing_style"),
        ("s3://bucket/p", {"prefix": "q/"}, "prefix"),
        ("s3://bucket", {"prefix": "/absolute/"}, "prefix"),
        ("s3://bucket", {"prefix": "a/../b/"}, "prefix"),
        ("s3://bucket", {"prefix": "bell\x07/"}, "prefix"),
        ("s3://bucket", {"prefix": "p" * 1000}, "prefix"),
        ("s3://bucket", {"prefix": 7}, "prefix"),
        ("s3://bucket", {"connect_timeout": float("nan")}, "connect_timeout"),
        ("s3://bucket", {"max_attempts": True}, "max_attempts"),
        ("s3://bucket", {"aws_secret": "x"}, "aws_secret"),
        ("s3://bucket", {"config": "fast"}, "config"),
        ("s3://bucket", {"profile_name": 3}, "profile_name"),
        ("s3://bucket?timeout=0", {}, "timeout"),
        ("s3://bucket", {"timeout": "soon"}, "timeout"),
        ("s3://bucket", {"timeout": 5, "read_timeout": 6}, "must fit in timeout"),
        ("s3://bucket", {"timeout": 5, "connect_timeout": 5}, "must fit in timeout"),
        ("s3://bucket", {"timeout": 2, "max_attempts": 3, "read_timeout": 0.5}, "must fit"),
        ("s3://bucket", {"timeout": 1, "connect_timeout": 0.6, "read_timeout": 0.6}, "must fit"),
    ],
)
def test_from_url_rejects_bad_configuration(url: str, options: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigurationError, match=names):
        S3Store.from_url(url, **options)


def test_constructor_checks_its_arguments() -> None:
    client = boto3.session.Session().client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    try:
        with pytest.raises(ConfigurationError, match="client"):
            S3Store(object(), "good-bucket")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="bucket"):
            S3Store(client, "Bad Bucket")
        with pytest.raises(ConfigurationError, match="prefix"):
            S3Store(client, "good-bucket", prefix="./")
    finally:
        client.close()


# -- key encoding -------------------------------------------------------------------------------


@functools.cache
def offline_store(prefix: str) -> S3Store:
    """A store whose client is never used: object keys are computed locally."""
    client = boto3.session.Session().client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return S3Store(client, "offline-bucket", prefix=prefix)


_ANY_CHARACTER = st.one_of(
    st.characters(exclude_categories=()),
    st.characters(categories=["Cs"]),
    st.sampled_from("%/.-_~ \n\x00+kh"),
)
STORE_KEYS = st.one_of(
    st.text(_ANY_CHARACTER, max_size=40),
    st.text(_ANY_CHARACTER, min_size=300, max_size=1200),
    st.text(st.sampled_from("%é/."), min_size=150, max_size=400),
)
PREFIXES = st.sampled_from(["", "cache/", "deep/nested/prefix/", "日本/", "p" * 900])


@settings(max_examples=400, deadline=None)
@given(key=STORE_KEYS, prefix=PREFIXES)
def test_object_key_is_safe_and_reversible(key: str, prefix: str) -> None:
    name = offline_store(prefix).object_key(key)
    assert name.startswith(prefix)
    assert len(name.encode("utf-8")) <= 1024
    rest = name[len(prefix) :]
    assert all(char.isascii() and (char.isalnum() or char in "%_.-~") for char in rest)
    if rest.startswith("k-"):
        # The short form decodes back to the key: no other key can share it.
        assert unquote(rest[2:], encoding="utf-8", errors="surrogatepass") == key
    else:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        assert rest == "h-" + digest
        # The short form would have passed the limit, which counts the prefix in bytes.
        short = "k-" + quote(key, safe="", errors="surrogatepass")
        assert len(prefix.encode("utf-8")) + len(short) > 1024


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(STORE_KEYS, unique=True, min_size=2, max_size=12), prefix=PREFIXES)
def test_distinct_keys_never_share_an_object_key(keys: list[str], prefix: str) -> None:
    store = offline_store(prefix)
    names = [store.object_key(key) for key in keys]
    assert len(set(names)) == len(keys)


@settings(deadline=None)
@given(key=STORE_KEYS)
def test_a_key_never_collides_with_its_own_encoding(key: str) -> None:
    store = offline_store("")
    encoded = quote(key, safe="", errors="surrogatepass")
    if encoded != key:
        assert store.object_key(encoded) != store.object_key(key)
    assert store.object_key("k-" + key) != store.object_key(key)


async def test_nasty_keys_round_trip_through_the_server(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    store = await s3_store_factory()
    for key in NASTY_KEYS:
        await store.set(key, f"value of {key!r}")
    for key in NASTY_KEYS:
        assert await store.get(key) == f"value of {key!r}", key
    assert await store.get_many(NASTY_KEYS) == [f"value of {key!r}" for key in NASTY_KEYS]
    stored = object_keys(raw_client, store.bucket)
    assert sorted(stored) == sorted(store.object_key(key) for key in NASTY_KEYS)
    assert all(len(name.encode()) <= 1024 for name in stored)
    for key in NASTY_KEYS:
        await store.delete(key)
        assert await store.get(key) is None, key
    assert object_keys(raw_client, store.bucket) == []


async def test_values_round_trip_exactly(s3_store_factory: StoreFactoryOf[S3Store]) -> None:
    store = await s3_store_factory()
    values = ["", "\n", "lone surrogate \udfff", "nul\x00", "é" * 100_000, "slimcache-s3/1 "]
    for index, value in enumerate(values):
        await store.set(f"v{index}", value)
    assert await store.get_many([f"v{index}" for index in range(len(values))]) == values


async def test_object_not_written_by_the_store_reads_as_its_content(
    s3_store_factory: StoreFactoryOf[S3Store],
    raw_client: S3Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = await s3_store_factory()
    raw_client.put_object(Bucket=store.bucket, Key=store.object_key("foreign"), Body=b"plain")
    raw_client.put_object(
        Bucket=store.bucket, Key=store.object_key("binary"), Body=b"bytes \xff\xfe end"
    )
    with caplog.at_level(logging.WARNING):
        assert await store.get("foreign") == "plain"
        assert await store.get("binary") == "bytes \ufffd\ufffd end"
    assert "not written by slimcache's S3Store" in caplog.text
    assert "not UTF-8" in caplog.text
    assert await store.get_many(["foreign", "binary"]) == ["plain", "bytes \ufffd\ufffd end"]
    # What get shows is what compare_and_set and compare_and_delete match against.
    assert await store.compare_and_set("foreign", "plain", "replaced") is True
    assert await store.get("foreign") == "replaced"
    assert await store.compare_and_delete("binary", "bytes \ufffd\ufffd end") is True
    assert await store.get("binary") is None


async def test_value_bytes_that_are_not_utf8_after_the_header(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    store = await s3_store_factory()
    header = b"slimcache-s3/1 " + b"0" * 32 + b"\n"
    raw_client.put_object(Bucket=store.bucket, Key=store.object_key("k"), Body=header + b"\xc3")
    assert await store.get("k") == "\ufffd"
    assert await store.compare_and_set("k", "\ufffd", "fixed") is True
    assert await store.get("k") == "fixed"


@pytest.mark.parametrize("expires_at", ["soon", "", "nan", "1e9999x"])
async def test_malformed_expiry_metadata_means_no_expiry(
    s3_store_factory: StoreFactoryOf[S3Store],
    raw_client: S3Client,
    caplog: pytest.LogCaptureFixture,
    expires_at: str,
) -> None:
    store = await s3_store_factory()
    await store.set("k", "kept")
    name = store.object_key("k")
    body = raw_client.get_object(Bucket=store.bucket, Key=name)["Body"].read()
    raw_client.put_object(
        Bucket=store.bucket, Key=name, Body=body, Metadata={"expires-at": expires_at}
    )
    with caplog.at_level(logging.WARNING):
        assert await store.get("k") == "kept"
    assert "malformed x-amz-meta-expires-at" in caplog.text
    assert await store.set_if_absent("k", "intruder") is False
    assert await store.compare_and_set("k", None, "intruder") is False
    assert await store.compare_and_set("k", "kept", "next") is True
    assert await store.get("k") == "next"


# -- TTL ----------------------------------------------------------------------------------------


async def test_ttl_is_kept_in_metadata_and_honoured_on_read(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    store = await s3_store_factory()
    before = time.time()
    await store.set("short", "brief", ttl=0.5)
    await store.set("forever", "stays")
    head = raw_client.head_object(Bucket=store.bucket, Key=store.object_key("short"))
    expires_at = float(head["Metadata"]["expires-at"])
    assert before + 0.5 <= expires_at <= time.time() + 0.5
    untimed = raw_client.head_object(Bucket=store.bucket, Key=store.object_key("forever"))
    assert "expires-at" not in untimed["Metadata"]

    await wait_until_expired(store, "short")
    assert await store.get("forever") == "stays"
    # The read that found the object expired deleted it.
    assert object_keys(raw_client, store.bucket) == [store.object_key("forever")]


async def test_overwrite_without_ttl_drops_the_expiry(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    store = await s3_store_factory()
    await store.set("k", "timed", ttl=100)
    await store.set("k", "untimed")
    head = raw_client.head_object(Bucket=store.bucket, Key=store.object_key("k"))
    assert "expires-at" not in head["Metadata"]


async def test_expiry_follows_the_clock(s3_server: S3Server) -> None:
    clock = FakeClock()
    bucket = s3_server.create_bucket()
    async with S3Store(s3_server.client(), bucket, clock=clock) as store:
        await store.set("k", "v", ttl=60)
        clock.now += 59
        assert await store.get("k") == "v"
        clock.now += 2
        assert await store.get("k") is None


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "5"])
async def test_bad_ttl_or_value_is_rejected_before_any_request(
    s3_store_factory: StoreFactoryOf[S3Store], ttl: object
) -> None:
    # The bucket does not exist: any request would end in StoreError, not ConfigurationError.
    store = await s3_store_factory(bucket=unique_bucket_name())
    with pytest.raises(ConfigurationError, match="ttl"):
        await store.set("k", "v", ttl=ttl)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ttl"):
        await store.set_if_absent("k", "v", ttl=ttl)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="value"):
        await store.set("k", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="key"):
        await store.get(42)  # type: ignore[arg-type]


# -- set_if_absent --------------------------------------------------------------------------------


async def test_set_if_absent_uses_conditional_writes(
    s3_store_factory: StoreFactoryOf[S3Store],
) -> None:
    store = await s3_store_factory()
    assert await store.set_if_absent("k", "first") is True
    assert await store.set_if_absent("k", "second") is False
    assert await store.get("k") == "first"
    await store.delete("k")
    assert await store.set_if_absent("k", "third", ttl=100) is True
    assert await store.get("k") == "third"


async def test_set_if_absent_race_has_exactly_one_winner(
    s3_store_factory: StoreFactoryOf[S3Store],
) -> None:
    store = await s3_store_factory(max_pool_connections=50)
    results = await asyncio.wait_for(
        asyncio.gather(*(store.set_if_absent("contested", f"writer {i}") for i in range(50))),
        HANG_GUARD,
    )
    assert results.count(True) == 1
    assert await store.get("contested") == f"writer {results.index(True)}"


async def test_set_if_absent_takes_over_an_expired_object(
    s3_server: S3Server, raw_client: S3Client
) -> None:
    clock = FakeClock()
    bucket = s3_server.create_bucket()
    async with S3Store(s3_server.client(), bucket, clock=clock) as store:
        await store.set("k", "old", ttl=10)
        assert await store.set_if_absent("k", "blocked") is False
        clock.now += 11
        # The expired object is still in the bucket: only the conditional takeover can win.
        assert object_keys(raw_client, bucket) == [store.object_key("k")]
        assert await store.set_if_absent("k", "new", ttl=30) is True
        assert await store.get("k") == "new"
        head = raw_client.head_object(Bucket=bucket, Key=store.object_key("k"))
        assert float(head["Metadata"]["expires-at"]) == clock.now + 30


async def test_every_write_gets_its_own_etag(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    # The takeover of an expired object is conditional on its ETag; were a fresh write of
    # the same value to repeat that ETag, a late writer could replace the fresh object.
    store = await s3_store_factory()
    name = store.object_key("k")
    etags = []
    for _ in range(3):
        await store.set("k", "same value", ttl=100)
        etags.append(raw_client.head_object(Bucket=store.bucket, Key=name)["ETag"])
    assert len(set(etags)) == 3


async def test_expired_object_with_the_same_value_is_taken_over_once(
    s3_server: S3Server,
) -> None:
    # Every writer stores the value the expired object held: the takeover must still
    # tell the expired object from a fresh one.
    clock = FakeClock()
    bucket = s3_server.create_bucket()
    client = s3_server.client(max_pool_connections=50)
    async with S3Store(client, bucket, clock=clock) as store:
        await store.set("lock", "held", ttl=1)
        clock.now += 2
        results = await asyncio.wait_for(
            asyncio.gather(*(store.set_if_absent("lock", "held", ttl=60) for _ in range(50))),
            HANG_GUARD,
        )
        assert results.count(True) == 1
        assert await store.get("lock") == "held"


# -- compare_and_set ---------------------------------------------------------------------------


def write_behind_the_store(store: S3Store, raw_client: S3Client, operation: str, key: str) -> None:
    """Make the next ``operation`` request of ``store`` find ``key`` rewritten since it was read.

    The rewrite stores the same value under a new write id, so only the ETag tells it apart.
    """
    done = threading.Event()

    def rewrite(**kwargs: Any) -> None:
        if done.is_set():
            return
        done.set()
        current = raw_client.get_object(Bucket=store.bucket, Key=store.object_key(key))
        body = current["Body"].read()
        assert body.startswith(b"slimcache-s3/1 ")
        raw_client.put_object(
            Bucket=store.bucket,
            Key=store.object_key(key),
            Body=b"slimcache-s3/1 " + b"f" * 32 + body[47:],
        )

    store.client.meta.events.register(f"before-call.s3.{operation}", rewrite)


async def test_compare_and_set_loses_to_a_write_after_its_read(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    store = await s3_store_factory()
    await store.set("k", "v1")
    write_behind_the_store(store, raw_client, "PutObject", "k")
    assert await store.compare_and_set("k", "v1", "v2") is False
    assert await store.get("k") == "v1"  # the rewrite's value, not this call's
    assert await store.compare_and_set("k", "v1", "v2") is True
    assert await store.get("k") == "v2"


async def test_compare_and_delete_loses_to_a_write_after_its_read(
    s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    store = await s3_store_factory()
    await store.set("k", "lease")
    write_behind_the_store(store, raw_client, "DeleteObject", "k")
    assert await store.compare_and_delete("k", "lease") is False
    assert await store.get("k") == "lease"
    assert await store.compare_and_delete("k", "lease") is True
    assert object_keys(raw_client, store.bucket) == []


async def test_compare_and_set_of_an_expired_object(s3_server: S3Server) -> None:
    clock = FakeClock()
    bucket = s3_server.create_bucket()
    async with S3Store(s3_server.client(), bucket, clock=clock) as store:
        await store.set("k", "old", ttl=10)
        assert await store.compare_and_set("k", None, "blocked") is False
        clock.now += 11
        assert await store.compare_and_set("k", "old", "revived") is False
        assert await store.compare_and_delete("k", "old") is False
        assert await store.compare_and_set("k", None, "new", ttl=30) is True
        assert await store.get("k") == "new"
        clock.now += 31
        assert await store.get("k") is None


# -- get_many --------------------------------------------------------------------------------------


async def test_get_many_keeps_order_and_reports_missing_and_expired(
    s3_server: S3Server,
) -> None:
    clock = FakeClock()
    bucket = s3_server.create_bucket()
    async with S3Store(s3_server.client(max_pool_connections=3), bucket, clock=clock) as store:
        for index in range(12):
            await store.set(f"k{index}", f"v{index}")
        await store.set("timed", "gone soon", ttl=5)
        clock.now += 6
        keys = ["k3", "missing", "k0", "timed", "k3", *(f"k{i}" for i in range(4, 12))]
        expected = ["v3", None, "v0", None, "v3", *(f"v{i}" for i in range(4, 12))]
        assert await store.get_many(keys) == expected
        assert await store.get_many([]) == []


# -- isolation -------------------------------------------------------------------------------------


async def test_prefixes_isolate_stores_in_one_bucket(
    s3_server: S3Server, s3_store_factory: StoreFactoryOf[S3Store], raw_client: S3Client
) -> None:
    bucket = s3_server.create_bucket()
    root = await s3_store_factory(bucket=bucket, prefix="")
    first = await s3_store_factory(bucket=bucket, prefix="a/")
    nested = await s3_store_factory(bucket=bucket, prefix="a/b/")
    stores = [root, first, nested]
    for index, store in enumerate(stores):
        await store.set("shared", f"store {index}")
        await store.set("b/shared", f"slash {index}")
    assert [await store.get("shared") for store in stores] == ["store 0", "store 1", "store 2"]
    assert [await store.get("b/shared") for store in stores] == ["slash 0", "slash 1", "slash 2"]
    await first.delete("shared")
    assert [await store.get("shared") for store in stores] == ["store 0", None, "store 2"]
    assert await first.set_if_absent("shared", "again") is True
    assert await nested.set_if_absent("shared", "again") is False
    assert len(object_keys(raw_client, bucket)) == 6


async def test_buckets_isolate_stores(s3_store_factory: StoreFactoryOf[S3Store]) -> None:
    left = await s3_store_factory(prefix="same/")
    right = await s3_store_factory(prefix="same/")
    assert left.bucket != right.bucket
    await left.set("k", "left")
    assert await right.get("k") is None
    assert await right.set_if_absent("k", "right") is True
    assert await left.get_many(["k"]) == ["left"]
    await right.delete("k")
    assert await left.get("k") == "left"


# -- the event loop --------------------------------------------------------------------------------


async def test_calls_run_in_worker_threads(s3_store_factory: StoreFactoryOf[S3Store]) -> None:
    store = await s3_store_factory()
    loop_thread = threading.get_ident()
    request_threads: list[int] = []

    def slow_send(**kwargs: Any) -> None:
        # Runs where botocore sends the request; it holds that thread for a while.
        request_threads.append(threading.get_ident())
        time.sleep(0.2)

    store.client.meta.events.register("before-send.s3", slow_send)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        await store.set("k", "v", ttl=100)
        assert await store.get("k") == "v"
        assert await store.set_if_absent("k", "w") is False
        assert await store.get_many(["k", "other"]) == ["v", None]
        await store.delete("k")
    finally:
        ticking.cancel()
    assert ticks >= 1
    assert request_threads
    assert loop_thread not in request_threads
    # The store's own threads, not the event loop's default executor.
    names = {thread.name for thread in threading.enumerate() if thread.ident in request_threads}
    assert names
    assert all(name.startswith("slimcache-s3") for name in names)


async def test_aclose_stops_the_store_threads(s3_store_factory: StoreFactoryOf[S3Store]) -> None:
    store = await s3_store_factory()
    await store.set("k", "v")
    assert any(thread.name.startswith("slimcache-s3") for thread in threading.enumerate())
    own = [thread for thread in threading.enumerate() if thread.name.startswith("slimcache-s3")]
    await store.aclose()
    for thread in own:
        thread.join(HANG_GUARD)
    assert not any(thread.is_alive() for thread in own)
    with pytest.raises(StoreError, match="closed"):
        await store.get("k")


# -- errors ----------------------------------------------------------------------------------------


async def test_errors_on_a_missing_bucket_are_wrapped(
    s3_store_factory: StoreFactoryOf[S3Store],
) -> None:
    bucket = unique_bucket_name()
    store = await s3_store_factory(bucket=bucket)
    operations: dict[str, Callable[[], Awaitable[object]]] = {
        "get": lambda: store.get("some key"),
        "set": lambda: store.set("some key", "v"),
        "set_if_absent": lambda: store.set_if_absent("some key", "v"),
        "delete": lambda: store.delete("some key"),
        "compare_and_set": lambda: store.compare_and_set("some key", "v", "w"),
        "compare_and_delete": lambda: store.compare_and_delete("some key", "v"),
        "get_many": lambda: store.get_many(["some key"]),
    }
    for operation, call in operations.items():
        with pytest.raises(StoreError) as caught:
            await asyncio.wait_for(call(), HANG_GUARD)
        message = str(caught.value)
        assert "'some key'" in message
        assert bucket in message
        if operation != "get_many":
            assert f"S3 {operation} of" in message
        cause = caught.value.__cause__
        assert isinstance(cause, ClientError)
        assert cause.response["Error"]["Code"] == "NoSuchBucket"


async def test_closed_store_refuses_calls(s3_store_factory: StoreFactoryOf[S3Store]) -> None:
    store = await s3_store_factory()
    async with store:
        await store.set("k", "v")
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get("k")


async def test_dead_endpoint_fails_promptly(s3_server: S3Server) -> None:
    store = S3Store.from_url(
        "s3://no-server-here",
        endpoint_url=f"http://127.0.0.1:{unused_port()}",
        region_name=s3_server.region,
        aws_access_key_id=s3_server.access_key,
        aws_secret_access_key=s3_server.secret_key,
        connect_timeout=1,
        max_attempts=2,
    )
    async with store:
        with pytest.raises(StoreError, match="S3 get of") as caught:
            await asyncio.wait_for(store.get("k"), HANG_GUARD)
        assert isinstance(caught.value.__cause__, BotoCoreError)


async def test_stopped_server_gives_store_errors_and_recovers(
    s3_server: S3Server, s3_store_factory: StoreFactoryOf[S3Store]
) -> None:
    store = await s3_store_factory()
    await store.set("before", "kept")
    s3_server.stop()
    try:
        with pytest.raises(StoreError, match="S3 get of") as caught:
            await asyncio.wait_for(store.get("before"), HANG_GUARD)
        assert isinstance(caught.value.__cause__, BotoCoreError)
        with pytest.raises(StoreError, match="S3 set_if_absent of"):
            await asyncio.wait_for(store.set_if_absent("during", "x"), HANG_GUARD)
    finally:
        s3_server.start()
    assert await store.get("before") == "kept"
    await store.set("after", "works")
    assert await store.get_many(["before", "after", "during"]) == ["kept", "works", None]
