"""``CachedSummarySession``: any Agents SDK session, read through cached summaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.memory.session import Session
from agents.memory.session_settings import SessionSettings
from agents.models.interface import Model

from slimcache._exceptions import ConfigurationError
from slimcache.core.summarizer import Summarizer
from slimcache.frameworks.settings import SettingsSignature
from slimcache.openai_agents._compressing import ItemCompression
from slimcache.openai_agents._settings import OpenAIAgentsOptions, OpenAIAgentsSettings
from slimcache.stores import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedSummarySession"]


class CachedSummarySession(ItemCompression):
    """Wraps an Agents SDK ``Session`` so that a run reads the cached summary and the recent items.

    Give it to ``Runner.run(agent, input, session=...)`` in place of the session it wraps
    (``SQLiteSession``, ``RedisSession``, ``SQLAlchemySession``, your own). ``get_items()``
    returns the session's items compressed: once ``trigger`` is reached, the older ones as one
    summary message and the last ``keep`` verbatim, with the summaries cached in ``store`` under
    the session's id. Everything else (``add_items``, ``pop_item``, ``clear_session``, a
    ``get_items(limit)``) goes to the wrapped session as it is: the stored history is never
    rewritten, and works with any model the SDK can call. ``session_settings`` are the wrapped
    session's; :meth:`close` closes the store it opened, not the wrapped session.

    Args:
        session: The session to wrap.
        model: What writes the summaries: an Agents SDK ``Model``, a model name, or a slimcache
            summarizer ``(messages, context) -> str``.
        store: A store, a store URL (opened here and closed by :meth:`close`), or ``None``.
        thread_id: The thread the summaries are kept under (default: ``session.session_id``).
        **options: The settings, by keyword, as
            :class:`~slimcache.openai_agents.CachedSummarizationFilter` takes them (see
            :class:`~slimcache.openai_agents.OpenAIAgentsSettings`).

    Raises:
        ConfigurationError: For any invalid argument, before the store is opened.
        TypeError: A keyword that is not one of its arguments.
    """

    def __init__(
        self,
        session: Session,
        model: Model | str | Summarizer,
        store: Store | str | None = None,
        *,
        thread_id: str | None = None,
        **options: Unpack[OpenAIAgentsOptions],
    ) -> None:
        if not isinstance(session, Session):
            raise ConfigurationError(f"session must be an Agents SDK Session, got {session!r}")
        if thread_id is not None and not isinstance(thread_id, str):
            raise ConfigurationError(f"thread_id must be a string, got {thread_id!r}")
        self._start("CachedSummarySession", model, store, options)
        self.session = session
        self.session_id: str = session.session_id
        self.session_settings: SessionSettings | None = getattr(session, "session_settings", None)
        self._thread_id = thread_id or session.session_id

    # inspect.signature() and help() list each setting as a keyword, with its default.
    __signature__ = SettingsSignature(OpenAIAgentsSettings)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, the older ones summarized (``limit``: the wrapped session's
        last ``limit`` items, as they are)."""
        items = await self.session.get_items(limit)
        if limit is not None:
            return items
        return await self._compress_items(items, self._thread_id)

    async def add_items(self, items: list[Any]) -> None:
        """Add ``items`` to the wrapped session."""
        await self.session.add_items(items)

    async def pop_item(self) -> Any:
        """Remove and return the wrapped session's most recent item."""
        return await self.session.pop_item()

    async def clear_session(self) -> None:
        """Clear the wrapped session (the cached summaries stay until their TTL or a clear)."""
        await self.session.clear_session()
