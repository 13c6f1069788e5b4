"""Process-wide OpenTelemetry metrics and spans, for servers that build a compressor per request.

``compressor.stats`` belongs to one compressor and goes when it goes. Call :func:`instrument`
once at start-up and every compression, summarizer call and store call of the process is
reported to OpenTelemetry, through the ``opentelemetry-api`` package (``pip install
"slimcache[otel]"``); your SDK set-up decides where the figures go::

    import slimcache.telemetry

    slimcache.telemetry.instrument()  # the global meter and tracer providers

Until it is called nothing is imported for it and nothing is recorded. The metrics (counters of
requests by outcome, summarizer calls and tokens, tokens saved against naive re-summarization,
store round trips and errors, lease waits; histograms of compression and store latency) and
the spans are listed in the guide "Watch hit rate, tokens saved and store latency". No metric
has a thread id or message text among its attributes; spans carry ``slimcache.thread.hash``, the
first 16 hex digits of the thread id's SHA-256.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from slimcache.core import recorder as _hooks

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter, MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

    from slimcache.core.results import CompressionResult
    from slimcache.messages import TokenCounter

__all__ = ["EXTRA_MESSAGE", "SCOPE", "instrument", "instrumented", "thread_hash", "uninstrument"]

SCOPE = "slimcache"
"""The instrumentation scope: the meter's and the tracer's name."""

EXTRA_MESSAGE = 'slimcache.telemetry needs its extra: pip install "slimcache[otel]"'

# Latency buckets in seconds, from a memory-store hit to a slow model call.
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# The hashed thread id of the compression running in this context, for its store spans.
_THREAD: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "slimcache_thread_hash", default=None
)

_T = TypeVar("_T")


def thread_hash(thread_id: object) -> str:
    """The hashed thread id spans carry: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(str(thread_id).encode()).hexdigest()[:16]


def instrument(
    *,
    meter_provider: MeterProvider | None = None,
    tracer_provider: TracerProvider | None = None,
) -> None:
    """Report every compression, summarizer call and store call of this process.

    Calling it again replaces the providers.

    Args:
        meter_provider: Where metrics go (default: OpenTelemetry's global one).
        tracer_provider: Where spans go (default: OpenTelemetry's global one).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
    """
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise ImportError(EXTRA_MESSAGE) from None
    meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE)
    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(SCOPE)
    _hooks.recorder = _OpenTelemetryRecorder(meter, tracer)


def uninstrument() -> None:
    """Stop reporting (what was recorded stays with the providers)."""
    _hooks.recorder = None


def instrumented() -> bool:
    """Whether :func:`instrument` is in force."""
    return _hooks.recorder is not None


def _error_type(exc: BaseException) -> str:
    """``error.type``: the exception's class, or its cause's when slimcache wrapped it."""
    cause = exc.__cause__
    if cause is not None and type(exc).__module__.startswith("slimcache"):
        return type(cause).__qualname__
    return type(exc).__qualname__


