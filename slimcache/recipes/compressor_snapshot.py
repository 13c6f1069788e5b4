"""The JSON snapshot of a :class:`ConversationCompressor`: its checks, and settings as JSON.

:meth:`ConversationCompressor.serialize` writes the snapshot and
:meth:`ConversationCompressor.deserialize` reads it back; the settings that are plain data
(built-in triggers, keep policies and strategies, prompts) are written as JSON, and anything
of the caller's own as ``null``, to be given again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from slimcache._exceptions import ConfigurationError, InvalidInput, SummarizerError
from slimcache.core.policy import (
    BUILT_IN_KEEPS,
    BUILT_IN_TRIGGERS,
    AnyOf,
    Keep,
    Trigger,
    built_in_name,
)
from slimcache.core.strategies import (
    Concat,
    Extend,
    Hybrid,
    Replace,
    Strategy,
    SummarizeFn,
    Tree,
    Weighted,
)
from slimcache.core.summarizer import (
    OnOverBudget,
    Prompts,
    Summarizer,
    SummaryContext,
    Task,
    call_summarizer,
    input_tokens,
    keep_within_budget,
)
from slimcache.messages import (
    CheckedMessages,
    Message,
    TokenCounter,
    check_messages,
)

__all__ = [
    "COUNTERS",
    "STATE_FORMAT",
    "STATE_VERSION",
    "ConversationStats",
    "Counters",
    "SummaryCalls",
    "check_state",
    "check_state_messages",
    "given_or_saved",
    "json_copy",
    "keep_from_json",
    "keep_to_json",
    "prompts_from_json",
    "prompts_to_json",
    "run_strategy",
    "saved_objects",
    "strategy_from_json",
    "strategy_to_json",
    "trigger_from_json",
    "trigger_to_json",
]

STATE_VERSION = 1
"""The version of the snapshot :meth:`ConversationCompressor.serialize` writes."""
STATE_FORMAT = "slimcache.conversation"
COUNTERS = (
    "total_messages",
    "messages_compressed",
    "total_input_tokens",
    "summarization_calls",
    "summarizer_input_tokens",
    "summarizer_errors",
)


_T = TypeVar("_T")
_P = TypeVar("_P")


@dataclass(frozen=True)
class ConversationStats:
    """A snapshot of a :class:`ConversationCompressor`'s counters and state.

    Counters run since creation (or the last ``reset_stats``); the others describe the
    compressor as it is now.

    Attributes:
        total_messages: Messages added (counter).
        messages_compressed: Messages folded into the summary (counter).
        messages_in_window: Messages kept verbatim now, pinned system messages included.
        total_input_tokens: Tokens of the messages added (counter).
        summary_tokens: Tokens of the current summary text (0 without one).
        window_tokens: Tokens of the messages kept verbatim now.
        compression_ratio: ``messages_compressed / total_messages`` (0.0 before any message).
        summarization_calls: Summarizer calls made (counter).
        summarizer_input_tokens: Tokens sent to the summarizer: prompts, previous summaries and
            messages (counter).
        summarizer_errors: Compressions that failed because the summarizer did (counter).
    """

    total_messages: int
    messages_compressed: int
    messages_in_window: int
    total_input_tokens: int
    summary_tokens: int
    window_tokens: int
    compression_ratio: float
    summarization_calls: int
    summarizer_input_tokens: int
    summarizer_errors: int


@dataclass
class Counters:
    """The counters a compressor keeps, and its snapshot holds."""

    total_messages: int = 0
    messages_compressed: int = 0
    total_input_tokens: int = 0
    summarization_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_errors: int = 0


def json_copy(message: Message, index: int) -> dict[str, Any]:
    """A plain JSON copy of a message, so that the state always serializes."""
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(message), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"message must be JSON-serializable to be kept in the state ({exc})", index=index
        ) from None
    return copied


def given_or_saved(name: str, given: _T | None, saved: _T | None) -> _T:
    """The setting given to ``deserialize``, else the snapshot's."""
    if given is not None:
        return given
    if saved is None:
        raise ConfigurationError(
            f"the state's {name} could not be saved (an object of your own, or a Custom merge): "
            f"pass {name}=... to deserialize"
        )
    return saved


