"""The benchmark's datasets: files in every shape, chitchat, selection."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slimcache import ConfigurationError, InvalidInput
from slimcache.bench.datasets import (
    BenchConversation,
    chitchat_conversations,
    load_file,
    select_conversations,
)
from tests.bench.synthetic import conversation


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "shape",
    [
        lambda convs: convs,
        lambda convs: [{"id": f"x{i}", "messages": c} for i, c in enumerate(convs)],
        lambda convs: {"conversations": convs},
    ],
)
def test_json_shapes(tmp_path: Path, shape: Callable[[list[Any]], object]) -> None:
    convs = [conversation(4, "a"), conversation(6, "b")]
    loaded = load_file(write(tmp_path / "data.json", shape(convs)))
    assert [c.messages for c in loaded.conversations] == convs
    assert loaded.name == "data.json"


def test_single_conversation_and_jsonl(tmp_path: Path) -> None:
    one = conversation(5, "a")
    assert load_file(write(tmp_path / "one.json", one)).conversations[0].messages == one
    wrapped = load_file(write(tmp_path / "w.json", {"messages": one}))
    assert wrapped.conversations[0].messages == one
    lines = [json.dumps(conversation(3, "a")), "", json.dumps({"messages": conversation(2, "b")})]
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(lines), encoding="utf-8")
    loaded = load_file(jsonl)
    assert [c.id for c in loaded.conversations] == ["0", "1"]
    assert loaded.digest != load_file(write(tmp_path / "o.json", [conversation(3, "a")])).digest


def test_bad_files_are_named(tmp_path: Path) -> None:
    bad = [conversation(3, "a"), [{"role": "user", "content": "hi"}, {"role": "bot"}]]
    with pytest.raises(InvalidInput, match=r"data\.json: conversation 1, messages\[1\]: ") as info:
        load_file(write(tmp_path / "data.json", bad))
    assert info.value.index == 1
    with pytest.raises(ConfigurationError, match="not found"):
        load_file(tmp_path / "missing.json")
    (tmp_path / "broken.jsonl").write_text('[{"role": "user", "content": "x"}]\n{oops\n')
    with pytest.raises(ConfigurationError, match="line 2"):
        load_file(tmp_path / "broken.jsonl")
    with pytest.raises(ConfigurationError, match=r"\.json"):
        load_file(tmp_path / "data.csv")
    with pytest.raises(ConfigurationError, match="messages"):
        load_file(write(tmp_path / "shape.json", [{"turns": []}]))


def test_chitchat_turns_become_alternating_messages() -> None:
    raw = {
        "b": {
            "messages": [
                [{"text": "hi", "sender": "s1"}, {"text": "there", "sender": "s1"}],
                [{"text": "hello", "sender": "s2"}],
                [{"text": "bye", "sender": "s1"}],
            ]
        },
        "a": {"messages": [[{"text": "solo", "sender": "s9"}]]},
    }
    convs = chitchat_conversations(raw)
    assert [c.id for c in convs] == ["a", "b"]
    assert convs[1].messages[1:] == [
        {"role": "user", "content": "hi\nthere"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"},
    ]
    assert convs[1].messages[0]["role"] == "system"
    assert convs[1].turns == 3


def test_selection_is_deterministic() -> None:
    convs = [BenchConversation(f"c{i}", conversation(10 + i, "x")) for i in range(30)]
    picked = select_conversations(convs, count=5, min_messages=20, seed=1)
    assert len(picked) == 5
    assert all(c.turns >= 20 for c in picked)
    assert picked == select_conversations(convs, count=5, min_messages=20, seed=1)
    assert picked != select_conversations(convs, count=5, min_messages=20, seed=2)
    assert [c.id for c in picked] == sorted((c.id for c in picked), key=lambda s: int(s[1:]))
    assert len(select_conversations(convs, count=50, min_messages=35)) == 5
    with pytest.raises(ConfigurationError, match="min-messages"):
        select_conversations(convs, count=5, min_messages=100)
    with pytest.raises(ConfigurationError, match="positive"):
        select_conversations(convs, count=0)
