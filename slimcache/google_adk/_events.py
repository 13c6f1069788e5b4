"""``CachedEventsSummarizer``: the summarizer of ADK's event compaction, cached in your store.

Imported on first use by :mod:`slimcache.google_adk`, as it subclasses ADK's
``BaseEventsSummarizer``.

ADK hands the summarizer the window's events alone, not the session they belong to. The
session comes from a plugin (:attr:`CachedEventsSummarizer.plugin`), whose
``before_run_callback`` notes each run's session: the window's events are found in it, which
gives the thread (the session's id) and the range (the positions of the window's first and
last events among the session's messages, compactions left out). Sessions are held weakly:
one that is gone is forgotten.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions.session import Session
from google.genai import types

from slimcache._exceptions import ConfigurationError, InvalidInput
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.compression import AgentCompression, CompressionOwner
from slimcache.frameworks.settings import (
    AgentOptions,
    AgentSettings,
    SettingsSignature,
    settings_from,
)
from slimcache.frameworks.summarizers import summarizer_for
from slimcache.frameworks.threads import ThreadIds
from slimcache.google_adk._convert import is_compaction, messages_of, positions
from slimcache.google_adk._summarizer import ADKSummarizer
from slimcache.messages import Message
from slimcache.stores import Store

if TYPE_CHECKING:
    from google.adk.agents.invocation_context import InvocationContext
    from typing_extensions import Unpack

__all__ = ["CachedEventsSummarizer"]

logger = logging.getLogger("slimcache")

ThreadId = str | Callable[[Session], "str | None"] | None

# What model may be besides a slimcache summarizer, as an error names it.
_MODELS = "an ADK model (a BaseLlm), a model name such as 'gemini-2.5-flash'"

# The integrations' settings that say when to summarize and what to keep: ADK's
# EventsCompactionConfig says both, and hands over exactly the events to summarize.
_ADK_DECIDES = ("trigger", "keep", "ceiling", "refresh", "summary_placement")


class CachedEventsSummarizer(CompressionOwner, BaseEventsSummarizer):
    """The summarizer of an ADK ``App``'s event compaction, its summaries cached in your store.

    Give it to ``EventsCompactionConfig(summarizer=...)`` and its :attr:`plugin` to
    ``App(plugins=[...])``. ADK decides when to compact and which events (a sliding window of
    invocations, or the events past a token threshold) and hands them over; the compaction
    event returned carries their summary, which comes from ``store`` when any worker made it
    before (no summarizer call), extends a cached summary of the window's first events with
    only the later ones, and is made once when several runners compact the same events of one
    session at the same time. The session keeps every event; ADK sends the model the summary
    in place of the events it covers.

    The summaries are kept under the session's id, as the range of the events among the
    session's messages (compactions left out): ``thread_<session id>:summary:<start>-<end>``.
    The text, the thoughts, the tool calls and the tools' results of each event are
    summarized; ADK's own summarizer renders them too. Where the window starts with ADK's
    seed (the previous summary, under a token threshold), the span runs from the session's
    first message, so that the cached summary is extended with only the new events.

    Args:
        model: What writes the summaries: an ADK model (``Gemini(...)``, ``LiteLlm(...)``), a
            model name ADK's registry knows (``"gemini-2.5-flash"``), or a slimcache summarizer
            ``(messages, context) -> str``.
        store: A store, a store URL (opened here and closed by :meth:`close`), or ``None`` for
            one in this process.
        thread_id: The thread the summaries are kept under: a string, or a function of the
            ADK ``Session``; by default the session's id.
        **options: The settings, by keyword (``namespace="app"``, ``lease_ttl=3.0``,
            ``max_summary_tokens=600``, ``on_summarizer_error="raise"``, ...): every setting
            of :class:`~slimcache.SummarizeCompressor`, with the compressor's meaning and
            default, and ``on_summarizer_error`` and ``on_truncated`` as
            :class:`~slimcache.google_adk.AgentSettings` documents them. ``trigger``, ``keep``,
            ``ceiling``, ``refresh`` and ``summary_placement`` are ADK's to decide, in its
            ``EventsCompactionConfig``, and are refused.

    When the summarizer fails, no compaction event is returned (ADK keeps the events as they
    are) with a warning, unless ``on_summarizer_error="raise"``; a window slimcache cannot
    read is left as it is too, with a warning once per session. A window whose session the
    plugin did not see (the plugin was not added) is summarized without the cache, with a
    warning once.

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
        MissingExtraError: ``google-adk`` is not installed (on import).
    """

    def __init__(
        self,
        model: BaseLlm | str | Summarizer,
        store: Store | str | None = None,
        *,
        thread_id: ThreadId = None,
        **options: Unpack[AgentOptions],
    ) -> None:
        refused = [name for name in _ADK_DECIDES if name in options]
        if refused:
            raise ConfigurationError(
                f"CachedEventsSummarizer takes no {refused[0]}: ADK's EventsCompactionConfig "
                "says when to compact and which events (compaction_interval and overlap_size, "
                "or token_threshold and event_retention_size)"
            )
        settings = settings_from(AgentSettings, "CachedEventsSummarizer", options)
        make = functools.partial(ADKSummarizer, on_truncated=settings.on_truncated)
        summarizer = summarizer_for(model, BaseLlm, make, what=_MODELS)
        self._compression = AgentCompression(summarizer, store, settings)
        self._threads: ThreadIds[Session] = ThreadIds(
            thread_id,
            owner="CachedEventsSummarizer",
            context="Session",
            carried=_session_id,
        )
        self._sessions: weakref.WeakValueDictionary[int, Session] = weakref.WeakValueDictionary()
        self._warned: set[str] = set()
        self._unseen_warned = False
        self.plugin: BasePlugin = _SessionsPlugin(self._sessions)
        """The plugin that shows the summarizer each run's session: add it to
        ``App(plugins=[...])``."""

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(AgentSettings)

    # ------------------------------------------------------------------ public

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        """The compaction event of ``events``, its summary from the cache when it can be.

        Returns:
            An event whose ``actions.compaction`` covers ``events`` (from the first one's
            timestamp to the last one's), or ``None``: no events, nothing to summarize in
            them, or the summarizer failed (ADK then keeps the events as they are).

        Raises:
            StoreError: The store failed (with ``on_store_error="raise"``).
            SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        """
        if not events:
            return None
        span, thread, start = self._span(events)
        if not span:
            return None
        try:
            result = await self._compression.summarize_span(span, thread, start=start)
        except InvalidInput as exc:
            key = thread or ""
            if key not in self._warned:
                self._warned.add(key)
                logger.warning(
                    "CachedEventsSummarizer: the events of session %s cannot be summarized, so "
                    "they stay as they are: %s",
                    thread,
                    exc,
                )
            return None
        if result.summary is None:
            return None
        compaction = EventCompaction(
            start_timestamp=events[0].timestamp,
            end_timestamp=events[-1].timestamp,
            compacted_content=types.Content(role="model", parts=[types.Part(text=result.summary)]),
        )
        return Event(
            author="user", actions=EventActions(compaction=compaction), invocation_id=Event.new_id()
        )

    # ------------------------------------------------------------------ internals

    def _span(self, events: Sequence[Event]) -> tuple[list[Message], str | None, int]:
        """The messages to summarize, their thread and the first one's position in it."""
        window, ids = messages_of(events)
        session = self._session_of(ids)
        if session is None:
            if not self._unseen_warned:
                self._unseen_warned = True
                logger.warning(
                    "CachedEventsSummarizer: the session of these events was not seen (add "
                    "summarizer.plugin to App(plugins=[...])), so nothing is cached and every "
                    "compaction summarizes again"
                )
            return window, None, 0
        thread = self._threads.of(session)
        every, every_ids = messages_of(session.events)
        found = positions(every_ids)
        known = [found[event_id] for event_id in ids if event_id in found]
        if not known:
            return window, None, 0
        # ADK's seed (the previous summary, under a token threshold) is in no session: the
        # span then runs from the first message, the seed's summary being a cached prefix.
        seeded = not is_compaction(events[0]) and all(e.id != events[0].id for e in session.events)
        start = 0 if seeded else known[0]
        return every[start : known[-1] + 1], thread, start

    def _session_of(self, ids: Sequence[str]) -> Session | None:
        """The session seen by the plugin that holds the window's last event."""
        if not ids:
            return None
        last = ids[-1]
        for session in list(self._sessions.values()):
            if any(event.id == last for event in reversed(session.events)):
                return session
        return None

    def __repr__(self) -> str:
        return f"CachedEventsSummarizer(store={self.store!r})"


class _SessionsPlugin(BasePlugin):
    """Notes the session of each run, for the summarizer to find its events in."""

    def __init__(self, sessions: weakref.WeakValueDictionary[int, Session]) -> None:
        super().__init__(name="slimcache_sessions")
        self._sessions = sessions

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        session = invocation_context.session
        self._sessions[id(session)] = session
        return None


def _session_id(session: Session) -> Any:
    return session.id
