"""The compression every framework integration runs: on slimcache's loop, degrading, not raising.

:class:`AgentCompression` holds what an integration was given (a summarizer, a store, its
:class:`~slimcache.frameworks.settings.AgentSettings`) and compresses OpenAI-style message dicts
for a thread. It builds the :class:`~slimcache.SummarizeCompressor` once (at the first call when
a size is a fraction of a context window only the model knows), and runs it on the event loop
of :mod:`slimcache.sync`, so that the store's connections stay on one loop whatever loops the
agent runs.

Inside an agent's loop a failing summarizer must not fail the agent. With
``on_summarizer_error="degrade"`` (the default) the request is answered from what the store
already holds: the thread's newest cached summary that still matches the history and every
message after it, verbatim (or every message, when nothing is cached), with a warning; the
failure is counted in ``stats.summarizer_errors``, and what was served so in the other
counters (the request once).

Nor must a history slimcache cannot compress: one that breaks a rule slimcache checks
(:class:`~slimcache.InvalidInput`: a tool result whose call is not in the history, a message of
a kind no rule covers) is passed to the model as it came, with a warning once per thread, and
counted in ``stats.invalid_histories`` (and ``stats.requests``). Settings stay errors.

:meth:`AgentCompression.compress` is awaited on the agent's loop;
:meth:`AgentCompression.compress_blocking` is the same for a framework's sync hook. A
framework that hands over exactly the messages to summarize has them summarized as a span of
the thread, cached by its range (:meth:`AgentCompression.summarize_span`, and
``summarize_span_blocking``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slimcache._exceptions import ConfigurationError, InvalidInput, SummarizerError
from slimcache.core.compressor import SummarizeCompressor
from slimcache.core.policy import Keep, Manual, Trigger
from slimcache.core.results import CompressionResult, Stats
from slimcache.core.settings.compressor import CompressorOptions
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.caller_loop import calling_from
from slimcache.frameworks.settings import AgentSettings, OnSummarizerError, compressor_options
from slimcache.frameworks.sizes import (
    ceiling_policy,
    keep_policy,
    needs_context_size,
    trigger_policy,
)
from slimcache.frameworks.spans import SpanSummaries
from slimcache.frameworks.stores import StoreHandle
from slimcache.messages import Message
from slimcache.stores import MemoryStore, Store
from slimcache.sync import default_runner

__all__ = [
    "AgentCompression",
    "CompressionOwner",
    "Given",
    "OnSummarizerError",
    "Summarized",
    "summarized",
]

Given = Sequence[Message] | Callable[[], Sequence[Message]]
"""What :meth:`AgentCompression.compress` takes: the messages as OpenAI-style dicts, or a
function that converts the framework's messages to them, called there so that a history the
conversion refuses is passed to the model as it came, as one the compressor refuses is."""

logger = logging.getLogger("slimcache")

# Checks the settings of an integration whose context size is known only at its first call.
_PROBE_CONTEXT_SIZE = 1_000_000


# The trigger of a compressor that only serves what is cached.
_NEVER = Manual()

# How many threads a compression remembers having warned of a history it could not compress.
_WARNED_THREADS = 4096


@dataclass(frozen=True)
class Summarized:
    """Where a compression put its summary, in the dicts it was given.

    Attributes:
        pinned: How many leading dicts stayed before the summary (the system messages).
        end: The index of the last dict the summary stands for; those after it stay verbatim.
        text: The summary message's text, as the model is to read it.
    """

    pinned: int
    end: int
    text: str


def summarized(result: CompressionResult) -> Summarized | None:
    """Where ``result`` put its summary, or ``None`` when it sends the messages as given."""
    if result.summary_range is None:
        return None
    start, end = result.summary_range
    return Summarized(start, end, str(result.messages[start]["content"]))


class AgentCompression:
    """Compresses a thread's messages for an agent integration (see the module docstring).

    Args:
        summarizer: A slimcache summarizer.
        store: A store, a URL (opened here and closed by :meth:`close`), or ``None``.
        settings: The integration's settings: ``trigger``, ``keep`` and ``ceiling`` in the
            sizes of :mod:`slimcache.frameworks.sizes`, ``refresh``, ``on_summarizer_error``
            (see :data:`OnSummarizerError`), and the compressor's own
            (:func:`~slimcache.frameworks.settings.compressor_options`).

    Raises:
        ConfigurationError: For any invalid setting, before the store is opened.
    """

    def __init__(
        self, summarizer: Summarizer, store: Store | str | None, settings: AgentSettings
    ) -> None:
        self._summarizer = summarizer
        self._settings = settings
        self._options = compressor_options(settings)
        sizes = (settings.trigger or settings.keep, settings.keep, settings.ceiling)
        self._needs_size = needs_context_size(*sizes)
        self._lock = threading.Lock()
        self._compressors: dict[int | None, tuple[SummarizeCompressor, SummarizeCompressor]] = {}
        # Histories passed as they came, and the threads already warned of one (oldest first).
        self._passed = Stats()
        self._warned: dict[str | None, None] = {}
        # Every setting is checked before the store is opened, also when the context size
        # is known only later.
        self._build(
            MemoryStore(),
            *self._policies(_PROBE_CONTEXT_SIZE if self._needs_size else None),
            background=True,
        )
        self._handle = StoreHandle.of(store)
        self._spans: SpanSummaries | None = None

    @property
    def settings(self) -> AgentSettings:
        """The integration's settings, as given."""
        return self._settings

    @property
    def store(self) -> Store:
        """The store the summaries are kept in."""
        return self._handle.store

    @property
    def needs_context_size(self) -> bool:
        """Whether a size is a fraction, so :meth:`compress` needs the model's context size."""
        return self._needs_size

    @property
    def stats(self) -> Stats:
        """The counters of the compressors built so far, added up: requests, cache hits,
        summarizer calls, tokens saved.

        What was served after a summarizer failure (``on_summarizer_error="degrade"``) is
        counted in, its requests once, and so are the histories passed to the model as they
        came (``invalid_histories``).
        """
        total = Stats()
        with self._lock:
            pairs = list(self._compressors.values())
            total.add(self._passed)
        for compressor, cached_only in pairs:
            total.add(compressor.stats)
            total.add(dataclasses.replace(cached_only.stats, requests=0))
        if self._spans is not None:
            total.add(self._spans.stats)
        return total

    async def compress(
        self,
        messages: Given,
        thread_id: str | None,
        *,
        context_size: int | None = None,
    ) -> CompressionResult:
        """Compress ``messages`` of ``thread_id`` on slimcache's loop.

        A history slimcache cannot compress (one that breaks a rule it checks) is not an
        error: the result's ``outcome`` is ``"passthrough"``, with no summary, so the model
        gets the messages as they came (see the module docstring).

        Args:
            messages: The conversation as OpenAI-style dicts, or a function that converts the
                framework's messages to them (see :data:`Given`).
            thread_id: The thread; ``None`` caches nothing.
            context_size: The model's context window, for fractions.

        Raises:
            ConfigurationError: A size is a fraction and ``context_size`` is ``None``.
            StoreError: The store failed (unless ``on_store_error="bypass"``).
            SummarizerError: The summarizer failed and ``on_summarizer_error="raise"``.
        """
        pair = self._pair(context_size)
        dicts = self._converted(messages, thread_id)
        if dicts is None:
            return self._as_given(thread_id)
        with calling_from(asyncio.get_running_loop()):
            pending = default_runner().submit(self._run(pair, dicts, thread_id))
        return await asyncio.wrap_future(pending)

    def compress_blocking(
        self,
        messages: Given,
        thread_id: str | None,
        *,
        context_size: int | None = None,
    ) -> CompressionResult:
        """:meth:`compress`, from code that does not await (a framework's sync hook): it
        blocks until slimcache's loop has compressed. Not for a coroutine on a running loop,
        which it would block.

        Raises:
            The errors of :meth:`compress`.
        """
        pair = self._pair(context_size)
        dicts = self._converted(messages, thread_id)
        if dicts is None:
            return self._as_given(thread_id)
        return default_runner().run(self._run(pair, dicts, thread_id))

    async def summarize_span(
        self, messages: Sequence[Message], thread_id: str | None, *, start: int = 0
    ) -> CompressionResult:
        """Summarize exactly ``messages``, messages ``start..`` of ``thread_id``, on
        slimcache's loop, cached by their range (see :mod:`slimcache.frameworks.spans`).

        For a framework that hands over the very messages to summarize: the same span again
        is served from the store with no summarizer call, a span whose first messages were
        summarized as a span of their own extends that summary with only the messages after
        it, and workers asking for one span at once make one call. ``trigger``, ``keep``,
        ``ceiling`` and ``refresh`` do not apply.

        Args:
            messages: The span, as OpenAI-style dicts, oldest first.
            thread_id: The thread; ``None`` caches nothing.
            start: The index of the span's first message in the thread.

        Returns:
            The result (see :meth:`SpanSummaries.summarize`). When the summarizer fails and
            ``on_summarizer_error`` is not ``"raise"``, its outcome is ``"passthrough"`` and it
            has no summary, with a warning: the caller keeps the span as it was.

        Raises:
            InvalidInput: A message or ``start`` breaks a rule slimcache checks, or the span is
                empty.
            StoreError: The store failed (unless ``on_store_error="bypass"``).
            SummarizerError: The summarizer failed and ``on_summarizer_error="raise"``.
        """
        with calling_from(asyncio.get_running_loop()):
            pending = default_runner().submit(self._span(messages, thread_id, start))
        return await asyncio.wrap_future(pending)

    def summarize_span_blocking(
        self, messages: Sequence[Message], thread_id: str | None, *, start: int = 0
    ) -> CompressionResult:
        """:meth:`summarize_span`, from code that does not await (a framework's sync hook):
        it blocks until slimcache's loop has summarized. Not for a coroutine on a running
        loop, which it would block.

        Raises:
            The errors of :meth:`summarize_span`.
        """
        return default_runner().run(self._span(messages, thread_id, start))

    async def aclose(self) -> None:
        """Close the store if it was given as a URL."""
        await self._handle.aclose()

    def close(self) -> None:
        """Close the store if it was given as a URL."""
        self._handle.close()

    # ------------------------------------------------------------------ internals

    def _policies(self, context_size: int | None) -> tuple[Trigger, Keep, Trigger | None]:
        if self._needs_size and context_size is None:
            raise ConfigurationError(
                "a fraction in trigger or keep needs the model's context size, which the model "
                "does not give: use ('tokens', n) or ('messages', n)"
            )
        settings = self._settings
        trigger: Trigger = _NEVER
        if settings.trigger is not None:
            trigger = trigger_policy(settings.trigger, context_size)
        keep = keep_policy(settings.keep, trigger, context_size)
        ceiling = None
        if settings.ceiling is not None:
            ceiling = ceiling_policy(settings.ceiling, trigger, context_size)
        return trigger, keep, ceiling

    def _build(
        self,
        store: Store,
        trigger: Trigger,
        keep: Keep,
        ceiling: Trigger | None,
        *,
        background: bool,
    ) -> SummarizeCompressor:
        """A compressor; ``background``: with the refresh and ceiling asked for."""
        options: CompressorOptions = {**self._options, "trigger": trigger, "keep": keep}
        if background:
            options["ceiling"] = ceiling
        else:
            options.pop("refresh", None)
        return SummarizeCompressor(self._summarizer, store, **options)

    def _pair(self, context_size: int | None) -> tuple[SummarizeCompressor, SummarizeCompressor]:
        key = context_size if self._needs_size else None
        with self._lock:
            pair = self._compressors.get(key)
            if pair is None:
                trigger, keep, ceiling = self._policies(key)
                store = self._handle.store
                pair = (
                    self._build(store, trigger, keep, ceiling, background=True),
                    self._build(store, _NEVER, keep, None, background=False),
                )
                self._compressors[key] = pair
            return pair

    def _converted(self, messages: Given, thread_id: str | None) -> Sequence[Message] | None:
        """The dicts of ``messages``; ``None`` (counted and warned of) when the conversion
        refuses them."""
        if not callable(messages):
            return messages
        try:
            return messages()
        except InvalidInput as exc:
            self._refused(thread_id, exc)
            return None

    def _refused(self, thread_id: str | None, exc: InvalidInput) -> None:
        """Count a history passed as it came, and warn of it once per thread."""
        with self._lock:
            self._passed.requests += 1
            self._passed.invalid_histories += 1
            warn = thread_id not in self._warned
            if warn:
                if len(self._warned) >= _WARNED_THREADS:
                    del self._warned[next(iter(self._warned))]
                self._warned[thread_id] = None
        if warn:
            logger.warning(
                "slimcache cannot compress the history of thread %s, so the model gets it as it "
                "came (said once per thread; counted in stats.invalid_histories): %s",
                thread_id,
                exc,
            )

    def _as_given(
        self, thread_id: str | None, messages: Sequence[Message] = ()
    ) -> CompressionResult:
        """The answer that sends the messages as they came."""
        return CompressionResult(
            [dict(message) for message in messages], "passthrough", thread_id=thread_id
        )

    async def _run(
        self,
        pair: tuple[SummarizeCompressor, SummarizeCompressor],
        messages: Sequence[Message],
        thread_id: str | None,
    ) -> CompressionResult:
        try:
            return await self._compressed(pair, messages, thread_id)
        except InvalidInput as exc:
            self._refused(thread_id, exc)
            return self._as_given(thread_id, messages)

    async def _compressed(
        self,
        pair: tuple[SummarizeCompressor, SummarizeCompressor],
        messages: Sequence[Message],
        thread_id: str | None,
    ) -> CompressionResult:
        compressor, cached_only = pair
        try:
            return await compressor.compress_detailed(messages, thread_id=thread_id)
        except SummarizerError as exc:
            if self._settings.on_summarizer_error == "raise":
                raise
            logger.warning(
                "the summarizer failed, so the model gets the newest cached summary of thread "
                "%s and the messages after it: %s",
                thread_id,
                exc,
            )
            return await cached_only.compress_detailed(messages, thread_id=thread_id)

    async def _span(
        self, messages: Sequence[Message], thread_id: str | None, start: int
    ) -> CompressionResult:
        with self._lock:
            if self._spans is None:
                self._spans = SpanSummaries(self._summarizer, self._handle.store, self._options)
            spans = self._spans
        try:
            return await spans.summarize(messages, thread_id, start=start)
        except SummarizerError as exc:
            if self._settings.on_summarizer_error == "raise":
                raise
            logger.warning(
                "the summarizer failed, so messages %d.. of thread %s stay as they were: %s",
                start,
                thread_id,
                exc,
            )
            given = [dict(message) for message in messages]
            return CompressionResult(given, "passthrough", thread_id=thread_id)


class CompressionOwner:
    """What every integration shows of its :class:`AgentCompression` (kept as
    ``self._compression``): the store, the counters, and closing the store it opened."""

    _compression: AgentCompression

    @property
    def store(self) -> Store:
        """The store the summaries are kept in."""
        return self._compression.store

    @property
    def stats(self) -> Stats:
        """The counters: requests, cache hits, summarizer calls, tokens saved; what was served
        after a summarizer failure counted in (its requests once)."""
        return self._compression.stats

    def close(self) -> None:
        """Close the store when it was given as a URL; a store passed in stays open. One left
        open is closed at exit, on the loop its connections belong to."""
        self._compression.close()

    async def aclose(self) -> None:
        """:meth:`close`, from async code."""
        await self._compression.aclose()
