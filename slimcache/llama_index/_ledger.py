"""A thread's summary grown one flushed batch at a time, with its running count in the store.

A LlamaIndex memory block is handed each batch of messages its ``Memory`` flushes out of the
chat history, never the archive before it. So the summary cannot be checked against the whole
history as :class:`~slimcache.SummarizeCompressor` checks one: the batches themselves say where
they go. :class:`BatchLedger` keeps one record per thread, under the thread's keys
(``thread_<id>:batches``): how many messages were flushed so far (the running count), the
summary of messages ``0..end`` of the archive, and the messages flushed but not yet in it (those
of a batch whose summarizer failed). A batch of ``n`` messages is messages ``count..count+n-1``
of the archive; extending folds only them (and any left over) into the summary, which is also
cached under ``thread_<id>:summary:0-<end>`` as the compressor caches a range, its fingerprint
chained from the previous one and the batch's.

The record is written with compare-and-set where the store has it: two workers flushing at once
both read ``count``, one writes first, the other reads again and folds its batch into the newer
summary, so no batch is lost or counted twice. A plain store of one's own is safe within one
process only. Reading the summary back is one store read, in any process.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slimcache._exceptions import StoreError, SummarizerError
from slimcache.core.request import Work
from slimcache.core.results import Stats
from slimcache.core.settings.compressor import CompressorOptions, checked_settings
from slimcache.core.store_io import StoreIO
from slimcache.core.summarizer import Summarizer
from slimcache.messages import Message, check_messages
from slimcache.stores.entries import RangeRef, SummaryEntry, load_stored
from slimcache.stores.keys import ThreadKeys, fingerprint_range
from slimcache.stores.protocol import Store

__all__ = ["ATTEMPTS", "BatchLedger", "Ledger"]

logger = logging.getLogger("slimcache")

_FORMAT = "slimcache.batches"
_VERSION = 1

ATTEMPTS = 8
"""Attempts at writing a thread's record while other workers keep writing it in between."""


@dataclass(frozen=True)
class Ledger:
    """One thread's record.

    Attributes:
        count: Messages flushed so far (the running count).
        summary: The summary of messages ``0..end``, or ``None`` before the first.
        end: The last message the summary covers (``-1`` without one).
        fingerprint: Chained from the fingerprint of every batch folded in.
        pending: Messages flushed after ``end`` and not yet summarized (a failed batch).
    """

    count: int = 0
    summary: str | None = None
    end: int = -1
    fingerprint: str = ""
    pending: tuple[Message, ...] = field(default=())

    def to_json(self, thread: str) -> str:
        """The record as stored."""
        data = {
            "format": _FORMAT,
            "v": _VERSION,
            "thread": thread,
            "count": self.count,
            "summary": self.summary,
            "end": self.end,
            "fingerprint": self.fingerprint,
            "pending": list(self.pending),
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: str | None, thread: str, key: str) -> Ledger:
        """The record ``raw`` holds (an empty one for ``None``).

        Raises:
            StoreError: ``raw`` is not a record slimcache wrote for ``thread``, naming ``key``.
        """
        if raw is None:
            return cls()
        data: Any = load_stored(raw)
        ok = (
            isinstance(data, dict)
            and data.get("format") == _FORMAT
            and data.get("v") == _VERSION
            and data.get("thread") == thread
            and _whole(data.get("count"))
            and _whole(data.get("end"), low=-1)
            and isinstance(data.get("summary"), (str, type(None)))
            and isinstance(data.get("fingerprint"), str)
            and isinstance(data.get("pending"), list)
            and all(isinstance(m, dict) for m in data["pending"])
        )
        if not ok:
            raise StoreError(f"{key!r} holds a value slimcache did not write; clear the thread")
        return cls(
            data["count"], data["summary"], data["end"], data["fingerprint"], tuple(data["pending"])
        )


