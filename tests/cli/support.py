"""What the command-line tests share: a runner, a synthetic conversation, rich-free text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from slimcache.cli.app import build_app

# extend: each message that leaves the window is sent once, whose figures the tests read.
SMALL = ["--threshold", "6", "--keep", "3", "--summary-tokens", "60", "--strategy", "extend"]

runner = CliRunner()


def conversation(turns: int, tag: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"{tag} says {i}. Then some more words."})
    return messages


def flat(text: str) -> str:
    """Text without rich's box drawing and line wrapping."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return runner.invoke(build_app(), list(args), env=env)


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"
