"""Settings the front doors share: small frozen groups that check themselves.

Each group checks its settings with the checks of :mod:`slimcache.core.settings.checks`, so
that every front door taking a setting accepts and rejects the same values with the same
message, which names the argument. The groups are built from a front door's flat keyword
arguments (in the manner of httpx's ``Timeout`` and ``Limits``): building one is validating it,
and a built one is known to be valid.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import Any, Literal, Union

from slimcache._exceptions import ConfigurationError
from slimcache.core.input_bound import InputBound
from slimcache.core.policy import (
    AnyOf,
    ContextWindow,
    Keep,
    KeepMessages,
    MessageThreshold,
    TokenThreshold,
    Trigger,
    check_hysteresis,
)
from slimcache.core.settings.checks import (
    check_callables,
    check_choice,
    check_flag,
    check_input_room,
    check_lock_wait,
    check_max_input_tokens,
    check_message_overhead,
    check_seconds_or_none,
    check_template,
    check_token_counter,
    fingerprints_by_id,
)
from slimcache.core.summarizer import Prompts
from slimcache.messages import DEFAULT_MESSAGE_OVERHEAD, TokenCounter, approx_tokens
from slimcache.stores.keys import normalize_namespace
from slimcache.stores.protocol import conforms, positive_int, validate_ttl
from slimcache.stores.toolkit import DEFAULT_STORE_TIMEOUT

__all__ = [
    "DEFAULT_KEEP",
    "DEFAULT_MAX_INPUT_TOKENS",
    "DEFAULT_SUMMARY_TEMPLATE",
    "INPUT_TOKENS_PER_SUMMARY_TOKEN",
    "SUMMARY_ROLES",
    "CacheOptions",
    "Coordination",
    "ErrorHandling",
    "Hooks",
    "InputBoundSetting",
    "Refresh",
    "RefreshMode",
    "SummaryFormat",
    "Timeouts",
    "call_hook",
    "resolve_policies",
    "takes_messages_summary_ms",
]

logger = logging.getLogger("slimcache")

SUMMARY_ROLES = ("system", "developer", "user", "assistant")

DEFAULT_SUMMARY_TEMPLATE = "Summary of the earlier conversation:\n{summary}"

DEFAULT_KEEP = 10
"""Messages every compressor keeps verbatim when given no ``keep`` policy."""

DEFAULT_MAX_INPUT_TOKENS = 6000
"""The least ``max_input_tokens="auto"`` bounds a summarizer call to: with the default summary
budget of 1,000 tokens, a call and its reply fit a model with an 8,192-token context, with room
to spare for a tokenizer that counts more than the default counter."""

INPUT_TOKENS_PER_SUMMARY_TOKEN = 4
"""``max_input_tokens="auto"`` is at least this many times ``max_summary_tokens``: a call carries
a previous summary and about three times as much of new messages."""

InputBoundSetting = Union[int, Literal["auto"], None]  # noqa: UP007
"""A ``max_input_tokens`` argument: a number of tokens, ``"auto"`` or ``None`` (no bound)."""

Hook = Any

RefreshMode = Literal["inline", "background"]
"""A ``refresh`` argument: when a due summary is made."""


def resolve_policies(
    trigger: Trigger | None, keep: Keep | None, *, default_keep: int = DEFAULT_KEEP
) -> tuple[Trigger, Keep]:
    """Fill in the default trigger and keep policy, and check the pair.

    Every compressor keeps :data:`DEFAULT_KEEP` messages by default, except where its docstring
    says why it keeps another count (``default_keep``).

    Raises:
        ConfigurationError: Either is not a policy, or they leave no hysteresis.
    """
    for name, value, policy in (
        ("trigger", trigger, "MessageThreshold"),
        ("keep", keep, "KeepMessages"),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            tokens = "TokenThreshold" if name == "trigger" else "KeepTokens"
            raise ConfigurationError(
                f"{name} must be a policy, not the number {value}: write {name}={policy}({value}) "
                f"(or {tokens}({value}) to count tokens)"
            )
    resolved_trigger: Trigger = trigger if trigger is not None else MessageThreshold(20)
    resolved_keep: Keep = keep if keep is not None else KeepMessages(default_keep)
    if not conforms(resolved_trigger, Trigger):
        raise ConfigurationError(f"trigger has no reason() method: {resolved_trigger!r}")
    if not conforms(resolved_keep, Keep):
        raise ConfigurationError(f"keep has no satisfied() method: {resolved_keep!r}")
    check_hysteresis(resolved_trigger, resolved_keep)
    return resolved_trigger, resolved_keep


# ---------------------------------------------------------------------- groups


@dataclass(frozen=True)
class SummaryFormat:
    """How a summary is asked for, counted and shaped into a message.

    Attributes:
        max_summary_tokens: Token budget handed to the summarizer.
        prompts: The prompts given to the summarizer (``None``: the default ones).
        token_counter: Counts a text's tokens.
        message_overhead: Tokens added per message for role and framing.
        summary_role: Role of the summary message, one of :data:`SUMMARY_ROLES`.
        summary_template: Text of the summary message; ``{summary}``, ``{start}``, ``{end}``
            and ``{count}`` are filled in.
        max_input_tokens: Tokens one summarizer call may receive (prompt, previous summary
            and messages, as ``token_counter`` counts them); ``"auto"``: ``max_summary_tokens``
            times :data:`INPUT_TOKENS_PER_SUMMARY_TOKEN`, at least
            :data:`DEFAULT_MAX_INPUT_TOKENS`; ``None``: no bound.

    Raises:
        ConfigurationError: Naming the first attribute that is wrong.
    """

    max_summary_tokens: int = 1000
    prompts: Prompts | None = None
    token_counter: TokenCounter = approx_tokens
    message_overhead: int = DEFAULT_MESSAGE_OVERHEAD
    summary_role: str = "system"
    summary_template: str = DEFAULT_SUMMARY_TEMPLATE
    max_input_tokens: InputBoundSetting = "auto"

    def __post_init__(self) -> None:
        positive_int("max_summary_tokens", self.max_summary_tokens)
        if self.prompts is not None and not isinstance(self.prompts, Prompts):
            raise ConfigurationError(
                f"prompts must be a Prompts(...) object, got {type(self.prompts).__name__}"
            )
        check_token_counter(self.token_counter)
        check_message_overhead(self.message_overhead)
        check_choice("summary_role", self.summary_role, SUMMARY_ROLES)
        check_template("summary_template", self.summary_template, start=0, end=0, count=0)
        check_max_input_tokens(self.max_input_tokens)
        if isinstance(self.max_input_tokens, int):
            prompt_tokens = self.prompt_tokens(self.token_counter)
            check_input_room(self.max_input_tokens, self.max_summary_tokens, prompt_tokens)

    @property
    def resolved_prompts(self) -> Prompts:
        """The prompts to use: the given ones, or the default ones."""
        return self.prompts if self.prompts is not None else Prompts()

    def prompt_tokens(self, count: TokenCounter) -> int:
        """Tokens of the longer of the prompts messages are sent with (summarize, extend),
        the budget filled in, as ``count`` counts them."""
        prompts = self.resolved_prompts
        budget = str(self.max_summary_tokens)
        return max(
            count(prompt.replace("{max_tokens}", budget))
            for prompt in (prompts.summarize, prompts.extend)
        )

    def input_bound(self, prompt_tokens: int) -> int | None:
        """The bound ``max_input_tokens`` sets, ``"auto"`` resolved; ``None``: no bound.

        Args:
            prompt_tokens: :meth:`prompt_tokens`, counted once by the caller.
        """
        if self.max_input_tokens != "auto":
            return self.max_input_tokens
        budget = self.max_summary_tokens
        return max(
            DEFAULT_MAX_INPUT_TOKENS,
            INPUT_TOKENS_PER_SUMMARY_TOKEN * budget,
            prompt_tokens + 2 * budget,
        )

    def bound(self, count: TokenCounter, *, sends_previous: bool) -> InputBound:
        """What one summarizer call may receive under these settings.

        Args:
            count: The counter to measure with (``token_counter``, or one remembering its
                counts).
            sends_previous: Whether the strategy sends the previous summary with messages.
        """
        prompt_tokens = self.prompt_tokens(count) if self.max_input_tokens is not None else 0
        return InputBound(
            self.input_bound(prompt_tokens),
            reserve=self.max_summary_tokens,
            prompt_tokens=prompt_tokens,
            sends_previous=sends_previous,
            count=count,
            overhead=self.message_overhead,
        )


@dataclass(frozen=True)
class CacheOptions:
    """Where and how summaries are cached in the store.

    Attributes:
        namespace: Namespace of every store key.
        ttl: Seconds cached entries live (``None``: until deleted).
        checkpoints: How many ranges a thread's index lists.
        reuse_entries: ``"matching"`` or ``"any"``.
        fingerprint: ``"content"`` or ``"id"``.
        summarizer_id: Name recorded in cached entries (``None``: the function's name).

    Raises:
        ConfigurationError: Naming the first attribute that is wrong.
    """

    namespace: str = ""
    ttl: float | None = None
    checkpoints: int = 64
    reuse_entries: str = "matching"
    fingerprint: str = "content"
    summarizer_id: str | None = None

    def __post_init__(self) -> None:
        normalize_namespace(self.namespace)
        object.__setattr__(self, "ttl", validate_ttl(self.ttl))
        positive_int("checkpoints", self.checkpoints)
        check_choice("reuse_entries", self.reuse_entries, ("matching", "any"))
        fingerprints_by_id(self.fingerprint)
        if self.summarizer_id is not None and (
            not isinstance(self.summarizer_id, str) or not self.summarizer_id
        ):
            raise ConfigurationError(
                f"summarizer_id must be a non-empty string or None, got {self.summarizer_id!r}"
            )

    @property
    def by_id(self) -> bool:
        """Whether messages are fingerprinted by their ``id``."""
        return self.fingerprint == "id"


@dataclass(frozen=True)
class Coordination:
    """How workers sharing a store take turns on a thread.

    Attributes:
        lock_wait: Seconds to wait for another worker's summary; 0 disables waiting.
        lease_ttl: Seconds a worker's lease lives without renewal.
        single_writer: Only one worker ever compresses a given thread at a time.

    Raises:
        ConfigurationError: Naming the first attribute that is wrong.
    """

    lock_wait: float = 30.0
    lease_ttl: float = 10.0
    single_writer: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "lock_wait", check_lock_wait(self.lock_wait))
        lease = check_seconds_or_none("lease_ttl", self.lease_ttl)
        if lease is None:
            raise ConfigurationError("lease_ttl must be a number of seconds, got None")
        object.__setattr__(self, "lease_ttl", lease)
        check_flag("single_writer", self.single_writer)


@dataclass(frozen=True)
class Refresh:
    """When a due summary is made: before the request is answered, or after it.

    Attributes:
        refresh: ``"inline"``: the request waits for it. ``"background"``: a request still
            within ``ceiling`` is answered with the summary the store has (or none) and every
            later message, and the summary is extended in the background.
        ceiling: With ``"background"``, a trigger saying how much an answer may hold (the
            pinned messages, the summary served and every message after it): a request over
            it waits. Required then, and refused with ``"inline"``.
        trigger: The compressor's trigger, resolved: a ceiling of the same kind must be above
            it, or no request could ever be answered without waiting.

    Raises:
        ConfigurationError: Naming the first attribute that is wrong.
    """

    refresh: str = "inline"
    ceiling: Trigger | None = None
    trigger: Trigger | None = None

    def __post_init__(self) -> None:
        check_choice("refresh", self.refresh, ("inline", "background"))
        ceiling = self.ceiling
        if ceiling is not None:
            if isinstance(ceiling, int) and not isinstance(ceiling, bool):
                raise ConfigurationError(
                    f"ceiling must be a policy, not the number {ceiling}: write "
                    f"ceiling=MessageThreshold({ceiling}) (or TokenThreshold({ceiling}) to "
                    "count tokens)"
                )
            if not conforms(ceiling, Trigger):
                raise ConfigurationError(f"ceiling has no reason() method: {ceiling!r}")
            if self.trigger is not None:
                _check_ceiling_above(ceiling, self.trigger)
            if self.refresh == "inline":
                raise ConfigurationError(
                    "ceiling applies only with refresh='background' (got refresh='inline')"
                )
        elif self.refresh == "background":
            raise ConfigurationError(
                "refresh='background' needs a ceiling, the most an answer may hold while its "
                "summary is extended in the background: ceiling=MessageThreshold(40), say"
            )


def _check_ceiling_above(ceiling: Trigger, trigger: Trigger) -> None:
    """Refuse a ceiling at or below a trigger counting the same thing."""
    bound = _threshold(ceiling)
    for item in trigger.triggers if isinstance(trigger, AnyOf) else (trigger,):
        fires = _threshold(item)
        if (
            bound is not None
            and fires is not None
            and bound[0] is fires[0]
            and bound[1] <= fires[1]
        ):
            raise ConfigurationError(
                f"ceiling {ceiling!r} must be above the trigger {item!r}: every request the "
                "trigger fires on would be over it, and wait"
            )


def _threshold(policy: Trigger) -> tuple[type, int] | None:
    """A built-in threshold's kind and the count above which it fires; ``None`` for others."""
    if isinstance(policy, MessageThreshold):
        return MessageThreshold, policy.messages
    if isinstance(policy, TokenThreshold):
        return TokenThreshold, policy.tokens
    if isinstance(policy, ContextWindow):
        return ContextWindow, policy.limit
    return None


@dataclass(frozen=True)
class Timeouts:
    """How long one call may take; ``None`` sets no bound.

    Attributes:
        summarizer_timeout: Seconds one summarizer call may take.
        store_timeout: Seconds one store call may take.

    Raises:
        ConfigurationError: Naming the first attribute that is wrong.
    """

    summarizer_timeout: float | None = None
    store_timeout: float | None = DEFAULT_STORE_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("summarizer_timeout", "store_timeout"):
            object.__setattr__(self, name, check_seconds_or_none(name, getattr(self, name)))


@dataclass(frozen=True)
class ErrorHandling:
    """What a failing summarizer or store does to a request.

    Attributes:
        on_summarizer_error: ``"raise"`` or ``"uncompressed"``.
        on_store_error: ``"raise"`` or ``"bypass"``.
        on_over_budget: ``"cut"`` or ``"raise"``.

    Raises:
        ConfigurationError: Naming the first attribute that is wrong.
    """

    on_summarizer_error: str = "raise"
    on_store_error: str = "raise"
    on_over_budget: str = "cut"

    def __post_init__(self) -> None:
        check_choice("on_summarizer_error", self.on_summarizer_error, ("raise", "uncompressed"))
        check_choice("on_store_error", self.on_store_error, ("raise", "bypass"))
        check_choice("on_over_budget", self.on_over_budget, ("cut", "raise"))


@dataclass(frozen=True)
class Hooks:
    """The user's hooks, sync or async; each ``None`` or a callable.

    Attributes:
        on_evict: ``(messages, reason)`` with the messages folded into a summary.
        on_compress: ``(CompressEvent)`` after a summary is made; or convo-compress's
            ``(messages, summary, ms)``, for a hook that takes two or more arguments.
        on_cache_hit: ``(CompressEvent)`` when a cached summary is served.
        on_error: ``(exception, messages)`` when the summarizer or store fails.
        on_compact_start: ``(evicted_count, total_tokens)`` before a window compacts.
        on_compact_end: ``(tokens_before, tokens_after, ratio)`` after a window compacted.

    Raises:
        ConfigurationError: Naming the first hook that is not callable.
    """

    on_evict: Hook | None = None
    on_compress: Hook | None = None
    on_cache_hit: Hook | None = None
    on_error: Hook | None = None
    on_compact_start: Hook | None = None
    on_compact_end: Hook | None = None

    def __post_init__(self) -> None:
        check_callables(vars(self))

    def pick(self, *names: str) -> dict[str, Hook | None]:
        """The named hooks by name (``None`` where not set), as a front door calls them."""
        return {name: getattr(self, name) for name in names}


def takes_messages_summary_ms(hook: Any) -> bool:
    """Whether an ``on_compress`` hook has convo-compress's shape, ``(messages, summary, ms)``,
    rather than slimcache's ``(CompressEvent)``: it requires two or more positional arguments."""
    if hook is None:
        return False
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in parameters if p.kind in positional and p.default is p.empty]
    return len(required) >= 2


async def call_hook(name: str, hook: Any, *args: Any) -> None:
    """Call a user's hook, sync or async; a hook that raises is logged, never propagated.

    A broken hook must not lose the user's compression: it is reported, not hidden.
    """
    if hook is None:
        return
    try:
        result = hook(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("%s hook raised", name)
