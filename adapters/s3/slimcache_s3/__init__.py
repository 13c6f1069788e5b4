"""S3 store for slimcache: summaries kept as objects in an S3 (or S3-compatible) bucket.

Install with ``pip install "slimcache[s3]"``, then open a store by URL::

    from slimcache import open_store

    store = open_store("s3://my-bucket/summaries/?region=eu-west-1")

or around a boto3 client you already have: ``S3Store(boto3.client("s3"), "my-bucket")``.
"""

from slimcache_s3._store import S3Store

__all__ = ["S3Store"]
