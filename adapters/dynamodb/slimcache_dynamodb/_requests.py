"""The DynamoDB requests behind each single-key operation, ``get_many`` and ``scan_keys``.

Every function here is blocking, run on one of the store's worker threads, and sends its
requests through the call's :class:`~slimcache_dynamodb._retry.Attempts`. Reads are strongly
consistent. The conditional writes are one request each, decided by DynamoDB with a
``ConditionExpression`` that treats an item past its deadline (by the caller's clock) as absent.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from slimcache import StoreError
from slimcache_dynamodb._items import EXPIRES_AT, VALUE, describe_key, key_of, read_item
from slimcache_dynamodb._retry import Attempts, error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["BATCH_GET_KEYS", "Items"]

BATCH_GET_KEYS = 100
"""DynamoDB's limit on the keys of one BatchGetItem request."""

# Absent, or present only past its deadline.
_ABSENT = "attribute_not_exists(#k) OR #e <= :now"
# Holding the expected value, and not past its deadline.
_HOLDS = "#v = :expected AND (attribute_not_exists(#e) OR #e > :now)"


class Items:
    """The items of one table, read and written as the store's entries.

    Args:
        client: The boto3 DynamoDB client.
        table: The table's name.
        key_attribute: The table's hash key.
    """

    def __init__(self, client: DynamoDBClient, table: str, key_attribute: str) -> None:
        self._client = client
        self.table = table
        self.key_attribute = key_attribute

    def key(self, name: str) -> dict[str, Any]:
        """The ``Key`` of the item ``name``."""
        return {self.key_attribute: {"S": name}}

    def where(self, key: str) -> str:
        """How messages name an entry."""
        return f"key {describe_key(key)} (table {self.table!r})"

    def get(self, attempts: Attempts, key: str, name: str, now: float) -> str | None:
        """The value of ``key``; ``None`` when absent or past its deadline."""
        reply = attempts.send(
            self._client.get_item, TableName=self.table, Key=self.key(name), ConsistentRead=True
        )
        item = reply.get("Item")
        if item is None:
            return None
        found = read_item(dict(item), now, self.where(key))
        return None if found.expired else found.value

    def put(self, attempts: Attempts, item: dict[str, Any]) -> None:
        """Write ``item``, whatever the key held."""
        attempts.send(self._client.put_item, TableName=self.table, Item=item)

    def delete(self, attempts: Attempts, name: str) -> None:
        """Delete the item ``name``; a missing item is not an error."""
        attempts.send(self._client.delete_item, TableName=self.table, Key=self.key(name))

    def put_if_absent(self, attempts: Attempts, item: dict[str, Any], now: float) -> bool:
        """Write ``item`` only where there is none, or one past its deadline."""
        return self._conditional(
            attempts,
            self._client.put_item,
            Item=item,
            ConditionExpression=_ABSENT,
            ExpressionAttributeNames={"#k": self.key_attribute, "#e": EXPIRES_AT},
            ExpressionAttributeValues={":now": _number(now)},
        )

    def put_if_holds(
        self, attempts: Attempts, item: dict[str, Any], expected: bytes, now: float
    ) -> bool:
        """Write ``item`` only over a live item holding ``expected``."""
        return self._conditional(
            attempts,
            self._client.put_item,
            Item=item,
            ConditionExpression=_HOLDS,
            ExpressionAttributeNames={"#v": VALUE, "#e": EXPIRES_AT},
            ExpressionAttributeValues={":expected": {"B": expected}, ":now": _number(now)},
        )

    def delete_if_holds(self, attempts: Attempts, name: str, expected: bytes, now: float) -> bool:
        """Delete the item ``name`` only if it is live and holds ``expected``."""
        return self._conditional(
            attempts,
            self._client.delete_item,
            Key=self.key(name),
            ConditionExpression=_HOLDS,
            ExpressionAttributeNames={"#v": VALUE, "#e": EXPIRES_AT},
            ExpressionAttributeValues={":expected": {"B": expected}, ":now": _number(now)},
        )

    def get_many(
        self, attempts: Attempts, names: dict[str, str], now: float
    ) -> dict[str, str | None]:
        """The live values of ``names`` (item key: store key), ``BATCH_GET_KEYS`` a request.

        Keys DynamoDB leaves unprocessed (throttled) are asked for again after a pause, within
        the call's deadline.

        Raises:
            ClientError: A request failed.
            StoreError: Keys were still unprocessed at the deadline.
        """
        found: dict[str, str | None] = dict.fromkeys(names)
        wanted = list(names)
        for start in range(0, len(wanted), BATCH_GET_KEYS):
            keys: list[Any] = [self.key(name) for name in wanted[start : start + BATCH_GET_KEYS]]
            pause = 0.025
            while keys:
                reply = attempts.send(
                    self._client.batch_get_item,
                    RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}},
                )
                for item in reply.get("Responses", {}).get(self.table, []):
                    name = str(item[self.key_attribute]["S"])
                    stored = read_item(dict(item), now, self.where(names[name]))
                    found[name] = None if stored.expired else stored.value
                left = reply.get("UnprocessedKeys", {}).get(self.table)
                keys = [] if left is None else list(left.get("Keys", []))
                if keys:
                    wait = random.uniform(pause / 2, pause)
                    if attempts.left() <= wait:
                        raise StoreError(
                            f"DynamoDB BatchGetItem on table {self.table!r} left {len(keys)} "
                            "keys unprocessed (throttled) until the call's time bound"
                        )
                    attempts.backoff(wait)
                    pause = min(pause * 2, 1.0)
        return found

    def scan(
        self, attempts: Attempts, prefix: str, cursor: str | None, count: int, budget: float
    ) -> tuple[list[str], str | None]:
        """Up to ``count`` store keys under the item-key prefix ``prefix``, after ``cursor``.

        Scan requests follow one another until ``count`` keys are found, the table ends, or
        ``budget`` seconds of the call's time are left; the cursor is the last item key
        DynamoDB evaluated.
        """
        keys: list[str] = []
        start = cursor
        while True:
            arguments: dict[str, Any] = {
                "TableName": self.table,
                "FilterExpression": "begins_with(#k, :prefix)",
                "ExpressionAttributeNames": {"#k": self.key_attribute},
                "ExpressionAttributeValues": {":prefix": {"S": prefix}},
                "ProjectionExpression": "#k",
                "ConsistentRead": True,
                "Limit": count - len(keys),
            }
            if start is not None:
                arguments["ExclusiveStartKey"] = self.key(start)
            reply = attempts.send(self._client.scan, **arguments)
            for item in reply.get("Items", []):
                key = key_of(str(item[self.key_attribute]["S"]))
                if key is not None:
                    keys.append(key)
            last = reply.get("LastEvaluatedKey")
            start = None if last is None else str(last[self.key_attribute]["S"])
            if start is None or len(keys) >= count or attempts.left() < budget:
                return keys, start

    def _conditional(self, attempts: Attempts, request: Any, **arguments: Any) -> bool:
        try:
            attempts.send(request, TableName=self.table, **arguments)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _number(value: float) -> dict[str, str]:
    return {"N": repr(float(value))}
