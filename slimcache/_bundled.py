"""The store adapters that ship with slimcache, in one table: :data:`BUNDLED`.

Each row is one extra of slimcache that installs an adapter: the URL schemes its store serves,
the distribution and its folder in the repository, the distribution's own extra the slimcache
extra asks for, the module and store class its entry points name, the clients and engines
``open_store`` wraps in it, and the objects it refuses with what to pass instead. The URL
registry reads it to name the extra of a scheme or client whose adapter is missing, the install
hints to name the folder an adapter installs from, and the tests hold ``pyproject.toml`` to it
(the root's extras and workspace, each adapter's entry points). An adapter added to the
repository is a row here and its folder under ``adapters/``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUNDLED", "BundledAdapter", "ClientType", "Lookalike", "bundled_adapter"]


@dataclass(frozen=True)
class ClientType:
    """A client or engine class a bundled store takes as its first argument.

    Attributes:
        module: The module defining the class.
        name: The class.
        description: How error messages name the client.
        service: For a boto3 client, the service it must be a client of.
        required: Options the store cannot do without.
    """

    module: str
    name: str
    description: str
    service: str | None = None
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lookalike:
    """A class that looks like a client a bundled store takes, but would not work.

    Attributes:
        module: The module defining the class.
        name: The class.
        hint: What it is and what to pass instead.
    """

    module: str
    name: str
    hint: str


@dataclass(frozen=True)
class BundledAdapter:
    """One extra of slimcache that installs a store adapter of the repository.

    Attributes:
        extra: The slimcache extra (``pip install 'slimcache[extra]'``).
        schemes: The URL schemes the adapter registers for this extra, each an entry point of
            the ``slimcache.stores`` group naming :attr:`entry_point`.
        distribution: The adapter's distribution.
        folder: The distribution's folder in the repository.
        module: The module the distribution installs.
        store: The store class of :attr:`module`.
        own_extra: The distribution's own extra the slimcache extra asks for (its driver), if any.
        driverless: URL schemes that name the database but not the driver; open_store refuses
            them and names the first of :attr:`schemes` instead.
        clients: The clients and engines open_store wraps in :attr:`store`.
        lookalikes: Classes open_store refuses, saying what to pass instead.
    """

    extra: str
    schemes: tuple[str, ...]
    distribution: str
    folder: str
    module: str
    store: str
    own_extra: str = ""
    driverless: tuple[str, ...] = ()
    clients: tuple[ClientType, ...] = ()
    lookalikes: tuple[Lookalike, ...] = ()

    @property
    def own_extra_suffix(self) -> str:
        """``[own_extra]`` as a requirement spells it, or nothing."""
        return f"[{self.own_extra}]" if self.own_extra else ""

    @property
    def requirement(self) -> str:
        """The requirement the slimcache extra lists (``slimcache-sql[sqlite]``)."""
        return f"{self.distribution}{self.own_extra_suffix}"

    @property
    def entry_point(self) -> str:
        """The value of each of the adapter's entry points (``module:Store.from_url``)."""
        return f"{self.module}:{self.store}.from_url"


BUNDLED: tuple[BundledAdapter, ...] = (
    BundledAdapter(
        extra="redis",
        schemes=("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"),
        distribution="slimcache-redis",
        folder="adapters/redis",
        module="slimcache_redis",
        store="RedisStore",
        clients=(
            ClientType("redis.asyncio.client", "Redis", "redis.asyncio.Redis"),
            ClientType("redis.asyncio.cluster", "RedisCluster", "redis.asyncio.RedisCluster"),
        ),
        lookalikes=(
            Lookalike(
                "redis.client", "Redis", "a synchronous redis.Redis; pass a redis.asyncio.Redis"
            ),
            Lookalike(
                "redis.cluster",
                "RedisCluster",
                "a synchronous redis.cluster.RedisCluster; pass a redis.asyncio.RedisCluster",
            ),
        ),
    ),
    BundledAdapter(
        extra="sql",
        schemes=("sqlite+aiosqlite",),
        distribution="slimcache-sql",
        folder="adapters/sql",
        module="slimcache_sql",
        store="SQLStore",
        own_extra="sqlite",
        driverless=("sqlite",),
        clients=(
            ClientType("sqlalchemy.ext.asyncio.engine", "AsyncEngine", "SQLAlchemy AsyncEngine"),
        ),
        lookalikes=(
            Lookalike(
                "sqlalchemy.engine.base",
                "Engine",
                "a synchronous SQLAlchemy Engine; pass an AsyncEngine (create_async_engine)",
            ),
        ),
    ),
    BundledAdapter(
        extra="postgres",
        schemes=("postgresql+asyncpg",),
        distribution="slimcache-sql",
        folder="adapters/sql",
        module="slimcache_sql",
        store="SQLStore",
        own_extra="postgres",
        driverless=("postgresql", "postgres"),
    ),
    BundledAdapter(
        extra="s3",
        schemes=("s3",),
        distribution="slimcache-s3",
        folder="adapters/s3",
        module="slimcache_s3",
        store="S3Store",
        clients=(
            ClientType(
                "botocore.client",
                "BaseClient",
                "boto3 S3 client",
                service="s3",
                required=("bucket",),
            ),
        ),
        # aiobotocore's clients derive from botocore's; open_store looks at every lookalike
        # before any client.
        lookalikes=(
            Lookalike(
                "aiobotocore.client",
                "AioBaseClient",
                "an aiobotocore client; pass a boto3 S3 client",
            ),
        ),
    ),
    BundledAdapter(
        extra="dynamodb",
        schemes=("dynamodb",),
        distribution="slimcache-dynamodb",
        folder="adapters/dynamodb",
        module="slimcache_dynamodb",
        store="DynamoDBStore",
        clients=(
            ClientType(
                "botocore.client",
                "BaseClient",
                "boto3 DynamoDB client",
                service="dynamodb",
                required=("table",),
            ),
        ),
    ),
)
"""Every bundled adapter, one row per slimcache extra that installs one."""


def bundled_adapter(extra: str) -> BundledAdapter | None:
    """The row of the slimcache extra ``extra``; ``None`` for one that installs no adapter."""
    return next((row for row in BUNDLED if row.extra == extra), None)
