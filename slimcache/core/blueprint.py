"""A summarize compressor's settings, checked and derived once for each set of arguments.

A stateless server builds a :class:`~slimcache.SummarizeCompressor` for every request, with
the same arguments each time. Checking them and deriving what the compressor works with (the
policies, the prompts and their digest, the bound on one summarizer call, the planner's rules)
cost more than a cache hit's own decision, so a :class:`Blueprint` is built once and kept for
the next compressor given the same arguments: plain values (strings, numbers, ``None``) and
slimcache's own frozen settings (``MessageThreshold(20)``, ``Prompts(...)``) match by value,
any other object (a summarizer, a token counter, a hook, a policy of your own) only itself.
The blueprint holds every object its key names, so no key outlives what it was made from.

What a blueprint remembers is shared by the compressors built from it: the token counts of
the texts its counter saw (the counter depends on the text alone) and of the summary messages
it built. Nothing in it depends on the store, a thread or a request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slimcache.core.input_bound import InputBound
from slimcache.core.plan import Identity, Rules
from slimcache.core.policy import Keep, Trigger
from slimcache.core.settings import (
    CacheOptions,
    Coordination,
    ErrorHandling,
    Hooks,
    SummaryFormat,
    Timeouts,
    check_summarizer,
    resolve_policies,
    takes_messages_summary_ms,
)
from slimcache.core.strategies import Strategy, resolve_strategy, sends_previous
from slimcache.core.summarizer import Prompts, Summarizer, summarizer_name
from slimcache.messages import (
    RememberingCounter,
    TokenCounter,
    approx_tokens,
    count_message_tokens,
)
from slimcache.stores.entries import SummaryEntry

__all__ = ["Blueprint", "blueprint"]

# Summary messages whose token counts a blueprint remembers; all are forgotten past this.
_SUMMARY_TOKEN_COUNTS = 1024

# Blueprints kept; all are forgotten past this (arguments that change on every call, a new
# summarizer object per request, say, would otherwise keep every one of them alive).
_MAX_BLUEPRINTS = 256

_BLUEPRINTS: dict[tuple[Any, ...], Blueprint] = {}

# The same blueprints by the identities of the very arguments each was built from (which it
# holds, so those identities stay theirs): a caller passing the same objects again, as
# defaults and constants are, is matched without comparing values.
_BY_IDENTITY: dict[tuple[int, ...], Blueprint] = {}

# How values of a type are matched: by themselves (strings and ``None``, equal to nothing of
# another type), by type and value (numbers: ``1``, ``1.0`` and ``True`` are equal), or by
# identity (``None`` here).
_RAW, _TYPED = 1, 2
_MATCHING: dict[type, int | None] = {str: _RAW, type(None): _RAW, int: _TYPED, float: _TYPED}
_MATCHING[bool] = _TYPED


def _counting(token_counter: TokenCounter) -> TokenCounter:
    """``token_counter``, remembering the counts of the texts it saw."""
    # approx_tokens is cheaper than a lookup, and check_messages knows it by identity.
    return token_counter if token_counter is approx_tokens else RememberingCounter(token_counter)


@dataclass(eq=False)
class Blueprint:
    """What a compressor works with, derived from its arguments (see the module docstring).

    Built by :func:`blueprint`; each attribute is the checked (or resolved) argument of the
    same name, except those documented here.

    Attributes:
        prompts: The prompts, the default ones filled in.
        count: The token counter, remembering the counts of the texts it saw.
        bound: What one summarizer call may receive.
        summarizer_id: The name recorded in entries, the summarizer's own when not given.
        by_id: Whether messages are fingerprinted by their ``id``.
        rules: What the planner decides by.
        hooks: The hooks by name.
        legacy_on_compress: Whether ``on_compress`` takes ``(messages, summary, ms)``.
        matching: Whether entries made with other settings are left unused
            (``reuse_entries="matching"``).
        prompt_tokens: Tokens of the summarize prompt, its budget filled in.
        arguments: The arguments it was built from (kept so that their identities stay theirs).
    """

    summarizer: Summarizer
    trigger: Trigger
    keep: Keep
    strategy: Strategy
    max_summary_tokens: int
    prompts: Prompts
    count: TokenCounter
    overhead: int
    bound: InputBound
    summary_role: str
    summary_template: str
    namespace: str
    ttl: float | None
    checkpoints: int
    summarizer_timeout: float | None
    store_timeout: float | None
    on_summarizer_error: str
    on_store_error: str
    summarizer_id: str
    lock_wait: float
    lease_ttl: float
    single_writer: bool
    by_id: bool
    hooks: dict[str, Any]
    legacy_on_compress: bool
    matching: bool
    arguments: tuple[Any, ...]
    prompt_tokens: int = field(default=0, init=False)
    rules: Rules = field(init=False)
    _summary_counts: dict[tuple[str, int, int], int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        prompt = self.prompts.render("summarize", self.max_summary_tokens)
        self.prompt_tokens = self.count(prompt)
        identity = Identity(self.summarizer_id, self.prompts.digest, self.strategy.name)
        self.rules = Rules(
            self.trigger, self.keep, self.summary_tokens, identity if self.matching else None
        )

    def summary_message(self, summary: str, start: int, end: int) -> dict[str, Any]:
        """The message standing for messages ``start``-``end``."""
        content = self.summary_template.format(
            summary=summary, start=start, end=end, count=end - start + 1
        )
        return {"role": self.summary_role, "content": content}

    def summary_tokens(self, entry: SummaryEntry) -> int:
        """Tokens of the summary message built from ``entry``, counted once."""
        # A hit asks twice (the index's head, then the base), and the next request again.
        key = (entry.summary, entry.start, entry.end)
        found = self._summary_counts.get(key)
        if found is None:
            message = self.summary_message(entry.summary, entry.start, entry.end)
            found = count_message_tokens(message, self.count, self.overhead)
            if len(self._summary_counts) >= _SUMMARY_TOKEN_COUNTS:
                self._summary_counts.clear()
            self._summary_counts[key] = found
        return found


def _matching(kind: type) -> int | None:
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
    found = _TYPED if by_value else None
    _MATCHING[kind] = found
    return found


def _key(arguments: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cache key of ``arguments`` (see the module docstring)."""
    key: list[Any] = []
    for value in arguments:
        kind = type(value)
        how = _MATCHING[kind] if kind in _MATCHING else _matching(kind)
        key.append(value if how == _RAW else (kind, value) if how == _TYPED else id(value))
    return tuple(key)


