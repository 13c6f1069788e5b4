"""A bridge imported without its framework says what to install, for this install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slimcache._install import pip_install


@pytest.mark.parametrize(
    ("bridge", "name", "blocked", "needs", "extra"),
    [
        ("slimcache.langchain", "CachedSummarizationMiddleware", "langchain",
         "langchain 1.0 or later", "langchain"),
        ("slimcache.pydantic_ai", "CachedSummarization", "pydantic_ai", "Pydantic AI 2",
         "pydantic-ai"),
        ("slimcache.openai_agents", "CachedSummarizationFilter", "agents",
         "the OpenAI Agents SDK", "openai-agents"),
        ("slimcache.strands", "CachedSummarizingConversationManager", "strands",
         "Strands Agents 1.62 or later", "strands"),
    ],
)  # fmt: skip
def test_a_missing_framework_names_the_install_that_adds_it(
    bridge: str, name: str, blocked: str, needs: str, extra: str
) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "import slimcache\n"
        f"import {bridge} as bridge\n"
        "try:\n"
        f"    bridge.{name}\n"
        "except slimcache.MissingExtraError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{bridge}.{name} needs {needs}: {pip_install(extra)}"
    assert "/" in pip_install(extra)  # from this checkout: its folder, not the package index
