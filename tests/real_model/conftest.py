"""The real-model tier: tests against an OpenAI-compatible model server you start.

They run when ``SLIMCACHE_TEST_LLM_URL`` names the server's API root (``.../v1``) and are
skipped, with that reason shown, otherwise; CI does not build a server. The model is
``SLIMCACHE_TEST_LLM_MODEL`` (default: the first one the server lists) and the key
``SLIMCACHE_TEST_LLM_KEY`` (default ``none``). The server's context must hold 8,192 tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

URL_VARIABLE = "SLIMCACHE_TEST_LLM_URL"


@dataclass(frozen=True)
class RealModel:
    """The server the tier talks to."""

    base_url: str
    model: str
    api_key: str


@pytest.fixture(scope="session")
def real_model() -> RealModel:
    """The model server named by the environment; the test is skipped without one."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        pytest.skip(f"real-model tier: set {URL_VARIABLE} to an OpenAI-compatible server's /v1")
    key = os.environ.get("SLIMCACHE_TEST_LLM_KEY", "none")
    model = os.environ.get("SLIMCACHE_TEST_LLM_MODEL")
    if not model:
        import openai

        with openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=10) as client:
            model = client.models.list().data[0].id
    return RealModel(url, model, key)