# ---------------------------------------------------------------------- snapshot checks


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_state(state: object) -> dict[str, Any]:
    """Check a snapshot's shape and version; return it as a dict."""
    if not isinstance(state, Mapping):
        raise InvalidInput(f"state must be a dict from serialize(), got {type(state).__name__}")
    if state.get("format") != STATE_FORMAT:
        raise InvalidInput(
            f"state is not a ConversationCompressor snapshot (format {state.get('format')!r})"
        )
    version = state.get("version")
    if version != STATE_VERSION:
        raise InvalidInput(
            f"state version {version!r} is not supported (this slimcache reads version "
            f"{STATE_VERSION})"
        )
    summary = state.get("summary")
    if summary is not None and (not isinstance(summary, str) or not summary.strip()):
        raise InvalidInput("state['summary'] must be a non-empty string or null")
    summarized = state.get("summarized")
    if not _is_count(summarized):
        raise InvalidInput("state['summarized'] must be an integer >= 0")
    if (summary is None) != (summarized == 0):
        raise InvalidInput("state['summary'] and state['summarized'] disagree")
    for key in ("pinned", "window"):
        if not isinstance(state.get(key), list):
            raise InvalidInput(f"state[{key!r}] must be a list of messages")
    counters = state.get("counters")
    if not isinstance(counters, Mapping) or not all(
        _is_count(counters.get(name)) for name in COUNTERS
    ):
        raise InvalidInput(f"state['counters'] must hold integers >= 0: {', '.join(COUNTERS)}")
    settings = state.get("settings")
    if not isinstance(settings, Mapping):
        raise InvalidInput("state['settings'] must be a dict")
    for key, kinds in _SCALAR_SETTINGS.items():
        value = settings.get(key)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise InvalidInput(f"state['settings'][{key!r}] has the wrong type: {value!r:.60}")
    return dict(state)


# The plain settings a snapshot holds, and the JSON types each may have.
_SCALAR_SETTINGS: dict[str, tuple[type, ...]] = {
    "max_summary_tokens": (int,),
    "message_overhead": (int,),
    "summary_role": (str,),
    "summary_template": (str,),
    "summarizer_timeout": (int, float, type(None)),
}


def check_state_messages(
    messages: list[Any], key: str, counter: TokenCounter, overhead: int
) -> CheckedMessages:
    """Check a snapshot's messages under ``state[key]``; errors name where they are."""
    try:
        return check_messages(messages, counter, overhead)
    except InvalidInput as exc:
        where = f"state[{key!r}][{exc.index}]" if exc.index is not None else f"state[{key!r}]"
        raise InvalidInput(f"{where}: {exc.rule}") from None


# ---------------------------------------------------------------------- settings as JSON


def _settings(policy: object) -> dict[str, Any]:
    """A built-in policy's settings: its dataclass fields."""
    return {field.name: getattr(policy, field.name) for field in fields(policy)}  # type: ignore[arg-type]


def trigger_to_json(trigger: Trigger) -> dict[str, Any] | None:
    """A built-in trigger as JSON; ``None`` for one of the caller's own."""
    kind = built_in_name(trigger, BUILT_IN_TRIGGERS)
    if kind is None:
        return None
    if isinstance(trigger, AnyOf):
        parts = [trigger_to_json(item) for item in trigger.triggers]
        if any(part is None for part in parts):
            return None
        return {"type": kind, "triggers": parts}
    return {"type": kind, **_settings(trigger)}


def trigger_from_json(data: object) -> Trigger | None:
    """The trigger :func:`trigger_to_json` wrote (``None`` for ``null``)."""
    if data is None:
        return None
    kind, data = _built_in_kind(data, BUILT_IN_TRIGGERS, "trigger")
    if kind is AnyOf:
        parts = data["triggers"]
        if not isinstance(parts, list):
            raise TypeError("any_of triggers must be a list")
        triggers = [trigger_from_json(part) for part in parts]
        if any(item is None for item in triggers):
            raise ValueError("any_of holds an unknown trigger")
        return AnyOf(*(item for item in triggers if item is not None))
    return kind(**{field.name: data[field.name] for field in fields(kind)})  # type: ignore[arg-type]


