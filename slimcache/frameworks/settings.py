"""The settings every agent integration takes: one frozen object, each setting written once.

:class:`AgentSettings` holds the keywords that Pydantic AI's ``CachedSummarization`` and the
Agents SDK's ``CachedSummarizationFilter`` and ``CachedSummarySession`` share, with their
defaults and their meaning; :class:`AgentOptions` types them as keyword arguments
(``**options: Unpack[AgentOptions]``), so a type checker checks them where they are given. An
integration with settings of its own subclasses both (the Agents SDK adds ``context_window``).

An integration builds its settings with :func:`settings_from`, which refuses a keyword that is
not a setting as Python refuses one, and shows them in its signature with
:class:`SettingsSignature`, so :func:`inspect.signature` and ``help()`` list every keyword with
its default. It hands the object to
:class:`~slimcache.frameworks.compression.AgentCompression`, which reads what it needs and gives
the compressor the rest (:func:`compressor_options`): each setting reaches the compressor
through that one function.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar, get_args

from slimcache.core.settings.checks import check_choice
from slimcache.core.settings.compressor import CompressorOptions
from slimcache.core.settings.groups import DEFAULT_SUMMARY_TEMPLATE, RefreshMode
from slimcache.core.summarizer import OnOverBudget, Prompts
from slimcache.core.truncation import OnTruncated, check_on_truncated
from slimcache.frameworks.sizes import ContextSize, TriggerSpec
from slimcache.messages import TokenCounter, approx_tokens

__all__ = [
    "AgentOptions",
    "AgentSettings",
    "OnSummarizerError",
    "SettingsSignature",
    "SummaryPlacement",
    "compressor_options",
    "settings_from",
    "signature",
]

OnSummarizerError = Literal["degrade", "uncompressed", "raise"]
"""What an integration does when the summarizer fails: serve the last cached summary and the
messages since (``"degrade"``), send every message (``"uncompressed"``), or raise."""

SummaryPlacement = Literal["system", "user"]
"""Where an integration puts the summary: as a system or as a user message."""

_PLACEMENTS = get_args(SummaryPlacement)
_ON_SUMMARIZER_ERROR = get_args(OnSummarizerError)


class AgentOptions(TypedDict, total=False):
    """The keyword arguments every agent integration takes, each with the type of the
    :class:`AgentSettings` attribute it sets."""

    trigger: TriggerSpec
    keep: ContextSize
    token_counter: TokenCounter
    max_summary_tokens: int
    prompts: Prompts | None
    summary_template: str
    summary_placement: SummaryPlacement
    namespace: str
    ttl: float | None
    on_summarizer_error: OnSummarizerError
    refresh: RefreshMode
    ceiling: ContextSize | None
    on_store_error: Literal["raise", "bypass"]
    on_over_budget: OnOverBudget
    on_truncated: OnTruncated


@dataclass(frozen=True)
class AgentSettings:
    """The settings every agent integration takes, by keyword, with their defaults.

    Building one checks the choices only the integrations have (``summary_placement``,
    ``on_summarizer_error``); the sizes and the compressor's settings are checked by the
    integration when it builds its compressor, which it does before it opens its store. A
    message count counts the messages as the integration sees them (see its class).

    Attributes:
        trigger: When to summarize: ``("messages", n)`` when the verbatim messages reach
            ``n``, ``("tokens", n)`` when all the messages sent do, ``("fraction", f)`` of the
            model's context window; a dict of sizes that must all be reached, or a list of which
            any one suffices.
        keep: How much stays verbatim once summarized: ``("messages", n)``, ``("tokens", n)``
            or ``("fraction", f)``; below a trigger of the same unit.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        max_summary_tokens: The summary's token budget.
        prompts: The prompts the summarizer gets (default: slimcache's).
        summary_template: The summary's text as the model sees it; ``{summary}``,
            ``{start}``, ``{end}`` and ``{count}`` are filled in.
        summary_placement: ``"system"`` (default) or ``"user"``: a system or user prompt part
            after the agent's own (Pydantic AI), the role of the summary message (the Agents
            SDK).
        namespace: Namespace of every store key.
        ttl: Seconds cached summaries live (``None``: until deleted); it slides on hits.
        on_summarizer_error: ``"degrade"`` (default): when the summarizer fails, the model gets
            the last cached summary and the messages since (all messages when none is cached),
            with a warning; ``"uncompressed"``: all messages; ``"raise"``.
        refresh: ``"inline"`` (default): a call the trigger fires on waits for its summary.
            ``"background"``: the model gets the cached summary and everything after it at
            once while that stays within ``ceiling``, and the summary is extended behind the
            call (see the guide "Refresh summaries in the background").
        ceiling: With ``refresh="background"``, how much the compressed input may hold, in the
            sizes of ``trigger`` (``("messages", 80)``, ``("tokens", 6000)``, ...).
        on_store_error: ``"raise"`` (default) or ``"bypass"`` the cache.
        on_over_budget: A summary still over ``max_summary_tokens`` after the condense call is
            ``"cut"`` (default) to the budget at a sentence or word boundary, counted in
            ``stats.cut_over_budget`` and logged, or is a summarizer failure (``"raise"``; see
            ``on_summarizer_error``).
        on_truncated: When ``model`` is a framework's model or a model name: a reply still cut
            at the budget after asking for a shorter one is kept with a warning (``"accept"``,
            default; ``stats.truncated_accepted`` counts it) or is a summarizer failure
            (``"raise"``). A slimcache summarizer given as ``model`` has its own.

    Raises:
        ConfigurationError: ``summary_placement``, ``on_summarizer_error`` or ``on_truncated``
            is not one of its choices.
    """

    trigger: TriggerSpec = ("messages", 50)
    keep: ContextSize = ("messages", 20)
    token_counter: TokenCounter = approx_tokens
    max_summary_tokens: int = 1000
    prompts: Prompts | None = None
    summary_template: str = DEFAULT_SUMMARY_TEMPLATE
    summary_placement: SummaryPlacement = "system"
    namespace: str = ""
    ttl: float | None = None
    on_summarizer_error: OnSummarizerError = "degrade"
    refresh: RefreshMode = "inline"
    ceiling: ContextSize | None = None
    on_store_error: Literal["raise", "bypass"] = "raise"
    on_over_budget: OnOverBudget = "cut"
    on_truncated: OnTruncated = "accept"

    def __post_init__(self) -> None:
        check_choice("summary_placement", self.summary_placement, _PLACEMENTS)
        check_choice("on_summarizer_error", self.on_summarizer_error, _ON_SUMMARIZER_ERROR)
        check_on_truncated(self.on_truncated)


def compressor_options(settings: AgentSettings) -> CompressorOptions:
    """The settings the compressor takes as they are, and ``on_summarizer_error`` as it reads
    it (a degrading integration has its compressor raise, and serves the cache).

    ``trigger``, ``keep``, ``ceiling`` and ``refresh`` are not among them: they are sizes the
    integration turns into the compressor's policies, once it knows the context size.
    """
    return {
        "token_counter": settings.token_counter,
        "max_summary_tokens": settings.max_summary_tokens,
        "prompts": settings.prompts,
        "summary_template": settings.summary_template,
        "summary_role": "system",
        "namespace": settings.namespace,
        "ttl": settings.ttl,
        "on_summarizer_error": (
            "uncompressed" if settings.on_summarizer_error == "uncompressed" else "raise"
        ),
        "on_store_error": settings.on_store_error,
        "on_over_budget": settings.on_over_budget,
    }


SettingsT = TypeVar("SettingsT", bound=AgentSettings)

_NAMES: dict[type[AgentSettings], frozenset[str]] = {}


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
    names = _NAMES.get(kind)
    if names is None:
        names = _NAMES[kind] = frozenset(field.name for field in dataclasses.fields(kind))
    unknown = sorted(set(options) - names)
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    return kind(**options)


def signature(init: Callable[..., None], kind: type[AgentSettings]) -> inspect.Signature:
    """A class's signature as :func:`inspect.signature` and ``help()`` show it: the arguments
    of its ``init`` but ``self`` and ``**options``, then every setting of ``kind`` as a keyword
    with its default."""
    parameter = inspect.Parameter
    own = [
        given
        for given in inspect.signature(init).parameters.values()
        if given.name != "self" and given.kind is not parameter.VAR_KEYWORD
    ]
    settings = [
        parameter(field.name, parameter.KEYWORD_ONLY, default=field.default, annotation=field.type)
        for field in dataclasses.fields(kind)
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