def _whole(value: object, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


class BatchLedger:
    """Extends a thread's summary with each flushed batch, and reads it back (see the module
    docstring).

    Args:
        summarizer: A slimcache summarizer.
        store: The store (the caller's to close).
        options: The compressor's settings, with their meaning there (``strategy``,
            ``max_summary_tokens``, ``max_input_tokens``, ``prompts``, ``namespace``, ``ttl``,
            ``on_summarizer_error``, the hooks...).

    Raises:
        ConfigurationError: An invalid setting.
    """

    def __init__(self, summarizer: Summarizer, store: Store, options: CompressorOptions) -> None:
        self._derived = checked_settings.derived(summarizer, options)
        settings = self._derived.settings
        self.stats = Stats()
        self._io = StoreIO(store, self.stats, timeout=settings.store_timeout, ttl=settings.ttl)

    def _keys(self, thread_id: str) -> tuple[ThreadKeys, str]:
        keys = ThreadKeys(thread_id, self._derived.settings.namespace, name="session_id")
        return keys, f"{keys.prefix}batches"

    async def read(self, thread_id: str) -> Ledger:
        """The thread's record, in one store read.

        Raises:
            StoreError: The store failed, or holds a value slimcache did not write there.
        """
        keys, key = self._keys(thread_id)
        ledger = Ledger.parse(await self._io.get(key), keys.encoded, key)
        self.stats.requests += 1
        if ledger.summary is not None:
            self.stats.cache_hits += 1
        return ledger

    async def extend(self, thread_id: str, batch: Sequence[Message]) -> Ledger:
        """Fold ``batch``, the next messages flushed, into the thread's summary.

        Returns:
            The record written.

        Raises:
            InvalidInput: A message breaks a rule slimcache checks (nothing is written).
            SummarizerError: The summarizer failed and ``on_summarizer_error="raise"``; with
                ``"uncompressed"`` the batch is kept as pending, to be folded in with the next.
            StoreError: The store failed, or other workers kept writing the record.
        """
        if not batch:
            return await self.read(thread_id)
        derived = self._derived
        check_messages(batch, derived.count, derived.settings.message_overhead)
        keys, key = self._keys(thread_id)
        compares = self._io.compares
        for _ in range(ATTEMPTS):
            raw = await self._io.get(key)
            old = Ledger.parse(raw, keys.encoded, key)
            new = await self._folded(thread_id, old, batch)
            value = new.to_json(keys.encoded)
            if compares:
                if not await self._io.compare_and_set(key, raw, value):
                    continue
            else:
                await self._io.set(key, value)
            if new.summary is not None and new.end > old.end:
                await self._cache_range(keys, new)
            return new
        raise StoreError(
            f"{key!r}: other workers kept writing the record, {ATTEMPTS} attempts in a row"
        )

    async def _folded(self, thread_id: str, old: Ledger, batch: Sequence[Message]) -> Ledger:
        """``old`` with ``batch`` counted, and summarized with what is pending."""
        derived = self._derived
        messages = [*old.pending, *batch]
        checked = check_messages(messages, derived.count, derived.settings.message_overhead)
        last = len(checked) - 1
        batch_print = fingerprint_range(checked.kinds, checked.payloads, 0, last)
        count = old.count + len(batch)
        work = Work(checked, thread_id, self.stats)
        work.reason = "flushed"
        base = None
        if old.summary is not None:
            base = SummaryEntry(
                thread=thread_id, start=0, end=-1, fingerprint=old.fingerprint,
                summary=old.summary, summary_tokens=0, covered_tokens=0, created_at=0.0,
                summarizer="", prompt="", strategy="",
            )  # fmt: skip
        self.stats.requests += 1
        try:
            summary = await derived.producer.produce(work, base, RangeRef(0, last, batch_print))
        except SummarizerError as exc:
            self.stats.summarizer_errors += 1
            await derived.emit("on_error", exc, [dict(m) for m in messages])
            if derived.settings.on_summarizer_error == "raise":
                raise
            logger.warning(
                "the summarizer failed, so thread %s keeps its summary of messages 0-%d and "
                "folds the %d messages after it in with the next batch: %s",
                thread_id,
                old.end,
                len(messages),
                exc,
            )
            return Ledger(count, old.summary, old.end, old.fingerprint, tuple(messages))
        if base is None:
            self.stats.misses += 1
        else:
            self.stats.extensions += 1
        chained = hashlib.sha256(f"{old.fingerprint}|{batch_print}".encode()).hexdigest()[:32]
        return Ledger(count, summary, count - 1, chained, ())

    async def _cache_range(self, keys: ThreadKeys, ledger: Ledger) -> None:
        """Cache the summary as the range ``0..end`` too, as the compressor keys one."""
        assert ledger.summary is not None
        entry = self._derived.producer.entry(
            keys.encoded, RangeRef(0, ledger.end, ledger.fingerprint), ledger.summary, 0
        )
        await self._io.set(keys.summary(0, ledger.end), entry.to_json())
