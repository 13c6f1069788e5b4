"""The settings every agent integration takes: one frozen object, each setting written once.

:class:`AgentSettings` holds the keywords that LangChain's ``CachedSummarizationMiddleware``,
Pydantic AI's ``CachedSummarization`` and the Agents SDK's ``CachedSummarizationFilter`` and
``CachedSummarySession`` share: those of the integrations' own (``trigger``, ``keep`` and
``ceiling`` in sizes, ``summary_placement``, ``on_summarizer_error``, ``on_truncated``), and
every setting of :class:`~slimcache.SummarizeCompressor` they pass on as it is
(:class:`~slimcache.core.settings.compressor.SharedOptions`: ``lease_ttl``, ``strategy``,
``namespace``...), kept as given, so that its default and its check are the compressor's.
:class:`AgentOptions` types them all as keyword arguments (``**options: Unpack[AgentOptions]``),
so a type checker checks them where they are given. An integration with settings of its own
subclasses both (the Agents SDK adds ``context_window``).

An integration builds its settings with :func:`settings_from`, which refuses a keyword that is
not a setting as Python refuses one, and shows them in its signature with
:class:`SettingsSignature`, so :func:`inspect.signature` and ``help()`` list every keyword with
its default (a compressor setting's from :data:`~slimcache.core.settings.compressor.DEFAULTS`).
It hands the object to :class:`~slimcache.frameworks.compression.AgentCompression`, which reads
what it needs and gives the compressor the rest (:func:`compressor_options`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from slimcache._exceptions import ConfigurationError
from slimcache.core.settings.checks import check_choice
from slimcache.core.settings.compressor import DEFAULTS, CompressorOptions, SharedOptions
from slimcache.core.truncation import OnTruncated, check_on_truncated
from slimcache.frameworks.sizes import ContextSize, TriggerSpec

__all__ = [
    "DEFAULT_KEEP",
    "DEFAULT_TRIGGER",
    "AgentOptions",
    "AgentSettings",
    "OnSummarizerError",
    "SettingsSignature",
    "SummaryPlacement",
    "compressor_options",
    "setting_names",
    "settings_from",
    "signature",
]

OnSummarizerError = Literal["degrade", "uncompressed", "raise"]
"""What an integration does when the summarizer fails: serve the last cached summary and the
messages since (``"degrade"``), send every message (``"uncompressed"``), or raise."""

SummaryPlacement = Literal["system", "user"]
"""Where an integration puts the summary: as a system or as a user message."""

DEFAULT_TRIGGER: TriggerSpec = ("messages", 50)
"""Summarize once the verbatim messages reach 50."""

DEFAULT_KEEP: ContextSize = ("messages", 20)
"""Keep the last 20 messages verbatim, as LangChain's middleware does."""

_PLACEMENTS = get_args(SummaryPlacement)
_ON_SUMMARIZER_ERROR = get_args(OnSummarizerError)

# The compressor's settings an integration passes on as they are, in the compressor's order.
_SHARED_TYPES = {
    name: getattr(typed, "__forward_arg__", typed)  # as the compressor's module wrote it
    for name, typed in SharedOptions.__annotations__.items()
}
_SHARED = tuple(_SHARED_TYPES)


class AgentOptions(SharedOptions, total=False):
    """The keyword arguments every agent integration takes, each with the type of the setting
    it sets: the compressor's (:class:`~slimcache.core.settings.compressor.SharedOptions`) and
    the :class:`AgentSettings` attributes of the integrations' own."""

    trigger: TriggerSpec | None
    keep: ContextSize
    ceiling: ContextSize | None
    summary_placement: SummaryPlacement
    on_summarizer_error: OnSummarizerError
    on_truncated: OnTruncated


