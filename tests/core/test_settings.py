"""Every argument of every front door is checked, with a message naming it, before any write.

The table below holds wrong values for each argument; the test reads each front door's
parameters from its signature, so an argument added without a wrong-value case fails here.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import FrozenInstanceError, fields, replace
from pathlib import Path
from typing import Any

import pytest

from slimcache import (
    CachedSummarizer,
    Compaction,
    ConfigurationError,
    ConversationCompressor,
    ConversationWindowMemory,
    InvalidInput,
    KeepMessages,
    MessageThreshold,
    Prompts,
    SlidingWindow,
    SummarizeCompressor,
    TokenWindowMemory,
    TrimCompressor,
    cached_summarizer,
)
from slimcache.core.settings.compressor import (
    CHECKS,
    DEFAULTS,
    CompressorSettings,
    check_fields,
)
from slimcache.core.settings.groups import DEFAULT_KEEP, prompt_tokens
from slimcache.core.strategies import Tree
from slimcache.langchain import CachedSummarizationMiddleware, as_langchain_summarizer
from tests.fakes import CountingStore, RecordingSummarizer


def plain_summarize(messages: list[dict[str, Any]]) -> str:
    return "summary"


class NotAStore:
    """Has a ``get`` but not the rest of the store protocol."""

    async def get(self, key: str) -> str | None:
        return None


NOT_CALLABLE = ["print", 5]
POSITIVE_INT = ["10", 0, -3, True, 2.5, None]
SECONDS_OR_NONE = ["5", 0, -1.0, True, math.inf, math.nan, [5]]
# A store URL is a store argument too (every front door opens it), but not one of no scheme
# any adapter registers.
STORE = [5, NotAStore(), "nowhere://host"]

# Wrong values by argument name; an argument means the same in every front door taking it.
BAD: dict[str, list[Any]] = {
    "summarizer": [None, "gpt-4o", 5, plain_summarize],
    "summarize": [None, "gpt-4o", 5],
    "store": STORE,
    "trigger": [5, "messages", KeepMessages(3), 6.5],
    "keep": [5, "all", MessageThreshold(3), 4.0],
    "strategy": ["merge", "custom", 5, None],
    "max_summary_tokens": POSITIVE_INT,
    # 100 leaves no room beside the prompt and a previous summary of the default 1,000 tokens.
    "max_input_tokens": ["6000", "none", "Auto", 0, -5, True, 2.5, 100, 2000],
    "summary_budget": POSITIVE_INT,
    "prompts": ["hello", 5, {"summarize": "Summarize."}],
    "token_counter": [5, "tiktoken", None],
    "message_overhead": ["4", -1, True, 1.5, None],
    "summary_role": ["robot", "System", 5, None],
    "summary_template": [5, None, "no placeholder", "{summary} {unknown}", "{summary} {"],
    "namespace": [5, None, "a\nb", "nul\x00"],
    "ttl": ["60", 0, -1, True, math.inf, math.nan],
    "checkpoints": POSITIVE_INT,
    "summarizer_timeout": SECONDS_OR_NONE,
    "store_timeout": SECONDS_OR_NONE,
    "on_summarizer_error": ["ignore", 5, None],
    "on_store_error": ["ignore", 5, None],
    "on_over_budget": ["truncate", 5, None],
    "breaker_failures": [0, -1, "2", True, 1.5],
    "summarizer_id": [5, "", b"model"],
    "reuse_entries": ["some", 5, None],
    "lock_wait": ["30", -1, True, None, math.nan],
    "lease_ttl": ["10", 0, -1, True, None, math.inf],
    "single_writer": ["yes", 1, None],
    "fingerprint": ["hash", 5, None],
    # "background" needs a ceiling; MessageThreshold(20) is not above the default trigger.
    "refresh": ["later", "Background", 5, None, "background"],
    "ceiling": [40, "messages", KeepMessages(3), MessageThreshold(20), MessageThreshold(40)],
    "on_evict": NOT_CALLABLE,
    "on_compress": NOT_CALLABLE,
    "on_cache_hit": NOT_CALLABLE,
    "on_error": NOT_CALLABLE,
    "on_compact_start": NOT_CALLABLE,
    "on_compact_end": NOT_CALLABLE,
    "window_size": POSITIVE_INT,
    "batch": [0, -1, "4", True, 2.5],
    "extend": NOT_CALLABLE,
    "mode": ["manual", 5, None],
    "context_window": POSITIVE_INT,
    "instructions": ["", "   ", 5],
    "session_role": ["assistant", 5, None],
    "session_template": [5, None, "no placeholder", "{summary} {start}"],
    "chunk_size": POSITIVE_INT,
    "max_tokens": POSITIVE_INT,
    "keep_system": ["yes", 1, None],
    "model": [None, 5, "no-such-provider:model"],
    "summary_placement": ["user", 5, None],
    "on_truncated": ["keep", 5, None],
    "max_tokens_kwarg": ["", "extra_body.", "a.b.c", 5],
    # The id is a thread id, and a malformed thread id is InvalidInput everywhere.
    "id": ["", "  ", 1.5, None, True],
    # LangChain's SummarizationMiddleware keywords, on the LangChain middleware.
    "summary_prompt": [5, "Summarize.", "{messages} {other}", "{messages} {"],
    # 100 and 2000 leave no room beside the prompt and a previous summary, as above.
    "trim_tokens_to_summarize": ["4000", 0, -5, True, 2.5, 100, 2000],
}

# Wrong values of an argument that means more in one front door.
BAD_IN: dict[tuple[Callable[..., Any], str], list[Any]] = {
    # LangChain's summarizer=: None is no summarizer of its own, and a function of the
    # messages is one.
    (CachedSummarizationMiddleware, "summarizer"): ["no-such-provider:model", 5, object()],
}

# What each argument's wrong value raises, and the name its message uses, where not
# ConfigurationError and the argument's own name.
RAISES: dict[str, tuple[type[Exception], str]] = {"id": (InvalidInput, "id must")}


def summarize_compressor(recorder: CountingStore, **args: Any) -> Any:
    return SummarizeCompressor(
        args.pop("summarizer", RecordingSummarizer()), args.pop("store", recorder), **args
    )


def conversation_compressor(recorder: CountingStore, **args: Any) -> Any:
    return ConversationCompressor(args.pop("summarizer", RecordingSummarizer()), **args)


def sliding_window(recorder: CountingStore, **args: Any) -> Any:
    return SlidingWindow(
        args.pop("id", "w"),
        args.pop("window_size", 4),
        args.pop("summarizer", RecordingSummarizer()),
        args.pop("store", recorder),
        **args,
    )


def cached_summarizer_class(recorder: CountingStore, **args: Any) -> Any:
    return CachedSummarizer(
        args.pop("summarize", plain_summarize), args.pop("store", recorder), **args
    )


def cached_summarizer_decorator(recorder: CountingStore, **args: Any) -> Any:
    # The decorator reports a wrong argument where it is written, before wrapping anything;
    # a store URL is opened for each function it wraps, so a wrong one is reported there.
    return cached_summarizer(args.pop("store", recorder), **args)(plain_summarize)


def compaction(recorder: CountingStore, **args: Any) -> Any:
    args.setdefault("context_window", 1000)
    args.setdefault("store", recorder)
    return Compaction(args.pop("mode", "llm"), **args)


def conversation_window_memory(recorder: CountingStore, **args: Any) -> Any:
    return ConversationWindowMemory(args.pop("store", recorder), args.pop("window_size", 8), **args)


def token_window_memory(recorder: CountingStore, **args: Any) -> Any:
    return TokenWindowMemory(args.pop("store", recorder), args.pop("max_tokens", 100), **args)


def trim_compressor(recorder: CountingStore, **args: Any) -> Any:
    return TrimCompressor(args.pop("max_tokens", 100), **args)


def cached_summarization_middleware(recorder: CountingStore, **args: Any) -> Any:
    return CachedSummarizationMiddleware(
        args.pop("model", RecordingSummarizer()), args.pop("store", recorder), **args
    )


def langchain_summarizer(recorder: CountingStore, **args: Any) -> Any:
    return as_langchain_summarizer(args.pop("summarizer", RecordingSummarizer()), **args)


# Each front door, and how to build it from valid arguments with some replaced.
FRONT_DOORS: dict[Callable[..., Any], Callable[..., Any]] = {
    SummarizeCompressor: summarize_compressor,
    ConversationCompressor: conversation_compressor,
    SlidingWindow: sliding_window,
    CachedSummarizer: cached_summarizer_class,
    cached_summarizer: cached_summarizer_decorator,
    Compaction: compaction,
    ConversationWindowMemory: conversation_window_memory,
    TokenWindowMemory: token_window_memory,
    TrimCompressor: trim_compressor,
    CachedSummarizationMiddleware: cached_summarization_middleware,
    as_langchain_summarizer: langchain_summarizer,
}


def parameters(door: Callable[..., Any]) -> list[str]:
    """The named arguments (LangChain's deprecated ones, taken as ``**``, are tested apart)."""
    found = inspect.signature(door).parameters.values()
    return [p.name for p in found if p.name != "self" and p.kind is not p.VAR_KEYWORD]


def bad_values(door: Callable[..., Any], name: str) -> list[Any]:
    return BAD_IN.get((door, name), BAD.get(name, []))


CASES = [
    pytest.param(door, name, value, id=f"{door.__name__}-{name}-{number}")
    for door in FRONT_DOORS
    for name in parameters(door)
    for number, value in enumerate(bad_values(door, name))
]


@pytest.mark.parametrize("door", list(FRONT_DOORS), ids=lambda door: door.__name__)
def test_every_argument_has_wrong_values(door: Callable[..., Any]) -> None:
    untested = [name for name in parameters(door) if not bad_values(door, name)]
    assert not untested, f"{door.__name__} arguments without a wrong-value case: {untested}"


@pytest.mark.parametrize("door", list(FRONT_DOORS), ids=lambda door: door.__name__)
def test_valid_arguments_build_and_write_nothing(door: Callable[..., Any]) -> None:
    store = CountingStore()
    FRONT_DOORS[door](store)
    assert (store.sets, store.deletes, store.data) == (0, 0, {})


@pytest.mark.parametrize(("door", "name", "value"), CASES)
def test_wrong_value_is_rejected_naming_the_argument(
    door: Callable[..., Any], name: str, value: Any
) -> None:
    store = CountingStore()
    error, named = RAISES.get(name, (ConfigurationError, name))
    with pytest.raises(error) as caught:
        FRONT_DOORS[door](store, **{name: value})
    assert named in str(caught.value)
    assert (store.sets, store.deletes, store.data) == (0, 0, {})


def test_sibling_keep_defaults_are_the_documented_ones() -> None:
    # The in-process compressor keeps convo-compress's default window of 12, and says so; every
    # other compressor keeps DEFAULT_KEEP.
    summarizer = RecordingSummarizer()
    assert (
        SummarizeCompressor(summarizer)._derived.keep
        == KeepMessages(DEFAULT_KEEP)
        == KeepMessages(10)
    )
    assert ConversationCompressor(summarizer)._keep == KeepMessages(12)
    assert "the last 12 messages" in (ConversationCompressor.__doc__ or "")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "`ConversationCompressor` keeps the last 12 messages" in readme


def test_cached_summarizer_checks_every_argument_before_wrapping() -> None:
    # Before, a wrong store_timeout passed the decorator and failed only once it wrapped.
    with pytest.raises(ConfigurationError, match="store_timeout"):
        cached_summarizer(store_timeout="5")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- the settings


def count_words(text: str) -> int:
    return len(text.split())


async def hook(*args: Any) -> None:
    return None


def test_every_setting_has_one_check_in_the_documented_order() -> None:
    assert list(CHECKS) == [setting.name for setting in fields(CompressorSettings)]
    documented = SummarizeCompressor.__doc__ or ""
    names = [name for name in CHECKS if name != "summarizer"]
    positions = [documented.index(f"        {name} (") for name in names]
    assert positions == sorted(positions)


VALID = CompressorSettings(
    RecordingSummarizer(),
    trigger=MessageThreshold(30),
    keep=KeepMessages(5),
    max_summary_tokens=200,
    max_input_tokens=5000,
    prompts=Prompts(summarize="Sum up in {max_tokens}.", extend="Extend in {max_tokens}."),
    token_counter=count_words,
    message_overhead=0,
    summary_role="developer",
    summary_template="Earlier ({start}-{end}, {count}): {summary}",
    namespace="app",
    ttl=60.0,
    checkpoints=3,
    summarizer_timeout=1.5,
    on_summarizer_error="uncompressed",
    on_store_error="bypass",
    on_over_budget="raise",
    summarizer_id="gpt-4o",
    reuse_entries="any",
    lock_wait=0.0,
    lease_ttl=2.5,
    single_writer=True,
    store_timeout=None,
    fingerprint="id",
    refresh="background",
    ceiling=MessageThreshold(40),
    on_evict=hook,
    on_compress=print,
    on_cache_hit=hook,
    on_error=hook,
)


def test_valid_settings_check_as_themselves() -> None:
    checked = VALID.check()
    assert checked == replace(VALID, strategy=checked.strategy)
    assert checked.strategy == Tree()  # the default's shortcut name resolved
    with pytest.raises(FrozenInstanceError):
        checked.ttl = None  # type: ignore[misc]


def test_the_checks_normalise_numbers_to_float_and_fill_in_the_prompts() -> None:
    checked = check_fields(ttl=5, lock_wait=3, lease_ttl=7, summarizer_timeout=2, prompts=None)
    assert checked == {
        "ttl": 5.0,
        "lock_wait": 3.0,
        "lease_ttl": 7.0,
        "summarizer_timeout": 2.0,
        "prompts": Prompts(),
    }
    assert {type(value) for name, value in checked.items() if name != "prompts"} == {float}
    # The namespace is checked, not changed: the keys add the separator.
    assert check_fields(namespace="app") == {"namespace": "app"}


def test_the_defaults_are_valid_and_the_compressors() -> None:
    defaults = inspect.signature(SummarizeCompressor).parameters
    checked = DEFAULTS.check()
    for setting in fields(CompressorSettings)[1:]:
        assert defaults[setting.name].default == getattr(DEFAULTS, setting.name)
        assert getattr(checked, setting.name) == getattr(DEFAULTS, setting.name) or (
            setting.name in ("strategy", "prompts")  # resolved: Tree(), Prompts()
        )


# Defaults of a front door that differ from the compressor's on purpose, each said in its
# docstring: cached_summarizer lists fewer checkpoints; the LangChain middleware takes
# LangChain's sizes, its summarizer=None (the model), and degrades rather than raise.
# (ConversationCompressor keeps convo-compress's 12 messages: its keep=None resolves to it.)
DIFFERENT_DEFAULTS: dict[tuple[Callable[..., Any], str], Any] = {
    (CachedSummarizer, "checkpoints"): 16,
    (cached_summarizer, "checkpoints"): 16,
    (CachedSummarizationMiddleware, "trigger"): ("messages", 50),
    (CachedSummarizationMiddleware, "keep"): ("messages", 20),
    (CachedSummarizationMiddleware, "summarizer"): None,
    (CachedSummarizationMiddleware, "on_summarizer_error"): "degrade",
    (ConversationCompressor, "strategy"): "extend",  # it drops what it summarized: no tree
}


@pytest.mark.parametrize("door", list(FRONT_DOORS), ids=lambda door: door.__name__)
def test_front_doors_default_to_the_compressors_defaults(door: Callable[..., Any]) -> None:
    differ = {
        name: parameter.default
        for name, parameter in inspect.signature(door).parameters.items()
        if name in CHECKS
        and parameter.default is not parameter.empty
        and parameter.default != DIFFERENT_DEFAULTS.get((door, name), getattr(DEFAULTS, name))
    }
    assert differ == {}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param(name, value, id=f"{name}-{number}")
        for name in CHECKS
        for number, value in enumerate(BAD[name])
    ],
)
def test_invalid_setting_raises_naming_it(name: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        replace(DEFAULTS, **{name: value}).check()
    assert name in str(caught.value)


# ---------------------------------------------------------------------- the input bound


def test_the_input_bound_by_default_fits_an_8k_model_and_grows_with_the_budget() -> None:
    # "auto": 6,000 with the default summary budget (a call and its 1,000-token reply fit an
    # 8,192-token context), 4 times a larger budget; None: no bound; a number: itself.
    def bound(**args: Any) -> int | None:
        return SummarizeCompressor(RecordingSummarizer(), **args)._derived.bound.limit

    assert bound() == 6000
    assert bound(max_summary_tokens=300) == 6000
    assert bound(max_summary_tokens=4000) == 16000
    assert bound(max_input_tokens=None) is None
    assert bound(max_input_tokens=2500) == 2500
    assert SlidingWindow("w", 4, RecordingSummarizer()).compressor._derived.bound.limit == 6000
    assert (
        SlidingWindow(
            "w", 4, RecordingSummarizer(), summary_budget=2000
        ).compressor._derived.bound.limit
        == 8000
    )


def test_an_input_bound_must_leave_room_for_a_summary_and_as_many_messages() -> None:
    # The default prompts count 60 and 67 tokens of ceil(len / 4) with a budget of 1000.
    prompt = prompt_tokens(Prompts(), 1000, lambda text: (len(text) + 3) // 4)
    least = prompt + 2 * 1000
    SummarizeCompressor(RecordingSummarizer(), max_input_tokens=least)
    with pytest.raises(ConfigurationError, match=f"max_input_tokens .* at least {least}, got"):
        SummarizeCompressor(RecordingSummarizer(), max_input_tokens=least - 1)
    # A prompt that long counts in the automatic bound too.
    long_prompt = Prompts(summarize="Summarize. " + "Keep every detail. " * 2000)
    compressor = SummarizeCompressor(RecordingSummarizer(), prompts=long_prompt)
    assert compressor._derived.bound.limit == compressor._derived.bound.prompt_tokens + 2 * 1000


HINTS: list[tuple[dict[str, Any], str]] = [
    (
        {"trigger": 6},
        "trigger must be a policy, not the number 6: write trigger=MessageThreshold(6)",
    ),
    ({"keep": 4}, "write keep=KeepMessages(4) (or KeepTokens(4) to count tokens)"),
    (
        {"store": "redis://app:pw0rd@cache:6379/0"},
        "not the URL string 'redis://app:***@cache:6379/0': open it first, "
        "store=open_store('redis://app:***@cache:6379/0')",
    ),
    ({"summarizer": plain_summarize}, "summarizer must take two arguments, (messages, context)"),
]


HINT_CASES = [
    pytest.param(door, given, hint, id=f"{door.__name__}-{next(iter(given))}")
    for door in (SummarizeCompressor, SlidingWindow, ConversationCompressor)
    for given, hint in HINTS
    # The front doors open a store URL they are given (see tests/recipes/test_store_urls.py).
    if set(given) <= set(parameters(door)) and "store" not in given
]


@pytest.mark.parametrize(("door", "given", "hint"), HINT_CASES)
def test_a_likely_mix_up_gets_a_hint(door: Callable[..., Any], given: Any, hint: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        FRONT_DOORS[door](CountingStore(), **given)
    assert hint in str(caught.value)
    assert "pw0rd" not in str(caught.value)
