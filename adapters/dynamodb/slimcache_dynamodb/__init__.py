"""DynamoDB store for slimcache: summaries kept as items of a DynamoDB table.

Install with ``pip install "slimcache[dynamodb]"``, then open a store by URL::

    from slimcache import open_store

    store = open_store("dynamodb://slimcache?region=eu-west-1")

or around a boto3 client you already have:
``DynamoDBStore(boto3.client("dynamodb"), "slimcache")``. The table is created on first use
unless ``create_table=false``.
"""

from slimcache_dynamodb._store import DynamoDBStore

__all__ = ["DynamoDBStore"]
