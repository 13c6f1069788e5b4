"""Which thread a framework's model call belongs to: one rule for every integration.

An integration is given a ``thread_id`` (a string, or a function of the call's context, such
as Pydantic AI's ``RunContext``), or reads one the call carries (a run's ``conversation_id``, a
LangChain run's ``configurable.thread_id``). A call with none is compressed without the cache,
and the integration says so once, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar, Union

from slimcache._exceptions import ConfigurationError

__all__ = ["ThreadIds"]

logger = logging.getLogger("slimcache")

ContextT = TypeVar("ContextT")


class ThreadIds(Generic[ContextT]):
    """The thread of each call an integration compresses.

    Args:
        given: The integration's ``thread_id``: a string, a function of the call's context
            (returning ``None`` to fall back), or ``None``.
        owner: The integration's class name, for the warning.
        context: What the function is given, as the error names it (``"RunContext"``).
        carried: Reads the thread the call itself carries, when ``given`` names none.
        missing: Why a call has no thread, as the warning says it.
        call: What summarizes again without the cache (``"model call"``), for the warning.

    Raises:
        ConfigurationError: ``given`` is neither a string, a function nor ``None``.
    """

    def __init__(
        self,
        given: Union[str, Callable[[ContextT], str | None], None],  # noqa: UP007
        *,
        owner: str,
        context: str,
        carried: Callable[[ContextT], object] | None = None,
        missing: str = "no thread_id",
        call: str = "model call",
    ) -> None:
        if given is not None and not isinstance(given, str) and not callable(given):
            raise ConfigurationError(
                f"thread_id must be a string or a function of the {context}, got {given!r}"
            )
        self._given = given
        self._carried = carried
        self._warning = (
            f"{owner}: {missing}, so nothing is cached and every {call} summarizes again"
        )
        self._warned = False

    def of(self, context: ContextT) -> str | None:
        """The thread of the call with ``context``, or ``None`` (warned of once)."""
        given = self._given
        found: object = given(context) if callable(given) else given
        if found is None and self._carried is not None:
            found = self._carried(context)
        if found is None:
            if not self._warned:
                self._warned = True
                logger.warning(self._warning)
            return None
        return str(found)
