"""Process-wide OpenTelemetry metrics and spans, for servers that build a compressor per request.

``compressor.stats`` belongs to one compressor and goes when it goes. Call :func:`instrument`
once at start-up and every compression, summarizer call and store call of the process is
reported to OpenTelemetry, through the ``opentelemetry-api`` package (``pip install
"slimcache[otel]"``); your SDK set-up decides where the figures go::

    import slimcache.telemetry

    slimcache.telemetry.instrument()  # the global meter and tracer providers

Until it is called nothing is imported for it and nothing is recorded. Summarizer calls and
store calls are reported under OpenTelemetry's semantic conventions, version 1.37 (the meter's
and the tracer's ``schema_url``): ``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration`` and a CLIENT span named ``{gen_ai.operation.name}
{gen_ai.request.model}`` per summarizer call, ``db.client.operation.duration`` and a CLIENT
span named ``{db.operation.name} {target}`` per store call; what is
particular to a cache (requests by outcome, tokens saved against naive re-summarization, lease
waits, compression latency) under ``slimcache.*``. The guide "Watch hit rate, tokens saved and
store latency" lists every instrument. No metric has a thread id or message text among its
attributes; spans carry ``slimcache.thread.hash``, the first 16 hex digits of the thread id's
SHA-256.

``gen_ai.provider.name``, which the conventions require on every GenAI point, is the provider
the summarizer names (slimcache's summarizers and the framework models they wrap do); for one
that names none, a plain summarizer function, it is the ``provider_name`` given to
:func:`instrument`, else :data:`SCOPE` (``"slimcache"``). The tokens a call used
(``gen_ai.client.token.usage`` and the span's ``gen_ai.usage.*``) are the provider's usage,
where the summarizer has it (:class:`~slimcache.core.summarizer.SummarizerReport`); slimcache's
own count is reported there only under slimcache's provider name or with
``estimated_usage=True``, as the conventions allow no estimate passed off as the provider's
usage. slimcache's count of every call stays on the span, as ``slimcache.summarizer.*``.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import importlib.metadata
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from slimcache._exceptions import ConfigurationError
from slimcache._install import pip_install
from slimcache.core import recorder as _hooks
from slimcache.stores import DatabaseTarget

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter, MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

    from slimcache.core.results import CompressionResult
    from slimcache.core.summarizer import SummarizerReport
    from slimcache.messages import TokenCounter

__all__ = ["SCHEMA_URL", "SCOPE", "instrument", "instrumented", "thread_hash", "uninstrument"]

SCOPE = "slimcache"
"""The instrumentation scope: the meter's and the tracer's name (their version is slimcache's),
and the ``gen_ai.provider.name`` of a summarizer that names no provider, unless
:func:`instrument` is given one."""

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
"""The semantic conventions the metrics and spans follow, as the meter and the tracer say."""


# Latency buckets in seconds, from a memory-store hit to a slow model call.
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# The buckets the semantic conventions advise for each of their histograms.
_DB_SECONDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)
_GEN_AI_SECONDS = (
    *(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64),
    *(1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92),
)
_GEN_AI_TOKENS = tuple(4**power for power in range(14))  # 1, 4, 16, ... 67108864

# What gen_ai.operation.name says of every summarizer call: slimcache's summarizers, and the
# framework models it wraps, send one chat request per call.
_CHAT = "chat"

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
    provider_name: str | None = None,
    estimated_usage: bool = False,
) -> None:
    """Report every compression, summarizer call and store call of this process.

    Calling it again replaces the providers.

    Args:
        meter_provider: Where metrics go (default: OpenTelemetry's global one).
        tracer_provider: Where spans go (default: OpenTelemetry's global one).
        provider_name: The ``gen_ai.provider.name`` of the calls of a summarizer that names no
            provider (a plain function): the provider it calls, in OpenTelemetry's words
            (``"openai"``, ``"aws.bedrock"``). Default: :data:`SCOPE`, ``"slimcache"``.
        estimated_usage: Report slimcache's count of a call's tokens as its usage
            (``gen_ai.client.token.usage``, ``gen_ai.usage.*``) when the summarizer has not the
            provider's. Without it, only calls under slimcache's own provider name are.

    Raises:
        ConfigurationError: ``provider_name`` is not a non-empty string, or
            ``estimated_usage`` not a bool.
        ImportError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
    """
    if provider_name is not None and (not isinstance(provider_name, str) or not provider_name):
        raise ConfigurationError(
            f"provider_name must be a non-empty string, got {type(provider_name).__name__}"
        )
    if not isinstance(estimated_usage, bool):
        raise ConfigurationError(
            f"estimated_usage must be True or False, got {type(estimated_usage).__name__}"
        )
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise ImportError(f"slimcache.telemetry needs its extra: {pip_install('otel')}") from None
    version = _version()
    meters = meter_provider or metrics.get_meter_provider()
    tracers = tracer_provider or trace.get_tracer_provider()
    meter = meters.get_meter(SCOPE, version, schema_url=SCHEMA_URL)
    tracer = tracers.get_tracer(SCOPE, version, schema_url=SCHEMA_URL)
    _hooks.recorder = _OpenTelemetryRecorder(meter, tracer, provider_name or SCOPE, estimated_usage)


def _version() -> str | None:
    """The installed distribution's version, which the package's ``__version__`` repeats."""
    try:
        return importlib.metadata.version(SCOPE)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return None


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


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _model_attributes(summarizer: object, fallback: str) -> dict[str, str]:
    """The ``gen_ai.*`` attributes of a summarizer's calls: the operation, the provider (or
    ``fallback``, when the summarizer tells none), and the model where it tells it.

    A summarizer tells them with a ``model`` attribute, a model name (slimcache's own
    summarizers) or a framework's model object that has a ``model_name`` or ``model`` (a
    LangChain chat model, also one bound with ``with_retry``, a Pydantic AI model), and a
    ``provider`` name of its own or its model's ``system`` (Pydantic AI's name for it).
    """
    attributes = {"gen_ai.operation.name": _CHAT, "gen_ai.provider.name": fallback}
    try:
        model: Any = getattr(summarizer, "model", None)
        while getattr(model, "bound", None) is not None:  # a LangChain binding (with_retry)
            model = model.bound
        name = _text(model) or _text(getattr(model, "model_name", None))
        name = name or _text(getattr(model, "model", None))
        provider = _text(getattr(summarizer, "provider", None))
        provider = provider or _text(getattr(model, "system", None))
    except Exception:  # a broken property tells nothing
        return attributes
    if provider is not None:
        attributes["gen_ai.provider.name"] = provider
    if name is not None:
        attributes["gen_ai.request.model"] = name
    return attributes


def _database_target(store: object) -> DatabaseTarget:
    """What ``store`` says its calls reach; a store that does not say: its class name."""
    try:
        target = getattr(store, "database_target", None)
    except Exception:  # a broken property tells nothing
        target = None
    return target if isinstance(target, DatabaseTarget) else DatabaseTarget(type(store).__name__)


@functools.lru_cache(maxsize=256)
def _db_attributes(target: DatabaseTarget) -> tuple[str, dict[str, str | int]]:
    """The span name's ``{target}`` and the ``db.*`` and ``server.*`` attributes of ``target``."""
    attributes: dict[str, str | int] = {"db.system.name": target.system}
    named = {
        "db.collection.name": target.collection,
        "db.namespace": target.namespace,
        "server.address": target.address,
        "server.port": target.port,
    }
    attributes.update({key: value for key, value in named.items() if value is not None})
    where = target.collection or target.namespace
    if where is None and target.address is not None:
        where = target.address if target.port is None else f"{target.address}:{target.port}"
    return where or "", attributes