@dataclass(frozen=True)
class AgentSettings:
    """The settings every agent integration takes, by keyword, with their defaults.

    Every setting of :class:`~slimcache.SummarizeCompressor` that the integration passes on as
    it is (``strategy``, ``max_summary_tokens``, ``token_counter``, ``prompts``, ``namespace``,
    ``ttl``, ``lock_wait``, ``lease_ttl``, ``store_timeout``, ``refresh``, the hooks, ...; see
    :class:`~slimcache.core.settings.compressor.SharedOptions`) is taken by its keyword, with
    the compressor's meaning and default, and kept in ``compressor`` as given. The attributes
    below are the integrations' own, or mean more here.

    Building one checks the choices only the integrations have (``summary_placement``,
    ``on_summarizer_error``, ``on_truncated``); the sizes and the compressor's settings are
    checked by the integration when it builds its compressor, which it does before it opens its
    store. A message count counts the messages as the integration sees them (see its class).

    Attributes:
        trigger: When to summarize: ``("messages", n)`` when the verbatim messages reach
            ``n``, ``("tokens", n)`` when all the messages sent do, ``("fraction", f)`` of the
            model's context window; a dict of sizes that must all be reached, or a list of which
            any one suffices. ``None`` never summarizes: only what is cached is served.
        keep: How much stays verbatim once summarized: ``("messages", n)``, ``("tokens", n)``
            or ``("fraction", f)``; below a trigger of the same unit.
        ceiling: With ``refresh="background"`` (and required then), how much the compressed
            input may hold while the summary is extended behind the call, in the sizes of
            ``trigger`` (``("messages", 80)``, ``("tokens", 6000)``, ...); above a trigger of
            the same unit.
        summary_placement: ``"system"`` (default) or ``"user"``: a system or user prompt part
            after the agent's own (Pydantic AI), the role of the summary message (the Agents
            SDK).
        on_summarizer_error: ``"degrade"`` (default): when the summarizer fails, the model gets
            the newest cached summary that still matches the history and the messages after it
            (all messages when none is cached), with a warning, and ``stats`` counts what was
            served so; ``"uncompressed"``: all messages; ``"raise"``.
        on_truncated: When ``model`` is a framework's model or a model name: a reply still cut
            at the budget after asking for a shorter one is kept with a warning (``"accept"``,
            default; ``stats.truncated_accepted`` counts it) or is a summarizer failure
            (``"raise"``). A slimcache summarizer given as ``model`` has its own.
        compressor: The compressor's settings given, by keyword (those not given take the
            compressor's defaults).

    Raises:
        ConfigurationError: ``summary_placement``, ``on_summarizer_error`` or ``on_truncated``
            is not one of its choices, or ``refresh="background"`` has no ``ceiling``.
    """

    trigger: TriggerSpec | None = DEFAULT_TRIGGER
    keep: ContextSize = DEFAULT_KEEP
    ceiling: ContextSize | None = None
    summary_placement: SummaryPlacement = "system"
    on_summarizer_error: OnSummarizerError = "degrade"
    on_truncated: OnTruncated = "accept"
    compressor: SharedOptions = field(default_factory=lambda: SharedOptions())

    def __post_init__(self) -> None:
        check_choice("summary_placement", self.summary_placement, _PLACEMENTS)
        if self.on_summarizer_error not in _ON_SUMMARIZER_ERROR:
            raise ConfigurationError(
                "on_summarizer_error must be 'degrade', 'uncompressed' or 'raise', "
                f"got {self.on_summarizer_error!r}"
            )
        check_on_truncated(self.on_truncated)
        if self.compressor.get("refresh") == "background" and self.ceiling is None:
            raise ConfigurationError(
                'refresh="background" needs a ceiling, the size at which a model call waits for '
                'the summary after all: ceiling=("messages", 80), say'
            )

    @property
    def refresh(self) -> str:
        """The compressor's ``refresh``, as given or its default."""
        return self.compressor.get("refresh", DEFAULTS.refresh)


def compressor_options(settings: AgentSettings) -> CompressorOptions:
    """The compressor's settings given, and ``on_summarizer_error`` as the compressor reads it
    (a degrading integration has its compressor raise, and serves the cache).

    ``trigger``, ``keep`` and ``ceiling`` are not among them: they are sizes the integration
    turns into the compressor's policies, once it knows the context size.
    """
    uncompressed = settings.on_summarizer_error == "uncompressed"
    # SharedOptions is CompressorOptions but for the keys added here.
    return cast(
        "CompressorOptions",
        {
            **settings.compressor,
            "summary_role": "system",
            "on_summarizer_error": "uncompressed" if uncompressed else "raise",
        },
    )


