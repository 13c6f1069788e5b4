"""A failing summarizer is remembered across a stateless server's requests: its breaker opens,
calls fail at once for a cool-down, then one call probes it again.

The summarizer is :class:`~slimcache.llm.OpenAISummarizer` against the local chat API, answering
HTTP 500 (each call tried three times by the SDK, as a default agent integration tries it).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from slimcache import KeepMessages, MemoryStore, MessageThreshold, Stats, SummarizeCompressor
from slimcache.core import breaker
from slimcache.core.summarizer import summarizer_name
from slimcache.llm import OpenAISummarizer
from tests.fakes import chat
from tests.servers.llm_server import LLMServer, Reply

QUICK = {"retry-after-ms": "1"}
OUTAGE = [Reply(500, headers=QUICK)] * 200


def summarizer(server: LLMServer, **options: Any) -> OpenAISummarizer:
    return OpenAISummarizer(
        "tiny", base_url=server.openai_base_url, api_key="k", max_retries=2, **options
    )


async def turns(
    made: OpenAISummarizer, store: MemoryStore, count: int, first: int = 8, **options: Any
) -> Stats:
    """``count`` stateless requests past the trigger, a new compressor for each."""
    total = Stats()
    for turn in range(first, first + count):
        compressor = SummarizeCompressor(
            made,
            store,
            trigger=MessageThreshold(6),
            keep=KeepMessages(2),
            on_summarizer_error="uncompressed",
            **options,
        )
        result = await compressor.compress_detailed(chat(turn), thread_id="t")
        assert result.outcome in ("passthrough", "summarized", "extended", "hit")
        total.add(compressor.stats)
    return total


async def test_an_outage_costs_two_calls_then_none_for_the_cool_down(
    llm_server: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.enqueue(*OUTAGE)
    async with summarizer(llm_server) as made:
        with caplog.at_level(logging.WARNING, logger="slimcache"):
            stats = await turns(made, MemoryStore(), 12)
    assert len(llm_server.bodies()) == 6  # two calls of three tries each
    assert (stats.summarizer_errors, stats.summarizer_calls, stats.breaker_refused) == (12, 2, 10)
    assert (stats.breaker_opened, stats.breaker_closed) == (1, 0)
    [opened] = [
        r.getMessage() for r in caplog.records if "in a row: not calling it" in r.getMessage()
    ]
    assert opened.startswith("slimcache.llm.openai:tiny failed 2 times in a row")


async def test_after_the_cool_down_one_call_probes_and_an_answer_closes_it(
    llm_server: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.enqueue(*[Reply(500, headers=QUICK)] * 6)
    store = MemoryStore()
    async with summarizer(llm_server) as made:
        await turns(made, store, 3)
        assert breaker.breaker_for(summarizer_name(made)).open_until is not None
        breaker.cool_downs_over()
        with caplog.at_level(logging.WARNING, logger="slimcache"):
            stats = await turns(made, store, 2, first=11)
    assert len(llm_server.bodies()) == 6 + stats.summarizer_requests
    assert stats.summarizer_calls >= 1  # the probe, then calls as usual
    assert (stats.breaker_closed, stats.breaker_refused, stats.summarizer_errors) == (1, 0, 0)
    assert any("answered again" in r.getMessage() for r in caplog.records)


async def test_a_failed_probe_opens_it_again_for_twice_as_long(llm_server: LLMServer) -> None:
    llm_server.enqueue(*OUTAGE)
    store = MemoryStore()
    async with summarizer(llm_server) as made:
        await turns(made, store, 2)
        state = breaker.breaker_for(summarizer_name(made))
        breaker.cool_downs_over()
        stats = await turns(made, store, 3, first=10)
    assert len(llm_server.bodies()) == 6 + 3  # one probe of three tries, then nothing
    assert (stats.breaker_opened, stats.breaker_refused) == (1, 2)
    assert state.cooldown == 2 * breaker.COOLDOWN


async def test_a_reply_refused_for_its_length_is_an_answer(llm_server: LLMServer) -> None:
    llm_server.text = lambda path, body: "A summary that goes on and on. " * 200
    async with summarizer(llm_server, on_truncated="raise") as made:
        stats = await turns(made, MemoryStore(), 4)
    assert stats.summarizer_errors == 4
    assert (stats.breaker_opened, stats.breaker_refused) == (0, 0)
    assert len(llm_server.bodies()) == 8  # every call made: cut, then cut again


@pytest.mark.parametrize(("failures", "calls"), [(None, 6), (1, 1), (4, 4)])
async def test_breaker_failures_says_how_many_failed_calls_open_it(
    llm_server: LLMServer, failures: int | None, calls: int
) -> None:
    llm_server.enqueue(*OUTAGE)
    async with summarizer(llm_server) as made:
        stats = await turns(made, MemoryStore(), 6, breaker_failures=failures)
    assert len(llm_server.bodies()) == 3 * calls  # three tries a call
    assert (stats.summarizer_calls, stats.breaker_refused) == (calls, 6 - calls)
    assert stats.breaker_opened == (0 if failures is None else 1)