def blueprint(arguments: tuple[Any, ...]) -> Blueprint:
    """The blueprint of a compressor given ``arguments``, from the cache when one was built
    from the same ones.

    Args:
        arguments: Every argument of :class:`~slimcache.SummarizeCompressor` but the store, in
            its order (the summarizer, then each keyword argument).

    Raises:
        ConfigurationError: For any invalid argument, as the compressor documents.
    """
    same = _BY_IDENTITY.get(tuple(map(id, arguments)))
    if same is not None:
        return same
    key: tuple[Any, ...] | None = _key(arguments)
    try:
        found = _BLUEPRINTS.get(key)  # type: ignore[arg-type]
    except TypeError:  # a frozen settings object holding something unhashable
        found, key = None, None
    if found is not None:
        return found
    made = _build(arguments, *arguments)
    if key is not None:
        if len(_BLUEPRINTS) >= _MAX_BLUEPRINTS:
            _BLUEPRINTS.clear()
            _BY_IDENTITY.clear()
        _BLUEPRINTS[key] = made
        _BY_IDENTITY[tuple(map(id, made.arguments))] = made
    return made


def _build(
    arguments: tuple[Any, ...],
    summarizer: Summarizer,
    trigger: Trigger | None,
    keep: Keep | None,
    strategy: Any,
    max_summary_tokens: int,
    max_input_tokens: Any,
    prompts: Prompts | None,
    token_counter: TokenCounter,
    message_overhead: int,
    summary_role: str,
    summary_template: str,
    namespace: str,
    ttl: float | None,
    checkpoints: int,
    summarizer_timeout: float | None,
    on_summarizer_error: str,
    on_store_error: str,
    summarizer_id: str | None,
    reuse_entries: str,
    lock_wait: float,
    lease_ttl: float,
    single_writer: bool,
    store_timeout: float | None,
    fingerprint: str,
    on_evict: Any,
    on_compress: Any,
    on_cache_hit: Any,
    on_error: Any,
) -> Blueprint:
    """Check every setting, in the order the compressor documents, and derive the rest."""
    check_summarizer(summarizer)  # reads its signature: once per summarizer, not per request
    resolved_trigger, resolved_keep = resolve_policies(trigger, keep)
    resolved_strategy = resolve_strategy(strategy)
    summary = SummaryFormat(
        max_summary_tokens,
        prompts,
        token_counter,
        message_overhead,
        summary_role,
        summary_template,
        max_input_tokens,
    )
    cache = CacheOptions(namespace, ttl, checkpoints, reuse_entries, fingerprint, summarizer_id)
    timeouts = Timeouts(summarizer_timeout, store_timeout)
    errors = ErrorHandling(on_summarizer_error, on_store_error)
    coordination = Coordination(lock_wait, lease_ttl, single_writer)
    hooks = Hooks(on_evict, on_compress, on_cache_hit, on_error)
    count = _counting(token_counter)
    return Blueprint(
        summarizer=summarizer,
        trigger=resolved_trigger,
        keep=resolved_keep,
        strategy=resolved_strategy,
        max_summary_tokens=summary.max_summary_tokens,
        prompts=summary.resolved_prompts,
        count=count,
        overhead=summary.message_overhead,
        bound=summary.bound(count, sends_previous=sends_previous(resolved_strategy)),
        summary_role=summary.summary_role,
        summary_template=summary.summary_template,
        namespace=cache.namespace,
        ttl=cache.ttl,
        checkpoints=cache.checkpoints,
        summarizer_timeout=timeouts.summarizer_timeout,
        store_timeout=timeouts.store_timeout,
        on_summarizer_error=errors.on_summarizer_error,
        on_store_error=errors.on_store_error,
        summarizer_id=cache.summarizer_id or summarizer_name(summarizer),
        lock_wait=coordination.lock_wait,
        lease_ttl=coordination.lease_ttl,
        single_writer=coordination.single_writer,
        by_id=cache.by_id,
        hooks=hooks.pick("on_evict", "on_compress", "on_cache_hit", "on_error"),
        legacy_on_compress=takes_messages_summary_ms(hooks.on_compress),
        matching=cache.reuse_entries == "matching",
        arguments=arguments,
    )