SettingsT = TypeVar("SettingsT", bound=AgentSettings)

_NAMES: dict[type[AgentSettings], tuple[str, ...]] = {}


def _own(kind: type[AgentSettings]) -> list[dataclasses.Field[Any]]:
    """The attributes of ``kind`` that are keywords of their own (all but ``compressor``)."""
    return [found for found in dataclasses.fields(kind) if found.name != "compressor"]


def setting_names(kind: type[AgentSettings]) -> tuple[str, ...]:
    """Every keyword ``kind`` is made from, in the order signatures show them: its own
    attributes, then the compressor's settings it passes on as they are."""
    names = _NAMES.get(kind)
    if names is None:
        names = _NAMES[kind] = (*(found.name for found in _own(kind)), *_SHARED)
    return names


def settings_from(kind: type[SettingsT], owner: str, options: Mapping[str, Any]) -> SettingsT:
    """The settings ``options`` make, as ``owner``'s ``**options`` received them.

    Args:
        kind: :class:`AgentSettings` or an integration's subclass.
        owner: The class taking them, as an unknown keyword's error names it.
        options: The keyword arguments given (those not given take their defaults).

    Raises:
        TypeError: A keyword that is not a setting, named as Python names one.
        ConfigurationError: A setting ``kind`` checks is invalid.
    """
    unknown = sorted(set(options) - set(setting_names(kind)))
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    shared: Any = {name: value for name, value in options.items() if name in _SHARED}
    own = {name: value for name, value in options.items() if name not in _SHARED}
    return kind(**own, compressor=shared)


def signature(init: Callable[..., None], kind: type[AgentSettings]) -> inspect.Signature:
    """A class's signature as :func:`inspect.signature` and ``help()`` show it: the arguments
    of its ``init`` but ``self`` and ``**options``, then every other setting of ``kind`` as a
    keyword with its default (a compressor setting's from
    :data:`~slimcache.core.settings.compressor.DEFAULTS`)."""
    parameter = inspect.Parameter
    own = [
        given
        for given in inspect.signature(init).parameters.values()
        if given.name != "self" and given.kind is not parameter.VAR_KEYWORD
    ]
    shown = {given.name for given in own}
    settings = [
        parameter(found.name, parameter.KEYWORD_ONLY, default=found.default, annotation=found.type)
        for found in _own(kind)
        if found.name not in shown
    ]
    settings += [
        parameter(name, parameter.KEYWORD_ONLY, default=getattr(DEFAULTS, name), annotation=typed)
        for name, typed in _SHARED_TYPES.items()
        if name not in shown
    ]
    return inspect.Signature([*own, *settings], return_annotation="None")


class SettingsSignature:
    """The ``__signature__`` of a class whose ``__init__`` takes settings as ``**options``.

    Set in the class body (``__signature__ = SettingsSignature(AgentSettings)``), it
    shows the class's :func:`signature`, made when first asked for. It is the class's alone:
    an instance that is called (a filter, a history processor) has the signature of its
    ``__call__``, as a framework reading it expects, and a subclass with an ``__init__`` of its
    own has that one's.

    Args:
        kind: The settings ``**options`` makes.
    """

    def __init__(self, kind: type[AgentSettings]) -> None:
        self._kind = kind
        self._init: Callable[..., None] | None = None
        self._signature: inspect.Signature | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self._init = _init_of(owner)

    def __get__(self, instance: object, owner: type) -> inspect.Signature:
        # inspect takes an AttributeError as "no __signature__" and reads the callable itself.
        if instance is not None or self._init is None or _init_of(owner) is not self._init:
            raise AttributeError("__signature__")
        if self._signature is None:
            self._signature = signature(self._init, self._kind)
        return self._signature


def _init_of(owner: type) -> Callable[..., None]:
    """The ``__init__`` instances of ``owner`` are made with, as its class body wrote it."""
    init: Callable[..., None] = next(
        kind.__dict__["__init__"] for kind in owner.__mro__ if "__init__" in kind.__dict__
    )
    return init
