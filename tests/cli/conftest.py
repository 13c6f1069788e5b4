"""Fixtures of the command-line tests: data set files in both formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.support import conversation


@pytest.fixture
def data_json(tmp_path: Path) -> Path:
    path = tmp_path / "chats.json"
    convs = [conversation(30, "a"), {"id": "b", "messages": conversation(24, "b")}]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


@pytest.fixture
def data_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "chats.jsonl"
    lines = [json.dumps(conversation(n, f"t{n}")) for n in (26, 18, 32)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
