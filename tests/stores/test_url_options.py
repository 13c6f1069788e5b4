"""Every store URL refuses a query option that neither the store nor its driver reads, up front,
naming the option and the one it resembles; the options they do read are still accepted."""

from __future__ import annotations

import pytest

from slimcache import ConfigurationError, open_store
from slimcache.stores.protocol import SupportsClose

MISSPELT = [
    ("redis://localhost:6379/0?timout=1", "timout", "timeout"),
    ("rediss://localhost:6379/0?ssl_cert_req=none", "ssl_cert_req", "ssl_cert_reqs"),
    ("unix:///tmp/redis.sock?dbb=1", "dbb", "db"),
    ("redis+cluster://localhost:7000/?read_from_replica=1", "read_from_replica", None),
    ("sqlite+aiosqlite:///cache.db?timout=1", "timout", "timeout"),
    ("sqlite+aiosqlite:///cache.db?tabel=t", "tabel", "table"),
    ("postgresql+asyncpg://u@localhost/db?sslmode=require", "sslmode", "ssl"),
    ("postgresql+asyncpg://u@localhost/db?comand_timeout=1", "comand_timeout", None),
    ("memory://?max_entry=3", "max_entry", None),
    ("s3://bucket/prefix?regin=eu-west-1", "regin", None),
]

ACCEPTED = [
    "redis://localhost:6379/0?timeout=1&health_check_interval=3&client_name=app&protocol=3",
    "rediss://localhost:6379/0?ssl_cert_reqs=none",
    "unix:///tmp/redis.sock?db=1&prefix=app:",
    "redis+cluster://localhost:7000/?client_name=app&timeout=2",
    "sqlite+aiosqlite:///cache.db?timeout=1&table=t&busy_timeout=0.5&isolation_level=IMMEDIATE",
    "sqlite+aiosqlite:///file:cache.db?uri=true&mode=rwc",
    "postgresql+asyncpg://u@localhost/db?ssl=require&command_timeout=1&statement_cache_size=0",
    "postgresql+asyncpg://u@localhost/db?prepared_statement_cache_size=0&pool_size=2",
]


@pytest.mark.parametrize(("url", "option", "meant"), MISSPELT)
def test_an_unknown_option_is_refused_up_front(url: str, option: str, meant: str | None) -> None:
    with pytest.raises(ConfigurationError, match=rf"option '{option}'") as caught:
        open_store(url)
    if meant is not None:
        assert f"did you mean '{meant}'?" in str(caught.value)


@pytest.mark.parametrize("url", ACCEPTED)
async def test_the_options_store_and_driver_read_are_accepted(url: str) -> None:
    store = open_store(url)  # nothing is connected yet
    if isinstance(store, SupportsClose):
        await store.aclose()


def test_a_port_that_is_no_number_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not a valid database URL"):
        open_store("postgresql+asyncpg://u:p@h:notaport/db")
