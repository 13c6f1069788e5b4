"""A summarize compressor's settings: declared once, checked and derived once per distinct set.

:class:`CompressorSettings` holds every setting of a :class:`~slimcache.SummarizeCompressor`
but its store, by name, each with its type and default; :data:`CHECKS` names each one's check
(a check of :mod:`slimcache.core.settings.checks`), and :data:`CROSS_CHECKS` the checks of one
setting against another. :meth:`CompressorSettings.checked` runs both and derives the rest:
:class:`Derived` stands beside the checked settings with what follows from them (the resolved
policies, strategy and prompts, the planner's rules, the bound on one summarizer call, the
prompt's size, the summary producer and the index writer). The compressor keeps both.

Every front door built on the compressor reads its defaults from :data:`DEFAULTS`
(``lease_ttl: float = DEFAULTS.lease_ttl``) and checks the settings it takes with
:func:`check_fields`, so that all accept and reject the same values with the same message;
one whose default differs on purpose says why in its docstring. Adding a setting every front
door offers therefore touches this module (a field of :class:`CompressorSettings`, its entry
in :data:`CHECKS` and :class:`SharedOptions`, and its meaning in the compressor's docstring),
:mod:`~slimcache.core.settings.checks` if no check there fits it, and the code that reads it.

A stateless server builds a compressor for every request, with the same arguments each time.
Checking them and deriving the rest cost more than a cache hit's own decision, so
:data:`checked_settings`, a :class:`SettingsCache`, keeps what it built for the next compressor
given the same arguments: plain values (strings, numbers, ``None``) and slimcache's own frozen
settings (``MessageThreshold(20)``, ``Prompts(...)``) match by value, any other object (a
summarizer, a token counter, a hook, a policy of your own) only itself. An entry holds every
object its key names, so no key outlives what it was made from.

What a :class:`Derived` remembers is shared by the compressors built from it: the token counts
of the texts its counter saw (the counter depends on the text alone) and of the summary
messages it built. Nothing in it depends on the store, a thread or a request.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from slimcache._process import register
from slimcache.core.breaker import FAILURES
from slimcache.core.commit import IndexWriter
from slimcache.core.input_bound import InputBound
from slimcache.core.plan import Identity, Rules
from slimcache.core.policy import Keep, Trigger
from slimcache.core.producing import SummaryProducer
from slimcache.core.settings.checks import (
    Check,
    check_callable,
    check_ceiling,
    check_count_or_none,
    check_flag,
    check_input_room,
    check_keep,
    check_lease_ttl,
    check_lock_wait,
    check_max_input_tokens,
    check_message_overhead,
    check_namespace,
    check_prompts,
    check_seconds_or_none,
    check_summarizer,
    check_summarizer_id,
    check_template,
    check_token_counter,
    check_trigger,
    choice,
    named,
)
from slimcache.core.settings.groups import (
    DEFAULT_SUMMARY_TEMPLATE,
    SUMMARY_ROLES,
    Fingerprint,
    Hook,
    InputBoundSetting,
    OnStoreError,
    OnSummarizerError,
    RefreshMode,
    ReuseEntries,
    call_hook,
    default_trigger,
    input_limit,
    prompt_tokens,
    resolve_policies,
    takes_messages_summary_ms,
)
from slimcache.core.strategies import (
    Strategy,
    StrategyName,
    builds_on,
    resolve_strategy,
    sends_previous,
)
from slimcache.core.summarizer import OnOverBudget, Prompts, Summarizer, summarizer_name
from slimcache.messages import (
    DEFAULT_MESSAGE_OVERHEAD,
    RememberingCounter,
    TokenCounter,
    approx_tokens,
    count_message_tokens,
)
from slimcache.stores.entries import SummaryEntry
from slimcache.stores.protocol import positive_int, validate_ttl
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "CHECKS",
    "CROSS_CHECKS",
    "DEFAULTS",
    "HOOKS",
    "CompressorOptions",
    "CompressorSettings",
    "Derived",
    "SettingsCache",
    "SharedOptions",
    "check_fields",
    "checked_settings",
    "signature",
]

# Summary messages whose token counts a Derived remembers; all are forgotten past this.
_SUMMARY_TOKEN_COUNTS = 1024

# Settings kept by a SettingsCache; all are forgotten past this (arguments that change on every
# call, a new summarizer object per request, say, would otherwise keep every one of them alive).
MAX_SETTINGS = 256


class SharedOptions(TypedDict, total=False):
    """The compressor's keyword arguments that every front door built on it passes on as they
    are (an agent integration among them), each with the type of the
    :class:`CompressorSettings` attribute it sets."""

    strategy: Strategy | StrategyName
    max_summary_tokens: int
    max_input_tokens: InputBoundSetting
    prompts: Prompts | None
    token_counter: TokenCounter
    message_overhead: int
    summary_template: str
    namespace: str
    ttl: float | None
    checkpoints: int
    summarizer_timeout: float | None
    on_store_error: OnStoreError
    on_over_budget: OnOverBudget
    breaker_failures: int | None
    summarizer_id: str | None
    reuse_entries: ReuseEntries
    lock_wait: float
    lease_ttl: float
    single_writer: bool
    store_timeout: float | None
    fingerprint: Fingerprint
    refresh: RefreshMode
    on_evict: Hook | None
    on_compress: Hook | None
    on_cache_hit: Hook | None
    on_error: Hook | None


class CompressorOptions(SharedOptions, total=False):
    """The keyword arguments of :class:`~slimcache.SummarizeCompressor`: its settings but the
    summarizer, each with the type of the :class:`CompressorSettings` attribute it sets. Those
    of :class:`SharedOptions`, and the ones a front door built on the compressor states in its
    own terms (an agent integration's sizes, its placement of the summary)."""

    trigger: Trigger | None
    keep: Keep | None
    summary_role: str
    on_summarizer_error: OnSummarizerError
    ceiling: Trigger | None


@dataclass(frozen=True)
class CompressorSettings:
    """Every setting of a :class:`~slimcache.SummarizeCompressor` but its store.

    Each attribute is the compressor's argument of the same name, with the same meaning and
    default (see :class:`~slimcache.SummarizeCompressor`). Building one checks nothing:
    :meth:`checked` does, and :data:`checked_settings` does it once per distinct set.
    """

    summarizer: Summarizer
    trigger: Trigger | None = None
    keep: Keep | None = None
    strategy: Strategy | StrategyName = "tree"
    max_summary_tokens: int = 1000
    max_input_tokens: InputBoundSetting = "auto"
    prompts: Prompts | None = None
    token_counter: TokenCounter = approx_tokens
    message_overhead: int = DEFAULT_MESSAGE_OVERHEAD
    summary_role: str = "system"
    summary_template: str = DEFAULT_SUMMARY_TEMPLATE
    namespace: str = ""
    ttl: float | None = None
    checkpoints: int = 64
    summarizer_timeout: float | None = None
    on_summarizer_error: OnSummarizerError = "raise"
    on_store_error: OnStoreError = "raise"
    on_over_budget: OnOverBudget = "cut"
    breaker_failures: int | None = FAILURES
    summarizer_id: str | None = None
    reuse_entries: ReuseEntries = "matching"
    lock_wait: float = 30.0
    lease_ttl: float = 10.0
    single_writer: bool = False
    store_timeout: float | None = DEFAULT_STORE_TIMEOUT
    fingerprint: Fingerprint = "content"
    refresh: RefreshMode = "inline"
    ceiling: Trigger | None = None
    on_evict: Hook | None = None
    on_compress: Hook | None = None
    on_cache_hit: Hook | None = None
    on_error: Hook | None = None

    def check(self) -> CompressorSettings:
        """Check every setting with its check in :data:`CHECKS`, in the order the compressor
        documents, then each against the others (:data:`CROSS_CHECKS`).

        Returns:
            The checked settings, each as its check returns it (seconds as floats, a strategy's
            shortcut name resolved, the default prompts filled in).

        Raises:
            ConfigurationError: For any invalid setting, naming it.
        """
        settings = CompressorSettings(
            **{name: check(getattr(self, name)) for name, check in CHECKS.items()}
        )
        for cross_check in CROSS_CHECKS:
            cross_check(settings)
        return settings

    def checked(self) -> Derived:
        """Check every setting (see :meth:`check`) and derive the rest.

        Returns:
            What the settings resolve to, holding the checked settings.

        Raises:
            ConfigurationError: For any invalid setting, naming it.
        """
        settings = self.check()
        trigger, keep = resolve_policies(settings.trigger, settings.keep)
        strategy = cast("Strategy", settings.strategy)  # resolved by its check
        prompts = settings.prompts or Prompts()
        budget = settings.max_summary_tokens
        count = _counting(settings.token_counter)
        prompt = (
            prompt_tokens(prompts, budget, count) if settings.max_input_tokens is not None else 0
        )
        return Derived(
            settings=settings,
            trigger=trigger,
            keep=keep,
            strategy=strategy,
            prompts=prompts,
            count=count,
            bound=InputBound(
                input_limit(settings.max_input_tokens, budget, prompt),
                reserve=budget,
                prompt_tokens=prompt,
                sends_previous=sends_previous(strategy),
                count=count,
                overhead=settings.message_overhead,
            ),
            summarizer_id=settings.summarizer_id or summarizer_name(settings.summarizer),
            by_id=settings.fingerprint == "id",
            hooks={name: getattr(settings, name) for name in HOOKS},
            ceiling=settings.ceiling if settings.refresh == "background" else None,
        )


HOOKS = ("on_evict", "on_compress", "on_cache_hit", "on_error")
"""The compressor's hooks, by the names it calls them."""

CHECKS: dict[str, Check] = {
    "summarizer": check_summarizer,  # reads its signature: once per settings
    "trigger": named(check_trigger, "trigger"),
    "keep": check_keep,
    "strategy": resolve_strategy,
    "max_summary_tokens": named(positive_int, "max_summary_tokens"),
    "max_input_tokens": check_max_input_tokens,
    "prompts": check_prompts,
    "token_counter": check_token_counter,
    "message_overhead": check_message_overhead,
    "summary_role": choice("summary_role", SUMMARY_ROLES),
    "summary_template": lambda template: check_template(
        "summary_template", template, start=0, end=0, count=0
    ),
    "namespace": check_namespace,
    "ttl": validate_ttl,
    "checkpoints": named(positive_int, "checkpoints"),
    "summarizer_timeout": named(check_seconds_or_none, "summarizer_timeout"),
    "on_summarizer_error": choice("on_summarizer_error", OnSummarizerError),
    "on_store_error": choice("on_store_error", OnStoreError),
    "on_over_budget": choice("on_over_budget", OnOverBudget),
    "breaker_failures": named(check_count_or_none, "breaker_failures"),
    "summarizer_id": check_summarizer_id,
    "reuse_entries": choice("reuse_entries", ReuseEntries),
    "lock_wait": check_lock_wait,
    "lease_ttl": check_lease_ttl,
    "single_writer": named(check_flag, "single_writer"),
    "store_timeout": named(check_seconds_or_none, "store_timeout"),
    "fingerprint": choice("fingerprint", Fingerprint),
    "refresh": choice("refresh", RefreshMode),
    "ceiling": named(check_trigger, "ceiling"),
    **{hook: named(check_callable, hook) for hook in HOOKS},
}
"""Each setting's check, by name, in the order the compressor documents them: it takes the
value and returns it normalised, or raises :class:`ConfigurationError` naming the setting."""


def _input_room(settings: CompressorSettings) -> None:
    """A bound on one summarizer call's input leaves room for the prompt and two budgets."""
    if isinstance(settings.max_input_tokens, int):
        budget = settings.max_summary_tokens
        prompt = prompt_tokens(settings.prompts or Prompts(), budget, settings.token_counter)
        check_input_room(settings.max_input_tokens, budget, prompt)


def _policies(settings: CompressorSettings) -> None:
    """The keep policy stays below the trigger (hysteresis), the defaults filled in."""
    resolve_policies(settings.trigger, settings.keep)


def _refresh_ceiling(settings: CompressorSettings) -> None:
    """A background refresh has a ceiling, above the trigger; an inline one has none."""
    check_ceiling(settings.refresh, settings.ceiling, default_trigger(settings.trigger))


CROSS_CHECKS: tuple[Callable[[CompressorSettings], None], ...] = (
    _policies,
    _input_room,
    _refresh_ceiling,
)
"""The checks of a setting against another, run on the settings each checked alone."""


async def _no_summarizer(messages: Any, context: Any) -> str:
    raise AssertionError("DEFAULTS holds the default settings; it summarizes nothing")


DEFAULTS = CompressorSettings(_no_summarizer)
"""Every compressor setting's default, typed: a front door taking a setting writes its default
as ``DEFAULTS.lease_ttl`` (say), so that each default is written once, in
:class:`CompressorSettings`."""


def check_fields(**values: Unpack[CompressorOptions]) -> CompressorOptions:
    """The compressor settings a front door takes, each checked as the compressor checks it
    (:data:`CHECKS`) and returned normalised, by name.

    Raises:
        ConfigurationError: For the first invalid one, naming it.
    """
    return cast("CompressorOptions", {name: CHECKS[name](value) for name, value in values.items()})


def _counting(token_counter: TokenCounter) -> TokenCounter:
    """``token_counter``, remembering the counts of the texts it saw."""
    # approx_tokens is cheaper than a lookup, and check_messages knows it by identity.
    return token_counter if token_counter is approx_tokens else RememberingCounter(token_counter)


@dataclass(eq=False)
class Derived:
    """What a compressor works with besides its settings, derived from them once.

    Built by :meth:`CompressorSettings.checked`.

    Attributes:
        settings: The checked settings.
        trigger: The trigger, the default filled in.
        keep: The keep policy, the default filled in.
        strategy: The strategy, a shortcut name resolved.
        prompts: The prompts, the default ones filled in.
        count: The token counter, remembering the counts of the texts it saw.
        bound: What one summarizer call may receive.
        summarizer_id: The name recorded in entries, the summarizer's own when not given.
        by_id: Whether messages are fingerprinted by their ``id``.
        hooks: The hooks by name.
        ceiling: The most an answer may hold while its summary is extended in the background;
            ``None``: summaries are made inline.
        legacy_on_compress: Whether ``on_compress`` takes ``(messages, summary, ms)``.
        prompt_tokens: Tokens of the summarize prompt, its budget filled in.
        rules: What the planner decides by.
        producer: Produces a request's summaries.
        writer: Writes ranges and a thread's index.
    """

    settings: CompressorSettings
    trigger: Trigger
    keep: Keep
    strategy: Strategy
    prompts: Prompts
    count: TokenCounter
    bound: InputBound
    summarizer_id: str
    by_id: bool
    hooks: dict[str, Hook | None]
    ceiling: Trigger | None
    legacy_on_compress: bool = field(init=False)
    prompt_tokens: int = field(init=False)
    rules: Rules = field(init=False)
    producer: SummaryProducer = field(init=False)
    writer: IndexWriter = field(init=False)
    _summary_counts: dict[tuple[str, int, int], int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        settings = self.settings
        self.legacy_on_compress = takes_messages_summary_ms(settings.on_compress)
        prompt = self.prompts.render("summarize", settings.max_summary_tokens)
        self.prompt_tokens = self.count(prompt)
        matching = settings.reuse_entries == "matching"
        identity = Identity(
            self.summarizer_id,
            self.prompts.digest,
            self.strategy.name,
            self.prompts.digests_also,
            frozenset(builds_on(self.strategy)),
        )
        self.rules = Rules(
            self.trigger, self.keep, self.summary_tokens, identity if matching else None
        )
        self.producer = SummaryProducer(
            summarizer=settings.summarizer,
            summarizer_id=self.summarizer_id,
            strategy=self.strategy,
            prompts=self.prompts,
            max_tokens=settings.max_summary_tokens,
            count=self.count,
            overhead=settings.message_overhead,
            timeout=settings.summarizer_timeout,
            emit=self.emit,
            bound=self.bound,
            on_over_budget=settings.on_over_budget,
            breaker_failures=settings.breaker_failures,
        )
        self.writer = IndexWriter(self.rules, settings.checkpoints)

    async def emit(self, name: str, *args: Any) -> None:
        """Call the hook ``name`` with ``args``, if one is set (see :func:`call_hook`)."""
        await call_hook(name, self.hooks[name], *args)

    def summary_message(self, summary: str, start: int, end: int) -> dict[str, Any]:
        """The message standing for messages ``start``-``end``."""
        content = self.settings.summary_template.format(
            summary=summary, start=start, end=end, count=end - start + 1
        )
        return {"role": self.settings.summary_role, "content": content}

    def summary_tokens(self, entry: SummaryEntry) -> int:
        """Tokens of the summary message built from ``entry``, counted once."""
        # A hit asks twice (the index's head, then the base), and the next request again.
        key = (entry.summary, entry.start, entry.end)
        found = self._summary_counts.get(key)
        if found is None:
            message = self.summary_message(entry.summary, entry.start, entry.end)
            found = count_message_tokens(message, self.count, self.settings.message_overhead)
            if len(self._summary_counts) >= _SUMMARY_TOKEN_COUNTS:
                self._summary_counts.clear()
            self._summary_counts[key] = found
        return found


# How values of a type are matched: by themselves (strings and ``None``, equal to nothing of
# another type), by type and value (numbers: ``1``, ``1.0`` and ``True`` are equal), or by
# identity (``None`` here).
_RAW, _TYPED = 1, 2


def _by_value(kind: type) -> int | None:
    """How values of ``kind`` are matched: slimcache's own frozen settings objects (policies,
    prompts, strategies), whose equality is their value, by type and value; others by
    identity."""
    params = getattr(kind, "__dataclass_params__", None)
    module = kind.__module__
    by_value = (
        (module == "slimcache" or module.startswith("slimcache."))
        and params is not None
        and bool(params.frozen)
        and kind.__hash__ is not None
    )
    return _TYPED if by_value else None


class SettingsCache:
    """Settings checked and derived once for each distinct set of arguments.

    :meth:`derived` takes the arguments as the compressor received them and returns the
    :class:`Derived` of the settings they make: from the cache when it built one from the same
    arguments (see the module docstring), else checked and derived now. One instance serves the
    process (:data:`checked_settings`); it is registered with the process's other caches (see
    :func:`slimcache.testing.clear_process_caches`).

    Args:
        max_entries: How many it keeps; all are forgotten past this.
    """

    def __init__(self, max_entries: int = MAX_SETTINGS) -> None:
        self.max_entries = max_entries
        self._by_value: dict[tuple[Any, ...], Derived] = {}
        # The same entries by the identities of the very arguments each was built from (which
        # it holds, so those identities stay theirs): a caller passing the same objects again,
        # as defaults and constants are, is matched without comparing values.
        self._by_identity: dict[tuple[Any, ...], tuple[Derived, tuple[Any, ...]]] = {}
        self._matching: dict[type, int | None] = {
            str: _RAW,
            type(None): _RAW,
            int: _TYPED,
            float: _TYPED,
            bool: _TYPED,
        }

    def derived(self, summarizer: Summarizer, options: CompressorOptions) -> Derived:
        """The :class:`Derived` of the settings ``summarizer`` and ``options`` make.

        Args:
            summarizer: The compressor's summarizer.
            options: Its keyword arguments, as given (those not given take their defaults).

        Raises:
            ConfigurationError: For any invalid setting, as the compressor documents.
            TypeError: A keyword that is not a setting.
        """
        values = (summarizer, *options.values())
        names = tuple(options)  # a set given in another order is a key of its own
        identities = (names, *map(id, values))
        same = self._by_identity.get(identities)
        if same is not None:
            return same[0]
        key: tuple[Any, ...] | None = (names, *self._key(values))
        try:
            found = self._by_value.get(key)  # type: ignore[arg-type]
        except TypeError:  # a frozen settings object holding something unhashable
            found, key = None, None
        if found is not None:
            return found
        made = _settings_of(summarizer, options).checked()
        if key is not None:
            if len(self._by_value) >= self.max_entries:
                self.clear()
            self._by_value[key] = made
            self._by_identity[identities] = (made, values)  # holds what the ids name
        return made

    def clear(self) -> None:
        """Forget every settings checked."""
        self._by_value.clear()
        self._by_identity.clear()

    def _key(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        key: list[Any] = []
        matching = self._matching
        for value in values:
            kind = type(value)
            how = matching[kind] if kind in matching else matching.setdefault(kind, _by_value(kind))
            key.append(value if how == _RAW else (kind, value) if how == _TYPED else id(value))
        return tuple(key)


def signature() -> inspect.Signature:
    """The compressor's signature as :func:`inspect.signature` and ``help()`` show it: every
    setting a keyword with its default, as :class:`CompressorSettings` declares them."""
    kind = inspect.Parameter
    parameters = [
        kind("summarizer", kind.POSITIONAL_OR_KEYWORD, annotation="Summarizer"),
        kind("store", kind.POSITIONAL_OR_KEYWORD, default=None, annotation="Store | str | None"),
    ]
    parameters += [
        kind(setting.name, kind.KEYWORD_ONLY, default=setting.default, annotation=setting.type)
        for setting in dataclasses.fields(CompressorSettings)
        if setting.name != "summarizer"
    ]
    return inspect.Signature(parameters, return_annotation="None")


_FIELDS = frozenset(f.name for f in dataclasses.fields(CompressorSettings))


def _settings_of(summarizer: Summarizer, options: CompressorOptions) -> CompressorSettings:
    unknown = sorted(set(options) - _FIELDS)
    if unknown:
        raise TypeError(f"SummarizeCompressor() got an unexpected keyword argument {unknown[0]!r}")
    return CompressorSettings(summarizer, **options)


checked_settings: SettingsCache = register(
    __name__,
    "compressor settings",
    "settings checked and derived per distinct set of a compressor's arguments",
    SettingsCache(),
)
"""The process's settings cache, which every :class:`~slimcache.SummarizeCompressor` uses."""
