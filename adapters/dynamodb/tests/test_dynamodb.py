"""Behaviour of the DynamoDB store against a real moto server over HTTP: the conformance suite,
URLs, the table, item limits, deadlines, keys, batches, throttling, two processes on one
thread, and the command line.

The throttling tests are the one place without a real server's answer: moto never throttles,
so botocore's own event hook hands the real client a throttling reply in place of the server's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from slimcache_dynamodb import DynamoDBStore

from slimcache import (
    ConfigurationError,
    KeepMessages,
    MemoryStore,
    MessageThreshold,
    StoreError,
    StoreTimeout,
    SummarizeCompressor,
    SummaryContext,
)
from slimcache.stores import (
    CompareAndSetOp,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
    ThreadKeys,
)
from slimcache.testing import StoreConformance, StoreFactory
from tests.fakes import chat
from tests.servers.dynamodb_server import STORE_TIMEOUT, DynamoDBServer, unique_table_name
from tests.servers.store_factories import StoreFactoryOf
from tests.workers.replay_worker import SUMMARIZER_ID, summary_text

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[3]
# Only stops a hang from stalling the run; not what is tested.
GUARD = 120.0
ITEM_LIMIT = 400 * 1024


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def store_factory(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> StoreFactory:
    """The conformance suite's stores: each on a table of its own."""
    return dynamodb_store_factory


class TestDynamoDBConformance(StoreConformance):
    """Every case of :class:`slimcache.testing.StoreConformance` on moto's DynamoDB; the large
    value is one that fits DynamoDB's 400 KB item (the suite's million characters do not)."""

    large_value_size = 100_000


# -- URLs ---------------------------------------------------------------------------------------


