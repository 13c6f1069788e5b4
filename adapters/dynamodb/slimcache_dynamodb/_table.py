"""The store's table: found, or created on first use, before the first request on its items.

A table the store creates has one string hash key (``k``), on-demand billing, and TTL on the
deadline attribute (``expires_at``), so that DynamoDB removes expired items by itself (late:
within days; reads decide expiry by the deadline meanwhile). A table that exists is used as it
is when its key schema is one string hash key, whatever that key is named.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from slimcache import StoreError
from slimcache_dynamodb._items import EXPIRES_AT, KEY
from slimcache_dynamodb._retry import Attempts, error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["Table", "create_command"]

_POLL = 0.2


def create_command(name: str) -> str:
    """The AWS CLI commands that create the table the store would create."""
    return (
        f"aws dynamodb create-table --table-name {name} "
        f"--attribute-definitions AttributeName={KEY},AttributeType=S "
        f"--key-schema AttributeName={KEY},KeyType=HASH --billing-mode PAY_PER_REQUEST "
        f"&& aws dynamodb update-time-to-live --table-name {name} "
        f"--time-to-live-specification Enabled=true,AttributeName={EXPIRES_AT}"
    )


class Table:
    """One DynamoDB table, checked (and created, when allowed) once, on first use.

    Args:
        client: The boto3 DynamoDB client.
        name: The table's name.
        create: Create the table when it does not exist; otherwise refuse to run.
    """

    def __init__(self, client: DynamoDBClient, name: str, *, create: bool) -> None:
        self._client = client
        self.name = name
        self._create = create
        self._lock = threading.Lock()
        self._key: str | None = None
        self._needs_ttl = False

    @property
    def ready(self) -> bool:
        """Whether the table was found active with a usable key schema."""
        return self._key is not None

    def key_attribute(self, attempts: Attempts) -> str:
        """The table's hash key, once the table is there and active (created if allowed).

        Concurrent callers wait for the first one; a call whose deadline comes while the
        table is still being created gives up with :class:`~slimcache.StoreError`, and a later
        call goes on waiting.

        Raises:
            StoreError: The table is missing and creation is off, its key schema is not one
                string hash key, or it is still being created at the deadline.
            ClientError: DynamoDB refused a request.
        """
        if self._key is not None:
            return self._key
        with self._lock:
            if self._key is None:
                self._key = self._find(attempts)
            return self._key

    def _find(self, attempts: Attempts) -> str:
        while True:
            try:
                table = attempts.send(self._client.describe_table, TableName=self.name)["Table"]
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise
                if not self._create:
                    raise StoreError(
                        f"DynamoDB table {self.name!r} does not exist, and the store was told "
                        f"not to create it (create_table=false). Create it with: "
                        f"{create_command(self.name)}; or let the store create it on first "
                        "use (create_table=true, the default)"
                    ) from None
                self._create_table(attempts)
                self._needs_ttl = True
                continue
            status = table.get("TableStatus")
            if status == "ACTIVE":
                key = _hash_key(table)
                if self._needs_ttl:
                    self._enable_ttl(attempts)
                    self._needs_ttl = False
                return key
            if status not in ("CREATING", "UPDATING"):
                raise StoreError(f"DynamoDB table {self.name!r} is {status}, not ACTIVE")
            if attempts.left() < _POLL:
                raise StoreError(
                    f"DynamoDB table {self.name!r} is still being created; the next call "
                    "waits for it again (the store's setup() waits longer)"
                )
            time.sleep(_POLL)

    def _create_table(self, attempts: Attempts) -> None:
        try:
            attempts.send(
                self._client.create_table,
                TableName=self.name,
                KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as exc:
            # Another process is creating it at the same moment: wait for it as for ours.
            if error_code(exc) != "ResourceInUseException":
                raise

    def _enable_ttl(self, attempts: Attempts) -> None:
        try:
            attempts.send(
                self._client.update_time_to_live,
                TableName=self.name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": EXPIRES_AT},
            )
        except ClientError as exc:
            # Enabled already, by another process that created the table at the same moment.
            if error_code(exc) != "ValidationException":
                raise


def _hash_key(table: Mapping[str, Any]) -> str:
    """The name of a table's string hash key; refuse any other key schema."""
    schema = table.get("KeySchema", [])
    types = {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]}
    if len(schema) != 1 or types.get(schema[0]["AttributeName"]) != "S":
        raise StoreError(
            f"DynamoDB table {table.get('TableName')!r} has key schema {schema!r}; the store "
            "needs one string hash key and no sort key"
        )
    return str(schema[0]["AttributeName"])
