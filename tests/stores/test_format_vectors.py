"""Tests: every vector beside docs/format.md is what the code writes and reads.

Each vector is checked twice: against slimcache's own functions, and against the small
implementation below that follows only the document's words (the key grammar, the canonical
text of each message kind, the hash), so that the document, the vectors and the code cannot
drift apart.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from slimcache.core.lease import lease_is_foreign
from slimcache.core.plan import History
from slimcache.messages.checks import check_messages, ids_as_records
from slimcache.stores.entries import SummaryEntry, ThreadIndex
from slimcache.stores.keys import ThreadKeys, decode_thread_id, encode_thread_id, thread_of

VECTORS = Path(__file__).parents[2] / "docs" / "format" / "vectors"


def _load(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


KEYS = _load("keys.json")["vectors"]
FINGERPRINTS = _load("fingerprints.json")["vectors"]
RECORDS = _load("records.json")


# --------------------------------------------------------------------------- the document's words


def doc_encode(thread_id: str | int) -> str:
    """Encode a thread id as docs/format.md says."""
    text = str(thread_id)
    if re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", text):
        return text
    encoded = "".join(
        ch if re.fullmatch(r"[A-Za-z0-9_.\-]", ch) else "".join(f"%{b:02X}" for b in ch.encode())
        for ch in text
    )
    if len(encoded) > 128:
        return "~" + hashlib.sha256(text.encode()).hexdigest()
    return encoded


def doc_prefix(thread_id: str | int, namespace: str) -> str:
    if namespace and not namespace.endswith(":"):
        namespace += ":"
    return f"{namespace}thread_{doc_encode(thread_id)}:"


_KIND = {"system": "s", "developer": "d", "user": "u", "human": "u", "assistant": "a", "ai": "a"}
_ALIAS = {"human": "user", "ai": "assistant"}


def doc_record(message: dict[str, Any], by_id: bool) -> tuple[str, str]:
    """One message's kind letter and payload, as docs/format.md says."""
    if by_id and isinstance(message.get("id"), str):
        return "i", message["id"]
    if by_id and isinstance(message.get("id"), int):
        number = message["id"]
        return "n", ("-" if number < 0 else "") + f"{abs(number):x}"
    role = message["role"]
    plain = (
        isinstance(message.get("content"), str)
        and message.get("name") is None
        and message.get("tool_call_id") is None
        and message.get("tool_calls") is None
        and role != "tool"
    )
    if plain:
        return _KIND[role], message["content"]
    view = {
        "role": _ALIAS.get(role, role),
        "content": message.get("content"),
        "name": message.get("name"),
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": message.get("tool_call_id"),
    }
    return "j", json.dumps(view, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def doc_fingerprint(kinds: str, payloads: list[str], start: int) -> str:
    """The fingerprint of a range's records, as docs/format.md says."""
    data = f"slimcache-fp-v3:{start}:{kinds}:".encode()
    data += b"".join(struct.pack("<Q", len(p)) for p in payloads)
    data += "".join(payloads).encode()
    return "3:" + hashlib.sha256(data).hexdigest()[:32]


def doc_start(messages: list[dict[str, Any]]) -> int:
    """Where every range starts: after the leading system and developer messages."""
    start = 0
    while start < len(messages) and messages[start]["role"] in ("system", "developer"):
        start += 1
    return start


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize("vector", KEYS, ids=[v["name"] for v in KEYS])
def test_keys_are_the_codes(vector: dict[str, Any]) -> None:
    keys = ThreadKeys(vector["thread_id"], vector["namespace"])
    summary = vector["summary"]
    assert keys.encoded == encode_thread_id(vector["thread_id"]) == vector["encoded"]
    assert keys.index == vector["index"]
    assert keys.lease == vector["lease"]
    assert keys.summary(summary["start"], summary["end"]) == summary["key"]
    assert thread_of(vector["index"], vector["namespace"]) == (vector["encoded"], "index")
    expected = None if vector["encoded"].startswith("~") else str(vector["thread_id"])
    assert decode_thread_id(vector["encoded"]) == expected


@pytest.mark.parametrize("vector", KEYS, ids=[v["name"] for v in KEYS])
def test_keys_follow_the_document(vector: dict[str, Any]) -> None:
    prefix = doc_prefix(vector["thread_id"], vector["namespace"])
    summary = vector["summary"]
    assert doc_encode(vector["thread_id"]) == vector["encoded"]
    assert prefix + "index" == vector["index"]
    assert prefix + "lease" == vector["lease"]
    assert f"{prefix}summary:{summary['start']}-{summary['end']}" == summary["key"]


def test_key_vectors_cover_the_edge_cases() -> None:
    encoded = [v["encoded"] for v in KEYS]
    assert any(e.startswith("~") for e in encoded)
    assert any("%0A" in e and "%00" in e for e in encoded)  # control characters
    assert any("%F0%9F" in e for e in encoded)  # beyond the BMP
    assert any(isinstance(v["thread_id"], int) for v in KEYS)
    assert any(v["namespace"] for v in KEYS)


# --------------------------------------------------------------------------- fingerprints


@pytest.mark.parametrize("vector", FINGERPRINTS, ids=[v["name"] for v in FINGERPRINTS])
def test_fingerprints_are_the_codes(vector: dict[str, Any]) -> None:
    by_id = vector["fingerprint_by"] == "id"
    checked = check_messages(vector["messages"])
    history = History(checked, by_id=by_id)
    kinds, payloads = ids_as_records(checked) if by_id else (checked.kinds, checked.payloads)
    start, end = vector["start"], vector["end"]
    assert history.first == start
    assert kinds[start : end + 1] == vector["kinds"]
    assert list(payloads[start : end + 1]) == vector["payloads"]
    assert history.fingerprint(end) == vector["fingerprint"]
    assert history.matches(start, end, vector["fingerprint"])


@pytest.mark.parametrize("vector", FINGERPRINTS, ids=[v["name"] for v in FINGERPRINTS])
def test_fingerprints_follow_the_document(vector: dict[str, Any]) -> None:
    by_id = vector["fingerprint_by"] == "id"
    messages = vector["messages"]
    start, end = vector["start"], vector["end"]
    assert doc_start(messages) == start
    records = [doc_record(m, by_id) for m in messages[start : end + 1]]
    kinds = "".join(kind for kind, _ in records)
    payloads = [payload for _, payload in records]
    assert (kinds, payloads) == (vector["kinds"], vector["payloads"])
    assert doc_fingerprint(kinds, payloads, start) == vector["fingerprint"]


def test_fingerprint_vectors_cover_every_kind() -> None:
    kinds = set("".join(v["kinds"] for v in FINGERPRINTS))
    assert kinds >= {"u", "a", "j", "i", "n"}
    assert any(m.get("tool_calls") for v in FINGERPRINTS for m in v["messages"])
    assert any(isinstance(m.get("content"), list) for v in FINGERPRINTS for m in v["messages"])


# --------------------------------------------------------------------------- records and leases


@pytest.mark.parametrize("record", RECORDS["records"], ids=[r["name"] for r in RECORDS["records"]])
def test_records_are_written_and_read_byte_for_byte(record: dict[str, Any]) -> None:
    data = json.loads(record["json"])
    thread = data["thread"]
    assert thread_of(record["key"], record["key"].partition("thread_")[0]) is not None
    if record["kind"] == "summary":
        entry = SummaryEntry.parse(
            record["json"], thread=thread, start=data["start"], end=data["end"]
        )
        assert entry is not None
        assert entry.to_json() == record["json"]
    else:
        index = ThreadIndex.parse(record["json"], thread=thread)
        assert index is not None
        assert index.to_json() == record["json"]


@pytest.mark.parametrize("lease", RECORDS["leases"], ids=lambda lease: repr(lease["value"]))
def test_lease_values(lease: dict[str, Any]) -> None:
    assert lease_is_foreign(lease["value"]) is lease["foreign"]


@pytest.mark.parametrize("record", RECORDS["records"], ids=[r["name"] for r in RECORDS["records"]])
def test_a_record_of_another_version_is_not_read(record: dict[str, Any]) -> None:
    data = json.loads(record["json"])
    data["v"] = 2
    if "head" in data:
        data["head"]["v"] = 2
    raw = json.dumps(data)
    thread = data["thread"]
    if record["kind"] == "summary":
        assert SummaryEntry.parse(raw, thread=thread, start=data["start"], end=data["end"]) is None
    else:
        assert ThreadIndex.parse(raw, thread=thread) is None