def keep_to_json(keep: Keep) -> dict[str, Any] | None:
    """A built-in keep policy as JSON; ``None`` for one of the caller's own."""
    kind = built_in_name(keep, BUILT_IN_KEEPS)
    return None if kind is None else {"type": kind, **_settings(keep)}


def keep_from_json(data: object) -> Keep | None:
    """The keep policy :func:`keep_to_json` wrote (``None`` for ``null``)."""
    if data is None:
        return None
    kind, data = _built_in_kind(data, BUILT_IN_KEEPS, "keep")
    return kind(**{field.name: data[field.name] for field in fields(kind)})  # type: ignore[arg-type]


def _built_in_kind(
    data: object, registry: Mapping[str, type[_P]], what: str
) -> tuple[type[_P], Mapping[str, Any]]:
    """The built-in policy class a snapshot's ``{"type": ...}`` names in ``registry``, and the
    snapshot's dict.

    Raises:
        TypeError: ``data`` is not a dict.
        ValueError: Its ``"type"`` names no built-in policy.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"{what} must be a dict or null, got {type(data).__name__}")
    name = data.get("type")
    kind = registry.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"unknown {what} type {name!r}")
    return kind, data


_PLAIN_STRATEGIES: dict[str, type[Strategy]] = {
    "extend": Extend,
    "tree": Tree,
    "concat": Concat,
    "replace": Replace,
    "weighted": Weighted,
}


def strategy_to_json(strategy: Strategy) -> dict[str, Any] | None:
    """A built-in strategy as JSON; ``None`` for a :class:`Custom` or the caller's own."""
    for name, kind in _PLAIN_STRATEGIES.items():
        if type(strategy) is kind:
            return {"type": name}
    if type(strategy) is Hybrid:
        assert isinstance(strategy, Hybrid)
        return {"type": "hybrid", "max_tokens": strategy.max_tokens}
    return None


