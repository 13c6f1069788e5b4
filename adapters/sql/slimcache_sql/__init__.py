"""SQL store for slimcache: SQLite (aiosqlite) and PostgreSQL (asyncpg) via SQLAlchemy 2 async.

Example::

    from slimcache_sql import SQLStore

    async with SQLStore.from_url("sqlite+aiosqlite:///slimcache.db") as store:
        await store.set("greeting", "hello", ttl=3600)
"""

from slimcache_sql._store import DEFAULT_TABLE, SQLStore

__all__ = ["DEFAULT_TABLE", "SQLStore"]
