"""A batch of store operations as DynamoDB transactions: read, decide, write on a condition.

DynamoDB cannot read and write in one request, nor write one item twice in a transaction, and
a transaction whose condition fails writes nothing, where a batch's conditional operation that
fails only returns ``False``. So a batch runs in two requests:

1. ``TransactGetItems`` reads every item the batch names, as one consistent snapshot (in
   groups of :data:`READ_GROUP`, which are checked again by the write when there are several);
2. the operations run in order on that snapshot, here, each seeing the effects of those before
   it, and decide each item's final state;
3. ``TransactWriteItems`` writes that state (a ``Put`` or ``Delete`` per item written, a
   ``ConditionCheck`` per item only read), each on the condition that the item is still exactly
   what was read (its write id, or its absence).

If anyone wrote one of the items in between, the transaction writes nothing and the batch runs
again from the read, within the call's time bound. A batch that writes nothing and was read in
one request is that snapshot; one read in several is checked by a transaction of conditions.
So a batch naming at most :data:`TRANSACTION_ITEMS` items and :data:`TRANSACTION_BYTES` of
writes is atomic and isolated; a larger one runs as consecutive parts of that size, each atomic,
which the protocol allows of a store that cannot run it whole (a failure can leave the parts
before it applied, as separate calls would).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from slimcache import StoreError
from slimcache.stores import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    StoreOp,
)
from slimcache_dynamodb._items import WRITE_ID, new_item, read_item
from slimcache_dynamodb._retry import Attempts, error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from slimcache_dynamodb._requests import Items

__all__ = [
    "READ_GROUP",
    "TRANSACTION_BYTES",
    "TRANSACTION_ITEMS",
    "Planned",
    "parts",
    "run_part",
]

TRANSACTION_ITEMS = 100
"""DynamoDB's limit on the items of one transaction."""
TRANSACTION_BYTES = 4 * 1024 * 1024
"""DynamoDB's limit on the size of one transaction."""
READ_GROUP = 25
"""Items read by one ``TransactGetItems``: DynamoDB takes 100 since 2022, but emulators (moto,
DynamoDB Local) still hold reads to the 25 of before."""

