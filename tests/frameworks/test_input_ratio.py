"""The bound on one summarizer call follows the model's own token count, from every integration.

The summarizers are the ones each integration makes of a default model, as in
:mod:`tests.frameworks.test_limit_field`.

A local chat API that counts twice slimcache's estimate (as a tokenizer counts JSON) and
refuses a prompt past its context with llama.cpp's or Anthropic's real HTTP 400: the
compressor learns the ratio from the usage replies report and from the refusals, makes a refused
step again, smaller, and a second thread sized by what the first taught is never refused.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from openai import AsyncOpenAI

from slimcache import SummarizeCompressor, Summarizer
from slimcache.core.input_ratio import REFUSALS, ratio_for
from slimcache.llm import AnthropicSummarizer, OpenAISummarizer
from slimcache.stores import ThreadKeys
from slimcache.types import InputTooLong
from tests.frameworks.test_limit_field import INTEGRATIONS
from tests.servers.llm_server import ANTHROPIC_PATH, OPENAI_PATH, LLMServer, prompt_tokens

CONTEXT = 4096
BOUND = 3000
SENTENCE = "the order ships from the warehouse on tuesday "


def history(thread: str, count: int = 200) -> list[dict[str, Any]]:
    """``count`` messages of some 50 tokens each: about 10,000 tokens to fold in."""
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"{thread} turn {i}: " + SENTENCE * 4}
        for i in range(count)
    ]


def compressor(summarizer: Summarizer, name: str, **options: Any) -> SummarizeCompressor:
    options.setdefault("max_input_tokens", BOUND)
    return SummarizeCompressor(summarizer, "memory://", summarizer_id=name, **options)


def fresh_id() -> str:
    """A summarizer id no test used: the learned ratio is kept for the whole process."""
    return f"ratio-{uuid.uuid4().hex}"


def counted(server: LLMServer, start: int = 0) -> list[int]:
    """The prompt tokens of each request since ``start``, as the server counted them."""
    return [server.counted(OPENAI_PATH, body) for body in server.bodies(OPENAI_PATH)[start:]]


@pytest.mark.parametrize("integration", INTEGRATIONS)
async def test_a_history_fits_a_model_counting_twice_the_estimate_after_a_refusal_or_two(
    llm_server: LLMServer, client: AsyncOpenAI, integration: str
) -> None:
    llm_server.context_tokens = CONTEXT
    llm_server.token_scale = 2.0
    summarizer = INTEGRATIONS[integration](llm_server, client)
    name = fresh_id()

    first = compressor(summarizer, name)
    result = await first.compress_detailed(history("a"), thread_id="a")
    assert result.outcome == "summarized"
    sizes = counted(llm_server)
    refused = [size for size in sizes if size > CONTEXT]
    assert 1 <= len(refused) <= 2
    stats = first.stats
    assert stats.length_refusals == len(refused)
    assert stats.summarizer_requests == len(sizes)  # the refused ones too
    assert 1.9 <= stats.input_ratio <= 2.2
    assert ratio_for(name).in_force() == stats.input_ratio
    # Each accepted step still fills the context well: the bound was halved, not crushed.
    assert max(size for size in sizes if size <= CONTEXT) > CONTEXT // 2

    # Another compressor of the same summarizer, as the next request of a stateless server.
    second = compressor(summarizer, name)
    seen = len(sizes)
    result = await second.compress_detailed(history("b"), thread_id="b")
    assert result.outcome == "summarized"
    later = counted(llm_server, seen)
    assert len(later) > 1
    assert max(later) <= CONTEXT
    assert second.stats.length_refusals == 0
    assert 1.9 <= second.stats.input_ratio <= 2.2


@pytest.mark.parametrize("server", ["openai", "vllm"])
async def test_openai_and_vllm_refusals_are_recognised_too(
    llm_server: LLMServer, client: AsyncOpenAI, server: str
) -> None:
    # OpenAI's message gives both numbers; vLLM's is not read, and doubles the ratio.
    llm_server.context_tokens = CONTEXT
    llm_server.token_scale = 2.0
    llm_server.context_server = server
    summarizing = compressor(OpenAISummarizer("tiny", client=client), fresh_id())
    result = await summarizing.compress_detailed(history("a"), thread_id="a")
    assert result.outcome == "summarized"
    refused = [size for size in counted(llm_server) if size > CONTEXT]
    assert 1 <= len(refused) == summarizing.stats.length_refusals <= 2
    assert 1.9 <= summarizing.stats.input_ratio <= 2.2


@pytest.mark.parametrize("integration", INTEGRATIONS)
async def test_a_server_that_reports_no_usage_leaves_the_ratio_at_one(
    llm_server: LLMServer, client: AsyncOpenAI, integration: str
) -> None:
    llm_server.token_scale = 2.0
    llm_server.reports_usage = False
    summarizer = INTEGRATIONS[integration](llm_server, client)
    name = fresh_id()
    first = compressor(summarizer, name)
    await first.compress_detailed(history("a"), thread_id="a")
    again = compressor(summarizer, name)
    await again.compress_detailed(history("b"), thread_id="b")
    assert (first.stats.input_ratio, again.stats.input_ratio) == (1.0, 1.0)
    assert ratio_for(name).value is None
    # The second thread's steps are sized as estimated: as large as the bound lets them be.
    sent = [prompt_tokens(OPENAI_PATH, body) for body in llm_server.bodies(OPENAI_PATH)]
    assert max(sent[len(sent) // 2 :]) > BOUND * 0.9


async def test_the_usage_replies_report_teaches_the_ratio_before_any_refusal(
    llm_server: LLMServer, client: AsyncOpenAI
) -> None:
    llm_server.token_scale = 1.5
    name = fresh_id()
    summarizer = OpenAISummarizer("tiny", client=client)
    first = compressor(summarizer, name)
    await first.compress_detailed(history("a"), thread_id="a")
    assert 1.45 <= first.stats.input_ratio <= 1.6
    assert first.stats.length_refusals == 0
    # From then on the steps are sized for the server's count: none passes the bound in it.
    seen = len(llm_server.bodies(OPENAI_PATH))
    await compressor(summarizer, name).compress_detailed(history("b"), thread_id="b")
    assert max(counted(llm_server, seen)) <= BOUND


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
async def test_a_server_that_refuses_everything_gets_a_bounded_number_of_requests(
    llm_server: LLMServer, client: AsyncOpenAI, path: str
) -> None:
    llm_server.context_tokens = 50  # less than any prompt
    summarizer: Summarizer
    if path == OPENAI_PATH:
        summarizer = OpenAISummarizer("tiny", client=client)
    else:
        summarizer = AnthropicSummarizer(
            "tiny", base_url=llm_server.anthropic_base_url, api_key="k", max_retries=0
        )
    refused = compressor(summarizer, fresh_id())
    with pytest.raises(InputTooLong) as caught:
        await refused.compress_detailed(history("a"), thread_id="a")
    bodies = llm_server.bodies(path)
    assert len(bodies) == REFUSALS + 1
    assert refused.stats.length_refusals == refused.stats.summarizer_requests == REFUSALS + 1
    assert refused.stats.breaker_opened == 0  # the model answered each time
    assert caught.value.context_tokens == 50
    assert caught.value.prompt_tokens == llm_server.counted(path, bodies[-1])
    assert await refused.store.get(ThreadKeys("a").index) is None  # nothing was written
