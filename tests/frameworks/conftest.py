"""The integrations' tests against the local chat API: an OpenAI client of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from openai import AsyncOpenAI

from tests.servers.llm_server import LLMServer


@pytest.fixture
async def client(llm_server: LLMServer) -> AsyncIterator[AsyncOpenAI]:
    """An OpenAI client of the local chat API that does not retry; closed afterwards."""
    client = AsyncOpenAI(base_url=llm_server.openai_base_url, api_key="k", max_retries=0)
    yield client
    await client.close()
