"""Test doubles: a recording summarizer and plain stores that lack optional abilities.

The summarizer is a fake because no language model runs in the test suite; it records exactly
which messages each call received so tests can assert on them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import slimcache.core.plan
from slimcache import Message, SummaryContext
from slimcache.core.fingerprints import HashedRanges
from slimcache.stores.keys import fingerprint_range


@dataclass
class Call:
    """One summarizer call as received."""

    messages: list[dict[str, Any]]
    context: SummaryContext


@dataclass
class RecordingSummarizer:
    """Summarizes deterministically and records every call.

    The summary names the task and range, so tests can see which call produced what.
    """

    calls: list[Call] = field(default_factory=list)
    fail_with: BaseException | None = None
    result: str | None = None
    delay: float = 0.0

    async def __call__(self, messages: Sequence[Message], context: SummaryContext) -> str:
        self.calls.append(Call([dict(m) for m in messages], context))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail_with is not None:
            raise self.fail_with
        if self.result is not None:
            return self.result
        previous = f"{context.previous_summary} + " if context.previous_summary else ""
        return f"{previous}{context.task}[{context.start}-{context.end}]"

    def sent_contents(self) -> list[str]:
        """Every message content sent, across all calls, in order."""
        return [str(m.get("content")) for call in self.calls for m in call.messages]


class CountingStore:
    """A user's plain store: only get/set/delete, no optional abilities, counts calls."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.gets = 0
        self.sets = 0
        self.deletes = 0

    async def get(self, key: str) -> str | None:
        self.gets += 1
        return self.data.get(key)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        self.sets += 1
        self.data[key] = value

    async def delete(self, key: str) -> None:
        self.deletes += 1
        self.data.pop(key, None)


class WithoutBatch:
    """Another store's abilities but ``batch``: every operation is a call of its own (as on a
    third-party store without the ability)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.get = inner.get
        self.get_many = inner.get_many
        self.set = inner.set
        self.set_if_absent = inner.set_if_absent
        self.compare_and_set = inner.compare_and_set
        self.compare_and_delete = inner.compare_and_delete
        self.delete = inner.delete

    @property
    def call_timeout(self) -> float | None:
        """The inner store's bound on its calls (the calls are its own)."""
        bound: float | None = getattr(self.inner, "call_timeout", None)
        return bound


class CallCountingStore:
    """Another store with the same abilities, counting the calls (round trips) made to each.

    ``calls["get_many"]`` is how many ``get_many`` calls were made, however many keys each
    read; ``keys[name]`` adds up the keys (or operations, for ``batch``) they carried.
    ``on_call(name)``, when set, runs as each call starts, in the caller's task.
    """

    _METHODS = (
        "get",
        "get_many",
        "set",
        "delete",
        "set_if_absent",
        "compare_and_set",
        "compare_and_delete",
        "batch",
    )

    # Set in __init__ only for the methods the inner store has, so it keeps its abilities.
    get: Any
    get_many: Any
    set: Any
    delete: Any
    set_if_absent: Any
    compare_and_set: Any
    compare_and_delete: Any
    batch: Any

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.keys: Counter[str] = Counter()
        self.on_call: Callable[[str], None] | None = None
        for name in self._METHODS:
            method = getattr(inner, name, None)
            if method is not None:
                setattr(self, name, self._counted(name, method))

    def _counted(self, name: str, method: Any) -> Any:
        async def call(first: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            self.keys[name] += len(first) if name in ("get_many", "batch") else 1
            if self.on_call is not None:
                self.on_call(name)
            return await method(first, *args, **kwargs)

        return call

    @property
    def call_timeout(self) -> float | None:
        """The inner store's bound on its calls (the calls are its own)."""
        bound: float | None = getattr(self.inner, "call_timeout", None)
        return bound

    def reset(self) -> None:
        """Forget the calls made so far."""
        self.calls.clear()
        self.keys.clear()

    def round_trips(self) -> int:
        """Calls made so far, of every kind."""
        return sum(self.calls.values())


class FailingStore(CountingStore):
    """A plain store whose reads or writes raise, to check the compressor's error policy."""

    def __init__(self, *, fail_reads: bool = False, fail_writes_after: int | None = None) -> None:
        super().__init__()
        self.fail_reads = fail_reads
        self.fail_writes_after = fail_writes_after

    async def get(self, key: str) -> str | None:
        if self.fail_reads:
            raise ConnectionError("store is down")
        return await super().get(key)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        if self.fail_writes_after is not None and self.sets >= self.fail_writes_after:
            self.sets += 1
            raise ConnectionError("write refused")
        await super().set(key, value, ttl=ttl)


def chat(
    count: int, *, start: int = 0, system: str | None = "You are helpful."
) -> list[dict[str, Any]]:
    """A chat of ``count`` alternating user/assistant messages with distinct, varied contents."""
    messages: list[dict[str, Any]] = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    for i in range(start, start + count):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"message {i} " + "word " * (i % 7)})
    return messages


def counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the planner's fingerprint computations (the ends hashed), with a table of what
    was hashed of its own, empty at first."""
    calls: list[int] = []

    def counted(kinds: str, payloads: Any, start: int, end: int) -> str:
        calls.append(end)
        return fingerprint_range(kinds, payloads, start, end)

    monkeypatch.setattr(slimcache.core.plan, "fingerprint_range", counted)
    monkeypatch.setattr(slimcache.core.plan, "hashed", HashedRanges())
    return calls


async def all_keys(store: Any, prefix: str) -> list[str]:
    """Every key of ``store`` starting with ``prefix``, all pages of ``scan_keys`` read (a page
    may be empty), sorted."""
    keys: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.scan_keys(prefix, cursor=cursor)
        keys += page
        if cursor is None:
            return sorted(keys)
