"""Where the engine reports what it does to process-wide telemetry, when that is turned on.

Off by default: :data:`recorder` is ``None``, nothing is imported for it, and each place that
reports costs one attribute read. :func:`slimcache.telemetry.instrument` sets a
:class:`Recorder` (OpenTelemetry's), which then wraps four things: a compression
(:func:`observed`), a summarizer call, a store call and a wait for another worker's lease; and
counts background refreshes and the answers served while they run.

A recorder is given the thread id, never message text: it hashes the id itself. It is given the
summarizer and the store, to tell which model and which database each call reaches.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from slimcache.core.results import CompressionResult
    from slimcache.core.summarizer import SummarizerReport
    from slimcache.messages import TokenCounter

__all__ = ["Recorder", "observed", "recorder"]

_T = TypeVar("_T")
_S = TypeVar("_S")
_P = ParamSpec("_P")


class Recorder(Protocol):
    """Receives what the engine does; each method wraps one awaitable and returns its result."""

    def compress(
        self, thread_id: object, call: Awaitable[CompressionResult]
    ) -> Awaitable[CompressionResult]:
        """Observe one compression of ``thread_id`` (``None``: no thread)."""
        ...

    def summarize(
        self,
        thread_id: str | None,
        task: str,
        input_tokens: int,
        call: Awaitable[str],
        count: TokenCounter,
        summarizer: object,
        report: SummarizerReport,
    ) -> Awaitable[str]:
        """Observe one call of ``summarizer`` sent ``input_tokens`` (slimcache's count);
        ``count`` counts its reply, and ``report`` holds, once it ends, what the summarizer
        reports of the call: the requests it sent and the usage the provider reported, where
        the summarizer has it."""
        ...

    def store_call(
        self, store: object, method: Callable[..., Any], call: Awaitable[_T]
    ) -> Awaitable[_T]:
        """Observe one store call (one round trip) of ``method`` on ``store``."""
        ...

    def lease_waited(self) -> None:
        """Count one request that waited for another worker summarizing its thread."""
        ...

    def refresh(self, event: str) -> None:
        """Count one background refresh ``event``: ``started``, ``finished``, ``failed``,
        ``cancelled`` or ``dropped``."""
        ...

    def breaker(self, event: str, summarizer: object) -> None:
        """Count one event of ``summarizer``'s breaker (:mod:`slimcache.core.breaker`):
        ``opened``, ``closed``, or ``refused`` (a call not made while it was open)."""
        ...

    def stale_served(self, messages: int) -> None:
        """Record one answer served while its summary is extended in the background, lagging
        ``messages`` messages behind."""
        ...


recorder: Recorder | None = None
"""The process-wide recorder; ``None`` (the default) reports nothing."""


def observed(
    method: Callable[Concatenate[_S, _P], Coroutine[Any, Any, CompressionResult]],
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, CompressionResult]]:
    """Report each call of a compressor's ``compress_detailed(messages, *, thread_id=...)``."""

    async def compress_detailed(
        self: _S, /, *args: _P.args, **kwargs: _P.kwargs
    ) -> CompressionResult:
        if recorder is None:
            return await method(self, *args, **kwargs)
        thread_id = kwargs.get("thread_id")
        if thread_id is None and args:  # a Conversation carries its own
            thread_id = getattr(args[0], "thread_id", None)
        return await recorder.compress(thread_id, method(self, *args, **kwargs))

    functools.update_wrapper(compress_detailed, method)
    return compress_detailed
