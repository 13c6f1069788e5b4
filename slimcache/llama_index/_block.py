"""``CachedSummaryBlock``: a LlamaIndex memory block whose summary lives in your store.

Imported on first use by :mod:`slimcache.llama_index`, as it subclasses LlamaIndex's
``BaseMemoryBlock``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import LLM
from llama_index.core.memory import BaseMemoryBlock
from pydantic import PrivateAttr

from slimcache._exceptions import ConfigurationError
from slimcache.core.results import Stats
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.caller_loop import calling_from
from slimcache.frameworks.settings import AgentOptions, AgentSettings, settings_from
from slimcache.frameworks.stores import StoreHandle
from slimcache.frameworks.summarizers import summarizer_for
from slimcache.frameworks.threads import ThreadIds
from slimcache.llama_index._convert import to_dicts
from slimcache.llama_index._ledger import BatchLedger
from slimcache.llama_index._summarizer import LlamaIndexSummarizer
from slimcache.stores import MemoryStore, Store
from slimcache.sync import default_runner

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedSummaryBlock"]

T = TypeVar("T")

# The agent integrations' settings a memory block has no use for: Memory decides what leaves
# the chat history, and each batch it flushes is summarized when it is flushed.
_NOT_HERE = {
    "trigger": "Memory's token_limit and chat_history_token_ratio",
    "keep": "Memory's token_limit and chat_history_token_ratio",
    "ceiling": "Memory's token_limit",
    "summary_placement": "Memory's insert_method",
}


class CachedSummaryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block: a summary of the messages ``Memory`` flushed out of the chat
    history, cached in your store and extended with each new batch only.

    Give it to ``Memory.from_defaults(memory_blocks=[...])``. Each time the chat history grows
    past ``token_limit * chat_history_token_ratio``, ``Memory`` archives its oldest messages and
    hands them to the block, which folds them into the thread's summary (one summarizer call
    given the summary so far and the batch alone). ``Memory.aget()`` puts the summary before the
    chat history, read from the store in one read: a ``Memory`` built again in another process
    or worker, on the same chat store and session id, gets the same summary with no summarizer
    call. The chat store keeps every message (``memory.aget_all()``).

    The block keeps, under the thread's keys, how many messages were flushed so far: a batch of
    ``n`` messages is messages ``count..count+n-1`` of the archive, and the summary is cached
    under ``thread_<id>:summary:0-<end>``. When the summarizer fails, ``Memory`` is not failed:
    the block keeps serving the summary it has, with a warning, and folds the batch in with the
    next one (``on_summarizer_error="degrade"``, the default; ``"raise"`` raises instead).
    A tool call and its results stay a pair in what is summarized when both are in a batch.

    Args:
        model: What writes the summaries: a LlamaIndex ``LLM`` or a slimcache summarizer
            ``(messages, context) -> str``.
        store: A store, a store URL (opened here and closed by :meth:`close`), or ``None`` for
            one in this process.
        name: The block's name, as ``Memory``'s template shows it.
        thread_id: The thread the summary is kept under; by default the ``Memory``'s
            ``session_id``.
        priority: ``Memory``'s priority of the block (0: never truncated).
        **options: Every setting of :class:`~slimcache.SummarizeCompressor` that applies to a
            summary made when asked for, by its keyword (``max_summary_tokens``, ``strategy``,
            ``prompts``, ``namespace``, ``ttl``, ``max_input_tokens``, the hooks...), and
            ``on_summarizer_error`` and ``on_truncated`` of
            :class:`~slimcache.llama_index.AgentSettings`. ``trigger``, ``keep``, ``ceiling`` and
            ``summary_placement`` are ``Memory``'s to decide, and ``refresh="background"`` is
            not offered: a flush waits for its batch's summary.

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
        MissingExtraError: ``llama-index-core`` is not installed (on import).
    """

    _ledger: BatchLedger = PrivateAttr()
    _handle: StoreHandle = PrivateAttr()
    _threads: ThreadIds[Any] = PrivateAttr()

    def __init__(
        self,
        model: LLM | Summarizer,
        store: Store | str | None = None,
        *,
        name: str = "summary",
        thread_id: str | None = None,
        priority: int = 0,
        **options: Unpack[AgentOptions],
    ) -> None:
        for setting, owner in _NOT_HERE.items():
            if setting in options:
                raise ConfigurationError(
                    f"{setting} is not a setting of CachedSummaryBlock: {owner} decides it"
                )
        if options.get("refresh", "inline") != "inline":
            raise ConfigurationError(
                'refresh must be "inline" for CachedSummaryBlock: Memory awaits each flush'
            )
        if thread_id is not None and not isinstance(thread_id, str):
            raise ConfigurationError(f"thread_id must be a string, got {thread_id!r}")
        settings = settings_from(AgentSettings, "CachedSummaryBlock", options)
        make = functools.partial(LlamaIndexSummarizer, on_truncated=settings.on_truncated)
        summarizer = summarizer_for(model, LLM, make, what="a LlamaIndex LLM")
        raising = settings.on_summarizer_error == "raise"
        given: Any = {
            **settings.compressor,
            "on_summarizer_error": "raise" if raising else "uncompressed",
        }
        super().__init__(name=name, priority=priority)
        BatchLedger(summarizer, MemoryStore(), given)  # every setting checked before opening
        self._handle = StoreHandle.of(store)
        self._ledger = BatchLedger(summarizer, self._handle.store, given)
        self._threads = ThreadIds(
            thread_id,
            owner="CachedSummaryBlock",
            context="session id",
            carried=lambda session: session,
            missing="the Memory gave no session_id and no thread_id was given",
            call="flush",
        )

    # ------------------------------------------------------------------ public

    @property
    def store(self) -> Store:
        """The store the summaries are kept in."""
        return self._handle.store

    @property
    def stats(self) -> Stats:
        """The counters: requests (reads and flushes), cache hits (reads that found a
        summary), summarizer calls and the tokens they were sent, summarizer errors."""
        return self._ledger.stats

    async def aput(
        self,
        messages: list[ChatMessage],
        from_short_term_memory: bool = False,
        session_id: str | None = None,
    ) -> None:
        """Fold ``messages``, a batch ``Memory`` flushed, into the thread's summary."""
        if from_short_term_memory and not self.accept_short_term_memory:
            return
        await self._put(messages, session_id)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Fold ``messages`` into the summary of the thread named by ``thread_id``."""
        await self._put(messages, None)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The thread's summary, read from the store (``""`` before the first flush)."""
        thread = self._threads.of(block_kwargs.get("session_id"))
        if thread is None:
            return ""
        ledger = await self._on_slimcache_loop(self._ledger.read(thread))
        return ledger.summary or ""

    def close(self) -> None:
        """Close the store when it was given as a URL; a store passed in stays open."""
        self._handle.close()

    async def aclose(self) -> None:
        """:meth:`close`, from async code."""
        await self._handle.aclose()

    # ------------------------------------------------------------------ internals

    async def _put(self, messages: list[ChatMessage], session_id: str | None) -> None:
        thread = self._threads.of(session_id)
        if thread is None or not messages:
            return
        await self._on_slimcache_loop(self._ledger.extend(thread, to_dicts(messages)))

    async def _on_slimcache_loop(self, work: Coroutine[Any, Any, T]) -> T:
        with calling_from(asyncio.get_running_loop()):
            pending = default_runner().submit(work)
        return await asyncio.wrap_future(pending)

    def __repr__(self) -> str:
        return f"CachedSummaryBlock(name={self.name!r}, store={self.store!r})"