def _operation(method: Callable[..., Any]) -> str:
    """``db.operation.name``: the store method; a batch of operations is ``BATCH``."""
    name = getattr(method, "__name__", "call")
    return "BATCH" if name == "batch" else name


class _OpenTelemetryRecorder:
    """The :class:`~slimcache.core.recorder.Recorder` that reports to OpenTelemetry."""

    def __init__(self, meter: Meter, tracer: Tracer, provider: str, estimates: bool) -> None:
        from opentelemetry.trace import SpanKind

        self._provider = provider
        self._estimates = estimates
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
        self._summarizer_requests = meter.create_counter(
            "slimcache.summarizer.requests",
            "{request}",
            "Requests the summarizer calls sent to their model, retries included",
        )
        self._breaker = meter.create_counter(
            "slimcache.summarizer.breaker",
            "{event}",
            "A failing summarizer's breaker opened, closed, or refused a call while open",
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_GEN_AI_TOKENS,
        )
        self._summarizer_seconds = meter.create_histogram(
            "gen_ai.client.operation.duration",
            "s",
            "GenAI operation duration",
            explicit_bucket_boundaries_advisory=_GEN_AI_SECONDS,
        )
        self._store_seconds = meter.create_histogram(
            "db.client.operation.duration",
            "s",
            "Duration of database client operations",
            explicit_bucket_boundaries_advisory=_DB_SECONDS,
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
                        "slimcache.summarizer.requests": result.summarizer_requests,
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
        summarizer: object,
        report: SummarizerReport,
    ) -> str:
        """Observe one summarizer call: a CLIENT span named as the GenAI conventions name it,
        its duration, the requests it sent (``report``) and the tokens it used (see the module
        docstring)."""
        labels: dict[str, str] = {
            **_model_attributes(summarizer, self._provider),
            "slimcache.summarizer.task": task,
        }
        attributes: dict[str, Any] = {**labels, "slimcache.summarizer.input_tokens": input_tokens}
        if thread_id is not None:
            attributes["slimcache.thread.hash"] = thread_hash(thread_id)
        model = labels.get("gen_ai.request.model")
        name = _CHAT if model is None else f"{_CHAT} {model}"
        started = time.perf_counter()
        failed: dict[str, str] = {}
        try:
            with self._tracer.start_as_current_span(
                name, kind=self._client, attributes=attributes
            ) as span:
                try:
                    summary = await call
                except BaseException as exc:
                    failed = {"error.type": _error_type(exc)}
                    span.set_attribute("error.type", failed["error.type"])
                    raise
                output = count(summary)
                span.set_attribute("slimcache.summarizer.output_tokens", output)
                # Every request the call sent carried its input: a retry's too.
                sent = input_tokens * max(report.requests, 1)
                used = self._usage(labels, report, sent, output)
                for kind, tokens in zip(("input", "output"), used, strict=True):
                    if tokens is not None:
                        span.set_attribute(f"gen_ai.usage.{kind}_tokens", tokens)
                        self._tokens.record(tokens, {**labels, "gen_ai.token.type": kind})
                return summary
        finally:
            seconds = time.perf_counter() - started
            self._summarizer_seconds.record(seconds, {**labels, **failed})
            self._summarizer_requests.add(max(report.requests, 1), {**labels, **failed})

    def _usage(
        self, labels: dict[str, str], report: SummarizerReport, sent: int, output: int
    ) -> tuple[int | None, int | None]:
        """The input and output tokens to report as a call's usage: the provider's, where the
        summarizer has them; else slimcache's count, under its own name or when asked for."""
        if report.input_tokens is not None or report.output_tokens is not None:
            return report.input_tokens, report.output_tokens
        if self._estimates or labels["gen_ai.provider.name"] == SCOPE:
            return sent, output
        return None, None

    async def store_call(
        self, store: object, method: Callable[..., Any], call: Awaitable[_T]
    ) -> _T:
        """Observe one store round trip."""
        operation = _operation(method)
        where, target = _db_attributes(_database_target(store))
        labels: dict[str, str | int] = {**target, "db.operation.name": operation}
        attributes: dict[str, Any] = dict(labels)
        if (hashed := _THREAD.get()) is not None:
            attributes["slimcache.thread.hash"] = hashed
        name = f"{operation} {where}" if where else operation
        started = time.perf_counter()
        try:
            with self._tracer.start_as_current_span(
                name, kind=self._client, attributes=attributes
            ) as span:
                try:
                    return await call
                except BaseException as exc:
                    labels = {**labels, "error.type": _error_type(exc)}
                    span.set_attribute("error.type", labels["error.type"])
                    raise
        finally:
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

    def breaker(self, event: str, summarizer: object) -> None:
        """Count one event of a summarizer's breaker."""
        labels = {
            **_model_attributes(summarizer, self._provider),
            "slimcache.breaker.event": event,
        }
        self._breaker.add(1, labels)