# Why a transaction may be cancelled without anything being wrong with it: run it again.
_RACED = frozenset(
    {
        "None",
        "ConditionalCheckFailed",
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)
_DELETED = object()


@dataclass(frozen=True)
class Planned:
    """One checked operation of a batch, with its item key and what it would write.

    Attributes:
        op: The operation.
        name: The item key of its store key.
        body: The value as stored, for a write.
        deadline: The stored deadline of a write with a TTL.
        size: The item's size, for a write.
    """

    op: StoreOp
    name: str
    body: bytes | None = None
    deadline: int | None = None
    size: int = 0


def parts(planned: list[Planned]) -> list[list[Planned]]:
    """Cut a batch into consecutive parts that fit one transaction each."""
    cut: list[list[Planned]] = []
    names: set[str] = set()
    size = 0
    for one in planned:
        fits = (len(names | {one.name}) <= TRANSACTION_ITEMS) and size + one.size <= (
            TRANSACTION_BYTES
        )
        if not cut or not fits:
            cut.append([])
            names, size = set(), 0
        cut[-1].append(one)
        names.add(one.name)
        size += one.size
    return cut


def run_part(
    client: DynamoDBClient,
    items: Items,
    attempts: Attempts,
    part: list[Planned],
    clock: Any,
) -> list[Any]:
    """Run one part of a batch atomically, again from the read while others race it.

    Raises:
        StoreError: Other writers kept changing the items until the call's time bound.
        ClientError: DynamoDB refused a request for another reason.
    """
    names = list(dict.fromkeys(one.name for one in part))
    pause = 0.02
    while True:
        snapshot = _read(client, items, attempts, names)
        results, final = _decide(items, part, snapshot, clock())
        writes, changes = _writes(items, names, snapshot, final)
        if not changes and len(names) <= READ_GROUP:
            return results
        try:
            attempts.send(client.transact_write_items, TransactItems=writes)
        except ClientError as exc:
            if not _raced(exc):
                raise
        else:
            return results
        wait = random.uniform(pause / 2, pause)
        if attempts.left() <= wait:
            raise StoreError(
                f"DynamoDB batch on table {items.table!r}: other writers kept changing its "
                f"{len(names)} items until the call's time bound"
            )
        attempts.backoff(wait)
        pause = min(pause * 2, 0.5)


def _raced(exc: ClientError) -> bool:
    if error_code(exc) == "TransactionConflictException":
        return True
    if error_code(exc) != "TransactionCanceledException":
        return False
    reasons = exc.response.get("CancellationReasons", [])
    return bool(reasons) and all(reason.get("Code", "None") in _RACED for reason in reasons)


def _read(
    client: DynamoDBClient, items: Items, attempts: Attempts, names: list[str]
) -> dict[str, dict[str, Any] | None]:
    """Every item of ``names`` (``None`` where there is none), each group of ``READ_GROUP``
    read as one snapshot."""
    snapshot: dict[str, dict[str, Any] | None] = {}
    for start in range(0, len(names), READ_GROUP):
        group = names[start : start + READ_GROUP]
        reply = attempts.send(
            client.transact_get_items,
            TransactItems=[
                {"Get": {"TableName": items.table, "Key": items.key(name)}} for name in group
            ],
        )
        for name, one in zip(group, reply.get("Responses", []), strict=True):
            snapshot[name] = dict(one["Item"]) if "Item" in one else None
    return snapshot


def _decide(
    items: Items, part: list[Planned], snapshot: dict[str, dict[str, Any] | None], now: float
) -> tuple[list[Any], dict[str, Any]]:
    """Run the operations in order on the snapshot: their results and each item's last write."""
    live: dict[str, str | None] = {}
    for name, item in snapshot.items():
        stored = None if item is None else read_item(item, now, f"item {name!r}")
        live[name] = None if stored is None or stored.expired else stored.value
    final: dict[str, Any] = {}
    results: list[Any] = []
    for one in part:
        op, name = one.op, one.name
        held = live[name]
        if isinstance(op, GetOp):
            results.append(held)
            continue
        if isinstance(op, DeleteOp):
            written: Any = _DELETED
            result: Any = None
        elif isinstance(op, CompareAndDeleteOp):
            written = _DELETED if held is not None and held == op.expected else None
            result = written is not None
        elif isinstance(op, SetOp):
            written, result = one, None
        else:
            assert isinstance(op, (SetIfAbsentOp, CompareAndSetOp))
            expected = op.expected if isinstance(op, CompareAndSetOp) else None
            ok = held is None if expected is None else held == expected
            written, result = (one if ok else None), ok
        results.append(result)
        if written is _DELETED:
            final[name] = _DELETED
            live[name] = None
        elif written is not None:
            final[name] = written
            live[name] = op.value  # type: ignore[union-attr]
    return results, final


def _writes(
    items: Items,
    names: list[str],
    snapshot: dict[str, dict[str, Any] | None],
    final: dict[str, Any],
) -> tuple[list[Any], bool]:
    """The transaction that writes ``final`` over an unchanged snapshot, and whether it writes
    anything (else it only checks the snapshot)."""
    writes: list[Any] = []
    changes = False
    for name in names:
        read = snapshot[name]
        condition = _unchanged(items, read)
        last = final.get(name)
        if isinstance(last, Planned):
            assert last.body is not None
            item = new_item(items.key_attribute, name, last.body, last.deadline)
            writes.append({"Put": {"TableName": items.table, "Item": item, **condition}})
            changes = True
        elif last is _DELETED and read is not None:
            key = items.key(name)
            writes.append({"Delete": {"TableName": items.table, "Key": key, **condition}})
            changes = True
        else:
            key = items.key(name)
            writes.append({"ConditionCheck": {"TableName": items.table, "Key": key, **condition}})
    return writes, changes


def _unchanged(items: Items, read: dict[str, Any] | None) -> dict[str, Any]:
    """The condition that an item is still exactly as read."""
    if read is None:
        return {
            "ConditionExpression": "attribute_not_exists(#k)",
            "ExpressionAttributeNames": {"#k": items.key_attribute},
        }
    if WRITE_ID in read:
        return {
            "ConditionExpression": "#w = :w",
            "ExpressionAttributeNames": {"#w": WRITE_ID},
            "ExpressionAttributeValues": {":w": read[WRITE_ID]},
        }
    # An item another program wrote: all of it, as read.
    names = {f"#a{i}": name for i, name in enumerate(read)}
    values = {f":a{i}": value for i, value in enumerate(read.values())}
    clauses = [f"#a{i} = :a{i}" for i in range(len(read))]
    return {
        "ConditionExpression": " AND ".join([*clauses, "attribute_not_exists(#w)"]),
        "ExpressionAttributeNames": {**names, "#w": WRITE_ID},
        "ExpressionAttributeValues": values,
    }
