"""Redis store for slimcache, built on redis-py's asyncio client.

Open it by URL through slimcache (``open_store("redis://localhost:6379/0")``, or
``open_store("redis+cluster://host1:6379,host2:6379/")`` for a Redis Cluster), or directly::

    from slimcache_redis import RedisStore

    store = RedisStore.from_url("redis://localhost:6379/0", prefix="myapp:")
    store = RedisStore(redis.asyncio.RedisCluster(host="host1"), prefix="myapp:")
"""

from slimcache_redis._store import RedisStore

__all__ = ["RedisStore"]