def strategy_from_json(data: object) -> Strategy | None:
    """The strategy :func:`strategy_to_json` wrote (``None`` for ``null``)."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError(f"strategy must be a dict or null, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "hybrid":
        return Hybrid(data.get("max_tokens"))
    if isinstance(kind, str) and kind in _PLAIN_STRATEGIES:
        return _PLAIN_STRATEGIES[kind]()
    raise ValueError(f"unknown strategy type {kind!r}")


def prompts_to_json(prompts: Prompts) -> dict[str, str]:
    """The prompts as JSON."""
    return {"summarize": prompts.summarize, "extend": prompts.extend, "condense": prompts.condense}


def saved_objects(
    settings: Mapping[str, Any],
) -> tuple[Trigger | None, Keep | None, Strategy | None, Prompts]:
    """The trigger, keep policy, strategy and prompts a snapshot's settings hold.

    Raises:
        InvalidInput: One of them is malformed.
    """
    try:
        return (
            trigger_from_json(settings.get("trigger")),
            keep_from_json(settings.get("keep")),
            strategy_from_json(settings.get("strategy")),
            prompts_from_json(settings.get("prompts")),
        )
    except (ConfigurationError, KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"state['settings'] is malformed: {exc}") from None


def prompts_from_json(data: object) -> Prompts:
    """The prompts :func:`prompts_to_json` wrote (the defaults for ``null``)."""
    if data is None:
        return Prompts()
    if not isinstance(data, Mapping):
        raise TypeError(f"prompts must be a dict, got {type(data).__name__}")
    summarize, extend, condense = (data.get(key) for key in ("summarize", "extend", "condense"))
    if not (isinstance(summarize, str) and isinstance(extend, str) and isinstance(condense, str)):
        raise TypeError("prompts must hold the strings summarize, extend and condense")
    return Prompts(summarize, extend, condense)


async def run_strategy(
    strategy: Strategy,
    before: str | None,
    evicted: list[dict[str, Any]],
    summarize: SummarizeFn,
    count: TokenCounter,
    max_tokens: int,
) -> str:
    """Run ``strategy``; its failure, or an empty summary, is a :class:`SummarizerError`."""
    try:
        summary = await strategy.combine(
            before, evicted, summarize, count=count, max_tokens=max_tokens
        )
    except SummarizerError:
        raise
    except Exception as exc:
        raise SummarizerError(
            f"strategy {strategy.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(summary, str) or not summary.strip():
        raise SummarizerError(f"strategy {strategy.name} returned an empty or non-string summary")
    return summary


def restored_messages(
    data: dict[str, Any], count: TokenCounter, overhead: int
) -> tuple[list[dict[str, Any]], CheckedMessages, list[dict[str, Any]], CheckedMessages]:
    """A checked snapshot's pinned messages and window, copied, each with its check.

    Raises:
        InvalidInput: A message is malformed, ``pinned`` holds other than system and developer
            messages, or there is a summary but no window.
    """
    pinned: list[dict[str, Any]] = data["pinned"]
    window: list[dict[str, Any]] = data["window"]
    checked_pinned = check_state_messages(pinned, "pinned", count, overhead)
    if checked_pinned.pinned != len(pinned):
        raise InvalidInput("state['pinned'] may hold only system and developer messages")
    checked = check_state_messages(window, "window", count, overhead)
    if data["summary"] is not None and not window:
        raise InvalidInput("state has a summary but an empty window")
    copied_pinned = [json_copy(m, i) for i, m in enumerate(pinned)]
    return copied_pinned, checked_pinned, [json_copy(m, i) for i, m in enumerate(window)], checked


class SummaryCalls:
    """The summarizer calls of one compression of a :class:`ConversationCompressor`.

    Called as the strategy's ``summarize`` function: builds each call's context and prompt,
    counts what is sent in ``counters`` (and in ``calls`` and ``sent_tokens``, for the
    compression's event), and holds each summary to its budget (see
    :func:`~slimcache.core.summarizer.keep_within_budget`).
    """

    def __init__(
        self,
        summarizer: Summarizer,
        prompts: Prompts,
        count: TokenCounter,
        overhead: int,
        max_tokens: int,
        timeout: float | None,
        counters: Counters,
        *,
        first: int,
        last: int,
        pinned: int,
        on_over_budget: OnOverBudget,
    ) -> None:
        self.summarizer, self.prompts, self.count = summarizer, prompts, count
        self.on_over_budget = on_over_budget
        self.overhead, self.max_tokens, self.timeout = overhead, max_tokens, timeout
        self.counters = counters
        self.first, self.last, self.pinned = first, last, pinned
        self.calls = 0
        self.sent_tokens = 0

    async def __call__(
        self,
        task: Task,
        messages: Sequence[Message],
        previous: str | None,
        *,
        emphasis: str | None = None,
        max_tokens: int | None = None,
        first: int | None = None,
    ) -> str:
        """Call the summarizer once for ``task`` (and once more to condense an over-budget
        summary); ``max_tokens``: this call's budget, at most the compressor's; ``first``: the
        index of ``messages[0]`` when not the evicted messages' first."""
        budget = self.max_tokens if max_tokens is None else min(max_tokens, self.max_tokens)
        if previous is not None:
            previous = str(previous)
        prompt = self.prompts.render(task, budget, emphasis)
        begins = self.first if first is None else first
        start = self.pinned if task == "condense" else begins
        context = SummaryContext(
            task=task,
            previous_summary=previous,
            max_tokens=budget,
            prompt=prompt,
            thread_id=None,
            start=start,
            end=self.last if messages or task == "condense" else start - 1,
        )
        sent = input_tokens(prompt, messages, previous, self.count, self.overhead)
        self.calls += 1
        self.sent_tokens += sent
        self.counters.summarization_calls += 1
        self.counters.summarizer_input_tokens += sent
        summary = await call_summarizer(self.summarizer, messages, context, timeout=self.timeout)
        if task == "condense":
            return summary

        async def condense(text: str) -> str:
            return await self("condense", [], text, max_tokens=budget)

        kept = await keep_within_budget(
            summary, budget, self.count, condense, on_over_budget=self.on_over_budget
        )
        return kept.summary
