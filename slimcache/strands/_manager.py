"""``CachedSummarizingConversationManager``: Strands' summarizing conversation manager, with
its summaries cached in your store.

Imported on first use by :mod:`slimcache.strands`, as it subclasses Strands'
``ConversationManager``.

A Strands manager reduces ``agent.messages`` in place and is never handed the messages it
removed: once it has, the agent's messages are the summary and the messages after it, and the
session's ``removed_message_count`` tells how many it stands for. So each reduction hands the
kit's span summaries (:meth:`~slimcache.frameworks.compression.AgentCompression.summarize_span`)
exactly what Strands removes: the first, the thread's first messages, from 0; each later one,
the previous summary and the messages after it, from the number of messages that summary
stands for. Every agent that reaches the same point of the same session asks for the same span,
and is served it from the store.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from strands.agent.conversation_manager import ConversationManager
from strands.agent.conversation_manager.compression.context_compression import (
    adjust_split_point_for_tool_pairs,
)
from strands.models.model import Model
from strands.types.content import Message as StrandsMessage
from strands.types.exceptions import ContextWindowOverflowException

from slimcache._exceptions import ConfigurationError, InvalidInput
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.compression import AgentCompression, CompressionOwner
from slimcache.frameworks.settings import SettingsSignature, settings_from
from slimcache.frameworks.summarizers import summarizer_for
from slimcache.frameworks.threads import ThreadIds
from slimcache.stores import Store
from slimcache.strands._convert import from_strands
from slimcache.strands._settings import StrandsOptions, StrandsSettings
from slimcache.strands._summarizer import StrandsSummarizer

if TYPE_CHECKING:
    from strands.agent.agent import Agent
    from strands.agent.conversation_manager import ProactiveCompressionConfig
    from typing_extensions import Unpack

__all__ = ["CachedSummarizingConversationManager"]

logger = logging.getLogger("slimcache")

_OWNER = "CachedSummarizingConversationManager"
# What model may be besides a slimcache summarizer, as an error names it.
_MODELS = "a Strands Model, a Bedrock model id"


def _session_of(agent: Agent) -> str:
    return agent.session_id


class CachedSummarizingConversationManager(CompressionOwner, ConversationManager):
    """Strands' ``SummarizingConversationManager``, with the summaries cached in your store.

    Give it as ``Agent(conversation_manager=...)``. When the model's context window overflows
    (or, with ``proactive_compression``, before it would), the oldest ``summary_ratio`` of the
    agent's messages, never the last ``preserve_recent_messages``, are replaced in
    ``agent.messages`` by one summary message, as Strands' manager does; a tool use and its
    result are never parted. The summary comes from slimcache: served from ``store`` when any
    agent has summarized the same messages of the same session, extended with only the
    messages after the longest cached one otherwise, with one summarizer call however many
    agents ask at once. The session (``FileSessionManager``, ``S3SessionManager``, ...) keeps
    every message, and restores the summary with the manager's state.

    Args:
        model: What writes the summaries: a Strands ``Model``, a Bedrock model id (as
            ``Agent(model=...)`` takes one), or a slimcache summarizer
            ``(messages, context) -> str``.
        store: A store, a store URL (opened here and closed by :meth:`close`), or ``None`` for
            one in this process.
        thread_id: The thread the summaries are kept under (default: ``agent.session_id``, the
            session manager's id; without a session manager Strands makes one for each agent,
            so agents built from the same history share summaries only with a ``thread_id``).
        proactive_compression: Strands' own: ``True`` or ``{"compression_threshold": 0.8}``
            reduces the history before a model call once it fills that share of the model's
            context window (best effort: a failure leaves the history as it is).
        **options: The settings, by keyword (``summary_ratio=0.3``,
            ``preserve_recent_messages=10``, ``namespace="app"``, ``lease_ttl=3.0``, ...): those
            documented in :class:`~slimcache.strands.StrandsSettings`, and every setting of
            :class:`~slimcache.SummarizeCompressor` it passes on, with the compressor's meaning
            and default.

    When the summarizer fails (``on_summarizer_error`` other than ``"raise"``), or slimcache
    cannot summarize the history (a shape no rule covers; a warning once per thread, counted in
    :attr:`uncompressible`), nothing is replaced. A reduction that replaces nothing raises
    Strands' ``ContextWindowOverflowException`` when Strands asked for it on an overflow, as
    Strands' manager does, and leaves the history as it is when it was proactive.

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
        ValueError: ``proactive_compression`` is invalid (Strands' own check).
        MissingExtraError: ``strands-agents`` is not installed (on import).
    """

    def __init__(
        self,
        model: Model | str | Summarizer,
        store: Store | str | None = None,
        *,
        thread_id: str | None = None,
        proactive_compression: bool | ProactiveCompressionConfig | None = None,
        **options: Unpack[StrandsOptions],
    ) -> None:
        ConversationManager.__init__(self, proactive_compression=proactive_compression)
        if thread_id is not None and not isinstance(thread_id, str):
            raise ConfigurationError(f"thread_id must be a string, got {thread_id!r}")
        settings = self._settings = settings_from(StrandsSettings, _OWNER, options)
        make = functools.partial(StrandsSummarizer, on_truncated=settings.on_truncated)
        summarizer = summarizer_for(model, Model, make, what=_MODELS)
        self.summary_ratio = settings.summary_ratio
        self.preserve_recent_messages = settings.preserve_recent_messages
        self._threads: ThreadIds[Agent] = ThreadIds(
            thread_id, owner=_OWNER, context="Agent", carried=_session_of
        )
        self._summary_message: StrandsMessage | None = None
        self._warned: set[str] = set()
        self.uncompressible = 0
        """How many reductions replaced nothing because slimcache could not summarize the
        history."""
        self._compression = AgentCompression(summarizer, store, settings)

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(StrandsSettings)

    @property
    def settings(self) -> StrandsSettings:
        """The settings, as given."""
        return self._settings

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Nothing: as Strands' manager, this one reduces only when Strands asks
        (:meth:`reduce_context`)."""

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Replace the oldest ``summary_ratio`` of ``agent.messages`` by their summary.

        Args:
            agent: The agent whose messages are reduced, in place.
            e: The overflow Strands is recovering from, or ``None`` for a proactive reduction.
            **kwargs: Strands' own, unused.

        Raises:
            ContextWindowOverflowException: Nothing could be replaced and ``e`` is set.
            StoreError: The store failed (with ``on_store_error="raise"``).
            SummarizerError: The summarizer failed (with ``on_summarizer_error="raise"``).
        """
        why = self._reduce(agent)
        if why is None:
            return
        if e is not None:
            raise ContextWindowOverflowException(f"{_OWNER}: {why}") from e
        logger.debug("%s: a proactive reduction replaced nothing: %s", _OWNER, why)

    def get_state(self) -> dict[str, Any]:
        """The state a Strands session keeps: the summary message and how many messages it
        stands for (``removed_message_count``), as Strands' manager keeps them."""
        return {"summary_message": self._summary_message, **super().get_state()}

    def restore_from_session(self, state: dict[str, Any]) -> list[StrandsMessage] | None:
        """Take the state a session kept; returns the summary message, which the session puts
        before the messages it restores."""
        super().restore_from_session(state)
        self._summary_message = state.get("summary_message")
        return [self._summary_message] if self._summary_message else None

    # ------------------------------------------------------------------ internals

    def _reduce(self, agent: Agent) -> str | None:
        """Reduce ``agent.messages``; ``None`` once done, else why nothing was replaced."""
        messages = agent.messages
        summary = self._summary_message
        start = 1 if summary is not None and messages and messages[0] == summary else 0
        count = max(1, int(len(messages) * self.summary_ratio))
        count = min(count, len(messages) - self.preserve_recent_messages)
        if count <= start:
            return "too few messages to summarize"
        count = adjust_split_point_for_tool_pairs(messages, count)
        thread = self._threads.of(agent)
        # The previous summary stands at the index of the first message it does not cover.
        first = self.removed_message_count if start else 0
        dicts = from_strands(messages[:count])
        try:
            result = self._compression.summarize_span_blocking(dicts, thread, start=first)
        except InvalidInput as exc:
            self.uncompressible += 1
            if str(thread) not in self._warned:
                self._warned.add(str(thread))
                logger.warning(
                    "%s: slimcache cannot summarize the messages of thread %s, so they are "
                    "left as they are: %s",
                    _OWNER,
                    thread,
                    exc,
                )
            return f"slimcache cannot summarize these messages: {exc}"
        if result.summary is None:
            return "the summarizer failed (see its warning)"
        text = str(result.messages[0]["content"])
        summary = {"role": "user", "content": [{"text": text}]}
        self.removed_message_count += count - start
        self._summary_message = summary
        messages[:] = [summary, *messages[count:]]
        return None