def test_from_url_reads_the_table_and_its_options(dynamodb_server: DynamoDBServer) -> None:
    store = DynamoDBStore.from_url(
        dynamodb_server.url("my_table.v-1", timeout="2", create_table="false"),
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    try:
        assert store.table == "my_table.v-1"
        assert store.timeout == 2.0
        assert store.client.meta.endpoint_url == dynamodb_server.endpoint_url
        assert store.client.meta.region_name == dynamodb_server.region
        config: Any = store.client.meta.config  # the stubs leave its attributes out
        assert (config.connect_timeout, config.read_timeout) == (1.0, 1.0)
        assert store.database_target.system == "aws.dynamodb"
        assert store.database_target.collection == "my_table.v-1"
        assert store.expiry_clock == "writer"
    finally:
        asyncio.run(store.aclose())


@pytest.mark.parametrize(
    ("url", "options", "named"),
    [
        ("dynamodb://ab", {}, "table"),
        ("dynamodb://has space", {}, "table"),
        ("dynamodb://tbl/path", {}, "path"),
        ("dynamodb://user:pw@tbl", {}, "names only the table"),
        ("s3://tbl", {}, "dynamodb://"),
        ("dynamodb://tbl?create_table=maybe", {}, "create_table"),
        ("dynamodb://tbl?timeout=0", {}, "timeout"),
        ("dynamodb://tbl?regoin=us-east-1", {}, "did you mean 'region'"),
        ("dynamodb://tbl?region=us-east-1", {"region_name": "eu-west-1"}, "both"),
        ("dynamodb://tbl?endpoint_url=ftp://x", {}, "endpoint_url"),
        ("dynamodb://tbl?timeout=1&connect_timeout=0.8&read_timeout=0.8", {}, "must fit"),
        ("dynamodb://tbl", {"aws_secret": "x"}, "unknown DynamoDBStore option"),
    ],
)
def test_from_url_refuses_bad_configuration(url: str, options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        DynamoDBStore.from_url(url, **options)


def test_a_secret_in_the_url_is_never_printed() -> None:
    with pytest.raises(ConfigurationError) as caught:
        DynamoDBStore.from_url("dynamodb://tbl?aws_secret_access_key=hunter2")
    assert "hunter2" not in str(caught.value)


# -- the table ----------------------------------------------------------------------------------


async def test_the_table_is_created_on_first_use_with_ttl_on_the_deadline(
    dynamodb_server: DynamoDBServer, dynamodb_store_factory: StoreFactoryOf[DynamoDBStore]
) -> None:
    table = unique_table_name()
    store = await dynamodb_store_factory(table=table)
    client = dynamodb_server.client()
    try:
        names = client.list_tables()["TableNames"]
        assert table not in names  # nothing is sent before the first call
        await store.set("k", "v", ttl=3600)
        described = client.describe_table(TableName=table)["Table"]
        assert described["KeySchema"] == [{"AttributeName": "k", "KeyType": "HASH"}]
        assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        ttl = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")
        await store.setup()  # finds it: safe to call again
    finally:
        client.close()


async def test_two_stores_creating_one_table_at_once_share_it(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> None:
    table = unique_table_name()
    first = await dynamodb_store_factory(table=table)
    second = await dynamodb_store_factory(table=table)
    await asyncio.gather(first.set("a", "1"), second.set("b", "2"))
    assert await first.get_many(["a", "b"]) == ["1", "2"]


@pytest.mark.parametrize("how", ["url", "keyword"])
async def test_a_missing_table_is_refused_when_creation_is_off(
    dynamodb_server: DynamoDBServer, how: str
) -> None:
    table = unique_table_name()
    if how == "url":
        store = DynamoDBStore.from_url(
            dynamodb_server.url(table, create_table="false"),
            aws_access_key_id="x",
            aws_secret_access_key="y",
        )
    else:
        store = DynamoDBStore(dynamodb_server.client(), table, create_table=False)
    try:
        with pytest.raises(StoreError) as caught:
            await store.set("k", "v")
        message = str(caught.value)
        assert f"{table!r} does not exist" in message
        assert f"aws dynamodb create-table --table-name {table}" in message
        with pytest.raises(StoreError, match="does not exist"):
            await store.setup()
        client = dynamodb_server.client()
        try:
            assert table not in client.list_tables()["TableNames"]
        finally:
            client.close()
    finally:
        await store.aclose()


async def test_a_table_of_ones_own_is_used_with_its_key_and_another_schema_refused(
    dynamodb_server: DynamoDBServer,
) -> None:
    client = dynamodb_server.client()
    own, composite = unique_table_name(), unique_table_name()
    client.create_table(
        TableName=own,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.create_table(
        TableName=composite,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    mine = DynamoDBStore(dynamodb_server.client(), own, create_table=False)
    theirs = DynamoDBStore(dynamodb_server.client(), composite)
    try:
        await mine.set("key", "value")
        assert await mine.batch([CompareAndSetOp("key", "value", "v2"), GetOp("key")]) == [
            True,
            "v2",
        ]
        raw = client.get_item(TableName=own, Key={"pk": {"S": "k:key"}})["Item"]
        assert raw["v"] == {"B": b"v2"}
        with pytest.raises(StoreError, match="one string hash key and no sort key"):
            await theirs.get("key")
    finally:
        client.close()
        await mine.aclose()
        await theirs.aclose()


# -- item limits --------------------------------------------------------------------------------


async def test_an_item_over_400_kb_is_refused_before_any_write(
    dynamodb_server: DynamoDBServer, dynamodb_store_factory: StoreFactoryOf[DynamoDBStore]
) -> None:
    store = await dynamodb_store_factory()
    await store.set("kept", "original")
    big = "x" * ITEM_LIMIT
    sent: list[str] = []
    store.client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: sent.append(model.name)
    )
    for write in (
        store.set("kept", big),
        store.set("fresh", big),
        store.set_if_absent("fresh", big),
        store.compare_and_set("kept", "original", big),
        store.batch([SetOp("fresh", "small"), SetOp("kept", big)]),
    ):
        with pytest.raises(StoreError) as caught:
            await write
        assert "400 KB" in str(caught.value)
        assert "'kept'" in str(caught.value) or "'fresh'" in str(caught.value)
    assert sent == []
    assert await store.get_many(["kept", "fresh"]) == ["original", None]
    # A large item goes through (moto counts a binary value in base64, a third more than
    # DynamoDB does, so this stays well under the limit); characters are counted as bytes.
    fits = "é" * 125_000
    await store.set("fits", fits)
    assert await store.get("fits") == fits
    with pytest.raises(StoreError, match="400 KB"):
        await store.set("fits", "é" * (ITEM_LIMIT // 2))


# -- deadlines ----------------------------------------------------------------------------------


async def test_expiry_is_decided_on_read_by_the_deadline(
    dynamodb_server: DynamoDBServer, dynamodb_store_factory: StoreFactoryOf[DynamoDBStore]
) -> None:
    clock = FakeClock()
    table = unique_table_name()
    store = DynamoDBStore(dynamodb_server.client(), table, clock=clock)
    try:
        await store.set("lease", "holder", ttl=9.5)
        await store.set("kept", "forever")
        client = dynamodb_server.client()
        try:
            raw = client.get_item(TableName=table, Key={"k": {"S": "k:lease"}})["Item"]
        finally:
            client.close()
        assert raw["expires_at"] == {"N": "1000010"}  # whole seconds, rounded up
        clock.now = 1_000_009.9
        assert await store.get("lease") == "holder"
        assert await store.set_if_absent("lease", "waiter") is False
        clock.now = 1_000_010.0
        assert await store.get("lease") is None
        assert await store.get_many(["lease", "kept"]) == [None, "forever"]
        assert await store.compare_and_set("lease", "holder", "late") is False
        assert await store.compare_and_delete("lease", "holder") is False
        assert await store.batch([GetOp("lease"), SetIfAbsentOp("lease", "next")]) == [
            None,
            True,
        ]
        assert await store.get("lease") == "next"
    finally:
        await store.aclose()


# -- keys ---------------------------------------------------------------------------------------

ODD_KEYS = ["", "nul\x00byte", "lone surrogate \ud800", "x" * 2046, "x" * 2047, "é" * 1100]


async def test_any_key_round_trips_and_plain_keys_are_listed_page_by_page(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> None:
    store = await dynamodb_store_factory()
    for number, key in enumerate(ODD_KEYS):
        await store.set(key, f"value {number}")
    assert await store.get_many(ODD_KEYS) == [f"value {n}" for n in range(len(ODD_KEYS))]
    threads = [f"chat-{n}" for n in range(25)]
    for thread in threads:
        await store.set(ThreadKeys(thread).index, "i")
    listed: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        keys, cursor = await store.scan_keys("thread_", cursor=cursor, count=4)
        assert len(keys) <= 4
        listed += keys
        pages += 1
        if cursor is None:
            break
    assert sorted(listed) == sorted(ThreadKeys(t).index for t in threads)
    assert pages >= 7
    everything, _ = await store.scan_keys("", count=1000)
    # Keys kept under their hash (too long, or no valid UTF-8) are not listed.
    assert set(everything) - set(listed) == {"", "nul\x00byte", "x" * 2046}
    assert await store.scan_keys("\ud800") == ([], None)


# -- batches ------------------------------------------------------------------------------------


async def test_a_batch_over_100_items_runs_in_parts_in_order(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> None:
    store = await dynamodb_store_factory()
    keys = [f"k{n}" for n in range(150)]
    ops: list[StoreOp] = [SetOp(key, f"v{n}") for n, key in enumerate(keys)]
    ops += [CompareAndSetOp("k0", "v0", "changed"), GetOp("k0"), DeleteOp("k149"), GetOp("k149")]
    results = await asyncio.wait_for(store.batch(ops), GUARD)
    assert results == [None] * 150 + [True, "changed", None, None]
    assert await store.get_many(["k0", "k1", "k148", "k149"]) == ["changed", "v1", "v148", None]


async def test_a_batch_is_undone_by_nobody_and_loses_to_nobody(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> None:
    # Writers racing a batch on the same items: every batch sees one consistent state.
    store = await dynamodb_store_factory()
    await store.set("a", "0")
    await store.set("b", "0")

    async def move(number: int) -> list[Any]:
        while True:
            a, b = await store.batch([GetOp("a"), GetOp("b")])
            assert a is not None
            assert b is not None
            done = await store.batch(
                [
                    CompareAndSetOp("a", a, str(int(a) + 1)),
                    CompareAndSetOp("b", b, str(int(b) + 1)),
                ]
            )
            if all(done):
                return done
            assert not any(done)  # both or neither: one snapshot

    await asyncio.wait_for(asyncio.gather(*(move(n) for n in range(8))), GUARD)
    assert await store.get_many(["a", "b"]) == ["8", "8"]


# -- throttling ---------------------------------------------------------------------------------


def throttle(store: DynamoDBStore, operation: str, times: int, code: str) -> list[int]:
    """Make the store's real client get ``code`` for its next ``times`` ``operation`` requests,
    through botocore's own event hook, in place of the server's answer; count the requests."""
    seen: list[int] = []

    def answer(**_: Any) -> Any:
        seen.append(1)
        if len(seen) > times:
            return None  # sent to the server
        status = 400
        body = {"Error": {"Code": code, "Message": "Rate of requests exceeds the allowed"}}
        return _Response(status), body

    store.client.meta.events.register(f"before-call.dynamodb.{operation}", answer)
    return seen


class _Response:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}


@pytest.mark.parametrize(
    "code",
    ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"],
)
async def test_throttled_requests_are_sent_again(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore], code: str
) -> None:
    store = await dynamodb_store_factory()
    await store.set("k", "before")
    seen = throttle(store, "PutItem", 3, code)
    assert await store.compare_and_set("k", "before", "after") is True
    assert len(seen) == 4
    assert await store.get("k") == "after"


async def test_throttling_past_the_bound_is_a_store_error(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> None:
    store = await dynamodb_store_factory(timeout=1.0)
    await store.set("k", "before")
    seen = throttle(store, "PutItem", 10**6, "ThrottlingException")
    with pytest.raises(StoreError) as caught:
        await asyncio.wait_for(store.set("k", "after"), GUARD)
    assert not isinstance(caught.value, StoreTimeout)
    assert "ThrottlingException" in str(caught.value)
    assert len(seen) > 2
    other = throttle(store, "GetItem", 10**6, "ValidationException")
    with pytest.raises(StoreError, match="ValidationException"):
        await store.get("k")
    assert len(other) == 1  # not a throttle: never sent again


async def test_unprocessed_keys_of_a_batch_read_are_asked_for_again(
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
) -> None:
    store = await dynamodb_store_factory()
    keys = [f"k{n}" for n in range(120)]
    for key in keys:
        await store.set(key, key.upper())
    requests: list[int] = []

    def answer(params: dict[str, Any], **_: Any) -> Any:
        asked = json.loads(params["body"])["RequestItems"][store.table]
        requests.append(len(asked["Keys"]))
        if len(requests) != 1:
            return None
        # The first request: nothing read, every key left for later.
        left = asked
        return _Response(200), {
            "Responses": {store.table: []},
            "UnprocessedKeys": {store.table: left},
        }

    store.client.meta.events.register("before-call.dynamodb.BatchGetItem", answer)
    assert await store.get_many([*keys, "absent"]) == [*(k.upper() for k in keys), None]
    assert requests == [100, 100, 21]


# -- two processes --------------------------------------------------------------------------


def test_two_processes_on_one_thread_make_one_summarizer_call(
    dynamodb_server: DynamoDBServer, tmp_path: Path
) -> None:
    table = unique_table_name()
    options = json.dumps(dynamodb_server.client_options)
    url = f"dynamodb://{table}?timeout={STORE_TIMEOUT}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers.replay_worker",
                f"--url={url}",
                f"--store-options={options}",
                f"--worker={worker}",
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / f"worker-{worker}.err").open("w"),
            text=True,
            env=env,
        )
        for worker in range(2)
    ]
    try:
        for worker in workers:
            assert read_line(worker) == {"started": True}
        calls_log = tmp_path / "calls.log"
        calls_log.touch()
        thread = f"chat-{uuid.uuid4().hex[:8]}"
        for number, worker in enumerate(workers):
            send(worker, job(thread, calls_log, tmp_path / f"go-{number}"))
        for worker in workers:
            assert read_line(worker) == {"armed": True}
        for number in range(2):
            (tmp_path / f"go-{number}").touch()
        reports = [read_line(worker)["tasks"] for worker in workers]
    finally:
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.close()
        for worker in workers:
            worker.wait(timeout=GUARD)
    calls = calls_log.read_text().splitlines()
    expected = asyncio.run(lone_compressor_calls())
    assert [line.split(" ")[0] for line in calls] == expected
    assert len(calls) == 1
    outcomes = sorted(r["outcome"] for tasks in reports for task in tasks for r in task)
    assert outcomes == ["hit"] * 7 + ["summarized"]
    summaries = {r["summary"] for tasks in reports for task in tasks for r in task}
    assert len(summaries) == 1


MESSAGES, TRIGGER, KEEP = 40, 20, 10


def job(thread: str, calls_log: Path, go: Path) -> dict[str, Any]:
    return {
        "scenario": "burst",
        "thread": thread,
        "tasks": 4,
        "messages": MESSAGES,
        "step": 2,
        "trigger": TRIGGER,
        "keep": KEEP,
        "lock_wait": 30.0,
        "lease_ttl": 10.0,
        "store_timeout": 30.0,
        "delay": 0.2,
        "fail_first": False,
        "fail_delay": 1.0,
        "calls_log": str(calls_log),
        "go": str(go),
    }


async def lone_compressor_calls() -> list[str]:
    """The ranges one compressor alone summarizes for the same history."""
    calls: list[str] = []

    async def summarizer(messages: Any, context: SummaryContext) -> str:
        calls.append(f"{context.start}-{context.end}")
        return summary_text(context)

    compressor = SummarizeCompressor(
        summarizer,
        MemoryStore(),
        trigger=MessageThreshold(TRIGGER),
        keep=KeepMessages(KEEP),
        summarizer_id=SUMMARIZER_ID,
    )
    await compressor.compress_detailed(chat(MESSAGES), thread_id="reference")
    return calls


def read_line(worker: subprocess.Popen[str]) -> Any:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line, "a worker exited"
    return json.loads(line)


def send(worker: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert worker.stdin is not None
    worker.stdin.write(json.dumps(message) + "\n")
    worker.stdin.flush()


# -- the command line -----------------------------------------------------------------------


@pytest.fixture
def cli(dynamodb_server: DynamoDBServer) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "slimcache", *args],
            capture_output=True,
            text=True,
            timeout=GUARD,
            check=False,
            env={**os.environ, **dynamodb_server.environment},
        )

    return run


async def test_threads_and_clear_commands_on_a_table(
    dynamodb_server: DynamoDBServer,
    dynamodb_store_factory: StoreFactoryOf[DynamoDBStore],
    cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    table = unique_table_name()
    store = await dynamodb_store_factory(table=table)

    async def summarizer(messages: Any, context: SummaryContext) -> str:
        return summary_text(context)

    compressor = SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(TRIGGER), keep=KeepMessages(KEEP)
    )
    for thread in ("chat-1", "chat-2"):
        result = await compressor.compress_detailed(chat(30), thread_id=thread)
        assert result.outcome == "summarized"
    url = dynamodb_server.url(table)

    listed = await asyncio.to_thread(cli, "threads", url)
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.splitlines()) == ["chat-1\tcompressor", "chat-2\tcompressor"]

    cleared = await asyncio.to_thread(cli, "clear", url, "--thread", "chat-1")
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout.startswith("deleted "), cleared.stdout
    assert not cleared.stdout.startswith("deleted 0 ")

    after = await asyncio.to_thread(cli, "threads", url)
    assert after.stdout.splitlines() == ["chat-2\tcompressor"]
    assert await store.get(ThreadKeys("chat-1").index) is None
    assert "testing" not in listed.stdout + listed.stderr + cleared.stderr

    refused = await asyncio.to_thread(
        cli, "threads", dynamodb_server.url(unique_table_name(), create_table="false")
    )
    assert refused.returncode != 0
    assert "does not exist" in refused.stderr
