"""The compressor when a real server goes away mid-run: the configured policy applies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from slimcache_redis import RedisStore
from slimcache_s3 import S3Store

from slimcache import KeepMessages, MessageThreshold, StoreError, SummarizeCompressor
from tests.fakes import RecordingSummarizer, chat
from tests.servers.redis_server import RedisServer
from tests.servers.s3_server import S3Server
from tests.servers.store_factories import StoreFactoryOf


def compressor(summarizer: RecordingSummarizer, store: Any, **options: Any) -> SummarizeCompressor:
    return SummarizeCompressor(
        summarizer, store, trigger=MessageThreshold(20), keep=KeepMessages(10), **options
    )


async def run_outage(server: Any, store: Any) -> None:
    summarizer = RecordingSummarizer()
    history = chat(60)
    cached = await compressor(summarizer, store).compress_detailed(history[:40], thread_id="f")
    assert cached.outcome == "summarized"
    server.stop()
    try:
        with pytest.raises(StoreError):
            await asyncio.wait_for(
                compressor(summarizer, store).compress(history[:42], thread_id="f"), 60
            )
        bypass = compressor(summarizer, store, on_store_error="bypass")
        result = await asyncio.wait_for(bypass.compress_detailed(history, thread_id="f"), 60)
        assert result.outcome == "uncached"
        assert result.messages[2:] == history[result.summary_range[1] + 1 :]  # type: ignore[index]
    finally:
        server.start()
    # Nothing corrupt was left: once the server is back the old summary is served as it was.
    back = await compressor(summarizer, store).compress_detailed(history[:40], thread_id="f")
    assert back.outcome == "hit"
    assert back.summary == cached.summary
    later = await compressor(summarizer, store).compress_detailed(history, thread_id="f")
    assert later.outcome == "extended"


async def test_redis_outage(
    redis_server: RedisServer, redis_store_factory: StoreFactoryOf[RedisStore]
) -> None:
    await run_outage(redis_server, await redis_store_factory())


async def test_s3_outage(s3_server: S3Server, s3_store_factory: StoreFactoryOf[S3Store]) -> None:
    await run_outage(s3_server, await s3_store_factory())