class _OpenTelemetryRecorder:
    """The :class:`~slimcache.core.recorder.Recorder` that reports to OpenTelemetry."""

    def __init__(self, meter: Meter, tracer: Tracer) -> None:
        from opentelemetry.trace import SpanKind

        self._tracer = tracer
        self._client = SpanKind.CLIENT
        self._requests = meter.create_counter(
            "slimcache.compress.requests", "{request}", "Compressions, by outcome"
        )
        self._compress_seconds = meter.create_histogram(
            "slimcache.compress.duration",
            "s",
            "Time one compression took",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self._naive = meter.create_counter(
            "slimcache.compress.naive_tokens",
            "{token}",
            "Tokens re-summarizing everything outside the window on each request would send",
        )
        self._saved = meter.create_up_down_counter(
            "slimcache.compress.tokens_saved",
            "{token}",
            "Naive tokens minus the tokens sent to the summarizer",
        )
        self._summarizer_calls = meter.create_counter(
            "slimcache.summarizer.calls", "{call}", "Summarizer calls, by task"
        )
        self._summarizer_tokens = meter.create_counter(
            "slimcache.summarizer.tokens",
            "{token}",
            "Tokens sent to and returned by the summarizer",
        )
        self._store_calls = meter.create_counter(
            "slimcache.store.calls", "{call}", "Store round trips, by operation"
        )
        self._store_seconds = meter.create_histogram(
            "slimcache.store.duration",
            "s",
            "Time one store round trip took",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self._lease_waits = meter.create_counter(
            "slimcache.lease.waits",
            "{request}",
            "Requests that waited for another worker summarizing the same thread",
        )
        self._refreshes = meter.create_counter(
            "slimcache.refresh.events",
            "{refresh}",
            "Background refreshes started, finished, failed, cancelled or dropped",
        )
        self._stale = meter.create_histogram(
            "slimcache.refresh.stale_messages",
            "{message}",
            "Messages an answer's summary lagged behind while it was extended in the background",
        )

    async def compress(
        self, thread_id: object, call: Awaitable[CompressionResult]
    ) -> CompressionResult:
        """Observe one compression."""
        hashed = None if thread_id is None else thread_hash(thread_id)
        attributes = {} if hashed is None else {"slimcache.thread.hash": hashed}
        token = _THREAD.set(hashed)
        started = time.perf_counter()
        labels: dict[str, str] = {}
        try:
            with self._tracer.start_as_current_span(
                "slimcache.compress", attributes=attributes
            ) as span:
                try:
                    result = await call
                except BaseException as exc:
                    labels = {"slimcache.outcome": "error", "error.type": _error_type(exc)}
                    raise
                labels = {"slimcache.outcome": result.outcome}
                span.set_attributes(
                    {
                        "slimcache.outcome": result.outcome,
                        "slimcache.summarizer.calls": result.summarizer_calls,
                        "slimcache.summarizer.input_tokens": result.input_tokens,
                        "slimcache.compress.naive_tokens": result.naive_tokens,
                    }
                )
                if result.naive_tokens:
                    self._naive.add(result.naive_tokens)
                    self._saved.add(result.naive_tokens - result.input_tokens)
                return result
        finally:
            _THREAD.reset(token)
            self._requests.add(1, labels)
            self._compress_seconds.record(time.perf_counter() - started, labels)

    async def summarize(
        self,
        thread_id: str | None,
        task: str,
        input_tokens: int,
        call: Awaitable[str],
        count: TokenCounter,
    ) -> str:
        """Observe one summarizer call."""
        labels = {"slimcache.summarizer.task": task}
        attributes: dict[str, Any] = {**labels, "slimcache.summarizer.input_tokens": input_tokens}
        if thread_id is not None:
            attributes["slimcache.thread.hash"] = thread_hash(thread_id)
        self._summarizer_tokens.add(input_tokens, {"slimcache.token.type": "input"})
        with self._tracer.start_as_current_span(
            "slimcache.summarize", attributes=attributes
        ) as span:
            try:
                summary = await call
            except BaseException as exc:
                self._summarizer_calls.add(1, {**labels, "error.type": _error_type(exc)})
                raise
            self._summarizer_calls.add(1, labels)
            output = count(summary)
            span.set_attribute("slimcache.summarizer.output_tokens", output)
            self._summarizer_tokens.add(output, {"slimcache.token.type": "output"})
            return summary

    async def store_call(
        self, store: object, method: Callable[..., Any], call: Awaitable[_T]
    ) -> _T:
        """Observe one store round trip."""
        operation = getattr(method, "__name__", "call")
        labels = {
            "slimcache.store.operation": operation,
            "slimcache.store.type": type(store).__name__,
        }
        attributes = dict(labels)
        if (hashed := _THREAD.get()) is not None:
            attributes["slimcache.thread.hash"] = hashed
        started = time.perf_counter()
        try:
            name = f"slimcache.store.{operation}"
            with self._tracer.start_as_current_span(name, kind=self._client, attributes=attributes):
                return await call
        except BaseException as exc:
            labels = {**labels, "error.type": _error_type(exc)}
            raise
        finally:
            self._store_calls.add(1, labels)
            self._store_seconds.record(time.perf_counter() - started, labels)

    def lease_waited(self) -> None:
        """Count a wait for another worker's lease."""
        self._lease_waits.add(1)

    def refresh(self, event: str) -> None:
        """Count one background refresh event."""
        self._refreshes.add(1, {"slimcache.refresh.event": event})

    def stale_served(self, messages: int) -> None:
        """Record how far behind an answer served before its refresh was."""
        self._stale.record(messages)
