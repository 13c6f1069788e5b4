"""The settings every agent integration takes: one object, typed once, shown in each
integration's signature, reaching the compressor each builds, refused by name before any write;
every setting of the compressor among them, by its keyword, on each of the four integrations.

Each integration is built here as an application builds it, with a memory store or a counting
one; what a setting changed is read from the compressor the integration built.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from agents import Agent, SQLiteSession
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.run_config import CallModelData, ModelInputData
from langchain.agents import create_agent
from openai import AsyncOpenAI
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.test import TestModel

from slimcache import (
    ConfigurationError,
    KeepMessages,
    MemoryStore,
    Prompts,
    SummarizeCompressor,
    SummarizerError,
)
from slimcache.core.settings.compressor import DEFAULTS, SharedOptions
from slimcache.frameworks.compression import AgentCompression
from slimcache.frameworks.settings import AgentOptions, AgentSettings, setting_names
from slimcache.frameworks.sizes import Reaches
from slimcache.langchain import CachedSummarizationMiddleware
from slimcache.openai_agents import (
    CachedSummarizationFilter,
    CachedSummarySession,
    OpenAIAgentsOptions,
    OpenAIAgentsSettings,
)
from slimcache.pydantic_ai import CachedSummarization
from tests.core.test_settings import BAD
from tests.fakes import CountingStore, RecordingSummarizer
from tests.langchain.test_middleware import answers, config

Door = Callable[..., Any]

# Each integration, the settings its **options make, and the arguments it names itself.
DOORS: dict[Door, tuple[type[AgentSettings], list[str]]] = {
    CachedSummarization: (AgentSettings, ["model", "store", "thread_id"]),
    CachedSummarizationFilter: (OpenAIAgentsSettings, ["model", "store", "thread_id"]),
    CachedSummarySession: (OpenAIAgentsSettings, ["session", "model", "store", "thread_id"]),
}
DOOR_IDS = [door.__name__ for door in DOORS]

# Every integration, LangChain's middleware among them.
ALL_DOORS: list[Door] = [CachedSummarizationMiddleware, *DOORS]
ALL_IDS = [door.__name__ for door in ALL_DOORS]

SHARED = list(typing.get_type_hints(SharedOptions))


@pytest.fixture
def session() -> Iterator[SQLiteSession]:
    made = SQLiteSession("s")  # an in-memory SQLite database
    yield made
    made.close()


# Stands for the door's own framework's model: Pydantic AI's, or the Agents SDK's.
FRAMEWORK_MODEL = object()


def framework_model(door: Door) -> Any:
    if door is CachedSummarization:
        return TestModel()
    # Never called here: building the model opens no connection.
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")
    return OpenAIChatCompletionsModel(model="unused", openai_client=client)


def build(door: Door, store: Any, session: SQLiteSession, **options: Any) -> Any:
    model = options.pop("model", RecordingSummarizer())
    if model is FRAMEWORK_MODEL:
        model = framework_model(door)
    if door is CachedSummarySession:
        return door(session, model, store, **options)
    return door(model, store, **options)


def compression_of(integration: Any) -> AgentCompression:
    return cast(AgentCompression, integration._compression)


def compressor_of(integration: Any) -> SummarizeCompressor:
    """The compressor the integration builds for its model's context size."""
    compression = compression_of(integration)
    size = getattr(compression.settings, "context_window", None)
    return compression._pair(size)[0]


# ---------------------------------------------------------------------- one object, typed once


@pytest.mark.parametrize(
    ("options", "settings"),
    [
        (AgentOptions, AgentSettings),
        (OpenAIAgentsOptions, OpenAIAgentsSettings),
    ],
    ids=lambda kind: kind.__name__,
)
def test_the_options_are_the_settings_with_their_types(options: type, settings: type) -> None:
    typed = typing.get_type_hints(options)
    declared = typing.get_type_hints(settings)
    del declared["compressor"]
    assert sorted(typed) == sorted(setting_names(settings))
    assert typed == {**declared, **typing.get_type_hints(SharedOptions)}


def test_each_integration_adds_to_the_shared_settings_only_its_own() -> None:
    shared = [field.name for field in dataclasses.fields(AgentSettings)]
    assert [f.name for f in dataclasses.fields(OpenAIAgentsSettings)] == [*shared, "context_window"]


# ---------------------------------------------------------------------- the signatures


@pytest.mark.parametrize("door", list(DOORS), ids=DOOR_IDS)
def test_the_signature_shows_every_setting_with_its_default(door: Door) -> None:
    kind, own = DOORS[door]
    shown = inspect.signature(door).parameters
    assert list(shown) == [*own, *setting_names(kind)]
    defaults = {field.name: field.default for field in dataclasses.fields(kind)}
    for name in setting_names(kind):
        assert shown[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        default = getattr(DEFAULTS, name) if name in SHARED else defaults[name]
        assert shown[name].default is default, name
    assert f"max_summary_tokens: 'int' = {DEFAULTS.max_summary_tokens}" in str(
        inspect.signature(door)
    )
    assert f"lease_ttl: 'float' = {DEFAULTS.lease_ttl}" in str(inspect.signature(door))


def test_the_middleware_shows_langchains_keywords_then_every_other_setting() -> None:
    shown = list(inspect.signature(CachedSummarizationMiddleware).parameters)
    langchain = ["model", "store", "trigger", "keep", "token_counter", "summary_prompt"]
    assert shown[: len(langchain)] == langchain
    assert set(setting_names(AgentSettings)) <= set(shown)
    assert len(shown) == len(set(shown))


def test_an_instance_called_by_its_framework_shows_the_signature_of_its_call(
    session: SQLiteSession,
) -> None:
    # Pydantic AI reads a history processor's signature to know whether it takes the context.
    capability = build(CachedSummarization, MemoryStore(), session)
    assert list(inspect.signature(capability).parameters) == ["ctx", "messages"]
    run_filter = build(CachedSummarizationFilter, MemoryStore(), session)
    assert list(inspect.signature(run_filter).parameters) == ["data"]


def test_a_subclass_with_an_init_of_its_own_shows_that_one() -> None:
    class Named(CachedSummarizationFilter):
        def __init__(self, name: str) -> None:
            super().__init__(RecordingSummarizer(), thread_id=name)

    class Same(CachedSummarizationFilter):
        pass

    assert list(inspect.signature(Named).parameters) == ["name"]
    assert inspect.signature(Same) == inspect.signature(CachedSummarizationFilter)


@pytest.mark.parametrize("door", list(DOORS), ids=DOOR_IDS)
def test_an_unknown_keyword_is_a_type_error_naming_it(door: Door, session: SQLiteSession) -> None:
    store = CountingStore()
    names = ("nonsense", "context_window") if door is CachedSummarization else ("nonsense",)
    for name in names:
        expected = rf"^{door.__name__}\(\) got an unexpected keyword argument '{name}'$"
        with pytest.raises(TypeError, match=expected):
            build(door, store, session, **{name: 1})
    assert (store.gets, store.sets) == (0, 0)


# ---------------------------------------------------------------------- reaching its use


def count_words(text: str) -> int:
    return len(text.split())


PROMPTS = Prompts(summarize="Sum up in {max_tokens}.", extend="Extend in {max_tokens}.")
BACKGROUND = {"refresh": "background", "ceiling": ("messages", 80)}


def hook(*args: Any) -> None:
    """A hook of any event."""


# Each compressor setting given a value other than its default (with what it needs beside it):
# the compressor an integration builds holds it.
SHARED_VALUES: dict[str, tuple[Any, dict[str, Any]]] = {
    "strategy": ("concat", {}),
    "max_summary_tokens": (321, {}),
    "max_input_tokens": (9000, {}),
    "prompts": (PROMPTS, {}),
    "token_counter": (count_words, {}),
    "message_overhead": (7, {}),
    "summary_template": ("Before ({start}-{end}): {summary}", {}),
    "namespace": ("app", {}),
    "ttl": (60.0, {}),
    "checkpoints": (8, {}),
    "summarizer_timeout": (5.0, {}),
    "on_store_error": ("bypass", {}),
    "on_over_budget": ("raise", {}),
    "breaker_failures": (5, {}),
    "summarizer_id": ("mine", {}),
    "reuse_entries": ("any", {}),
    "lock_wait": (3.0, {}),
    "lease_ttl": (3.0, {}),
    "single_writer": (True, {}),
    "store_timeout": (2.0, {}),
    "fingerprint": ("id", {}),
    "refresh": ("background", {"ceiling": ("messages", 80)}),
    "on_evict": (hook, {}),
    "on_compress": (hook, {}),
    "on_cache_hit": (hook, {}),
    "on_error": (hook, {}),
}


def holds(name: str, value: Any) -> Check:
    """The compressor's checked setting is ``value`` (a strategy, resolved, by its name)."""
    if name == "strategy":
        return lambda _, compressor: bool(compressor._derived.strategy.name == value)
    return lambda _, compressor: bool(getattr(compressor._settings, name) == value)


# A setting given a value other than its default, and what shows it reached its use.
Check = Callable[[Any, SummarizeCompressor], bool]
REACHES: dict[str, tuple[dict[str, Any], Check]] = {
    "trigger": (
        {"trigger": ("messages", 30)},
        lambda _, c: c._derived.trigger == Reaches("messages", 30),
    ),
    "keep": ({"keep": ("messages", 7)}, lambda _, c: c._derived.keep == KeepMessages(7)),
    "summary_placement": (
        {"summary_placement": "user"},
        lambda i, _: compression_of(i).settings.summary_placement == "user",
    ),
    "on_summarizer_error": (
        {"on_summarizer_error": "uncompressed"},
        lambda _, c: c._settings.on_summarizer_error == "uncompressed",
    ),
    "ceiling": (BACKGROUND, lambda _, c: c._derived.ceiling == Reaches("messages", 80)),
    "on_truncated": (
        {"on_truncated": "raise", "model": FRAMEWORK_MODEL},
        lambda _, c: getattr(c._settings.summarizer, "on_truncated", None) == "raise",
    ),
    "context_window": (
        {"context_window": 8000, "trigger": ("fraction", 0.5), "keep": ("messages", 4)},
        lambda _, c: c._derived.trigger == Reaches("tokens", 4000),
    ),
    **{
        name: ({name: value, **beside}, holds(name, value))
        for name, (value, beside) in SHARED_VALUES.items()
    },
}

REACH_CASES = [
    pytest.param(door, name, id=f"{door.__name__}-{name}")
    for door, (kind, _) in DOORS.items()
    for name in setting_names(kind)
]


def test_every_setting_has_a_case_showing_it_reaches_its_use() -> None:
    settings = {name for kind, _ in DOORS.values() for name in setting_names(kind)}
    assert settings == set(REACHES)
    assert set(SHARED_VALUES) == set(SHARED)


@pytest.mark.parametrize(("door", "name"), REACH_CASES)
def test_a_setting_reaches_the_compressor_its_integration_builds(
    door: Door, name: str, session: SQLiteSession
) -> None:
    options, reached = REACHES[name]
    integration = build(door, MemoryStore(), session, **options)
    default = build(
        door, MemoryStore(), session, **{k: v for k, v in options.items() if k == "model"}
    )
    assert reached(integration, compressor_of(integration))
    if name != "context_window":  # its default builds no compressor for a fraction
        assert not reached(default, compressor_of(default))


@pytest.mark.parametrize("door", ALL_DOORS, ids=ALL_IDS)
@pytest.mark.parametrize("name", SHARED)
def test_every_compressor_setting_reaches_the_compressor_of_every_integration(
    door: Door, name: str, session: SQLiteSession
) -> None:
    value, beside = SHARED_VALUES[name]
    integration = build(door, MemoryStore(), session, **{name: value, **beside})
    default = build(door, MemoryStore(), session)
    assert holds(name, value)(integration, compressor_of(integration))
    assert not holds(name, value)(default, compressor_of(default))


@pytest.mark.parametrize("door", ALL_DOORS, ids=ALL_IDS)
def test_lease_lock_and_strategy_take_effect_as_the_compressors_own(
    door: Door, session: SQLiteSession
) -> None:
    integration = build(
        door, MemoryStore(), session, lease_ttl=3.0, lock_wait=0.5, strategy="replace"
    )
    derived = compressor_of(integration)._derived
    assert (derived.settings.lease_ttl, derived.settings.lock_wait) == (3.0, 0.5)
    assert derived.strategy.name == "replace"
    default = compressor_of(build(door, MemoryStore(), session))._derived
    assert (default.settings.lease_ttl, default.strategy.name) == (
        DEFAULTS.lease_ttl,
        DEFAULTS.strategy,
    )


@pytest.mark.parametrize("door", ALL_DOORS, ids=ALL_IDS)
@pytest.mark.parametrize(
    ("name", "value"), [("lease_ttl", -1), ("lock_wait", -1), ("strategy", "merge")]
)
def test_a_wrong_compressor_setting_is_refused_by_name_before_the_store_is_used(
    door: Door, name: str, value: Any, session: SQLiteSession
) -> None:
    store = CountingStore()
    with pytest.raises(ConfigurationError, match=name):
        build(door, store, session, **{name: value})
    assert (store.gets, store.sets, store.deletes) == (0, 0, 0)


def pydantic_ai_history(turns: int) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for n in range(turns):
        history.append(ModelRequest(parts=[UserPromptPart(f"question {n}")]))
        history.append(ModelResponse(parts=[TextPart(f"answer {n}")]))
    return history


def items(turns: int) -> list[Any]:
    made: list[Any] = []
    for n in range(turns):
        made.append({"role": "user", "content": f"question {n}"})
        made.append({"role": "assistant", "content": f"answer {n}"})
    return made


async def compress_once(door: Door, integration: Any, session: SQLiteSession) -> None:
    """One model request's worth of compression, through the integration's own entry."""
    if door is CachedSummarization:
        await integration.compress(cast(Any, None), pydantic_ai_history(5))
    elif door is CachedSummarizationFilter:
        data = ModelInputData(input=items(5), instructions=None)
        await integration(CallModelData(model_data=data, agent=Agent("a"), context=None))
    else:
        await session.add_items(items(5))
        await integration.get_items()


def serve(door: Door, integration: Any, session: SQLiteSession, turns: int) -> None:
    """A model request with ``turns`` more turns of history, through the integration's own
    entry: the middleware's through an agent's sync ``invoke``."""
    if door is CachedSummarizationMiddleware:
        asked = [*items(turns), {"role": "user", "content": "and now?"}]
        create_agent(answers(1), middleware=[integration]).invoke({"messages": asked}, config("t"))
    elif door is CachedSummarization:
        asyncio.run(integration.compress(cast(Any, None), pydantic_ai_history(turns)))
    elif door is CachedSummarizationFilter:
        data = ModelInputData(input=items(turns), instructions=None)
        asyncio.run(integration(CallModelData(model_data=data, agent=Agent("a"), context=None)))
    else:
        asyncio.run(session.add_items(items(turns)))
        asyncio.run(integration.get_items())


@pytest.mark.parametrize("door", ALL_DOORS, ids=ALL_IDS)
def test_the_stats_of_every_integration_count_what_its_fallback_served(
    door: Door, session: SQLiteSession
) -> None:
    summarizer = RecordingSummarizer()
    thread = {} if door is CachedSummarizationMiddleware else {"thread_id": "t"}
    integration = build(
        door, MemoryStore(), session, model=summarizer, trigger=("messages", 6),
        keep=("messages", 2), **thread,
    )  # fmt: skip
    serve(door, integration, session, 5)
    summarizer.fail_with = SummarizerError("the model went away")
    serve(door, integration, session, 10)  # served the first summary and what came after
    stats = integration.stats
    assert (stats.requests, stats.summarizer_errors, stats.cache_hits) == (2, 1, 1)
    assert stats.summarizer_calls == len(summarizer.calls) == 2  # the failed one too


@pytest.mark.parametrize("door", list(DOORS), ids=DOOR_IDS)
async def test_namespace_and_budget_reach_the_store_and_the_summarizer(
    door: Door, session: SQLiteSession
) -> None:
    store, summarizer = MemoryStore(), RecordingSummarizer()
    integration = build(
        door, store, session, model=summarizer, thread_id="t", namespace="app",
        max_summary_tokens=123, trigger=("messages", 6), keep=("messages", 2),
    )  # fmt: skip
    await compress_once(door, integration, session)
    keys, _ = await store.scan_keys("")
    assert keys
    assert all(key.startswith("app:") for key in keys)
    assert [call.context.max_tokens for call in summarizer.calls] == [123]


async def test_the_context_window_sizes_each_call_of_the_agents_sdk_integrations(
    session: SQLiteSession,
) -> None:
    # 10 messages of about 4 tokens: a trigger of half of 60 tokens fires, of half of 600 not.
    for window, calls in ((60, 1), (600, 0)):
        summarizer = RecordingSummarizer()
        integration = build(
            CachedSummarizationFilter, MemoryStore(), session, model=summarizer, thread_id="t",
            context_window=window, trigger=("fraction", 0.5), keep=("messages", 2),
        )  # fmt: skip
        await compress_once(CachedSummarizationFilter, integration, session)
        assert len(summarizer.calls) == calls, window


# ---------------------------------------------------------------------- bad values


# Wrong values where a setting means more, or less, than in the other front doors.
BAD_HERE: dict[str, list[Any]] = {
    "summary_placement": ["human", "System", 5, None],  # "user" is one here
    "context_window": ["10", 0, -3, True, 2.5],  # None: the model's own, for no fraction
}

# A setting that is wrong only beside another, and the other.
BESIDE: dict[str, dict[str, Any]] = {"ceiling": {"refresh": "background"}}

BAD_CASES = [
    pytest.param(door, name, value, id=f"{door.__name__}-{name}-{number}")
    for door, (kind, _) in DOORS.items()
    for name in setting_names(kind)
    for number, value in enumerate(BAD_HERE.get(name, BAD.get(name, [])))
]


def test_every_setting_has_wrong_values() -> None:
    settings = {name for kind, _ in DOORS.values() for name in setting_names(kind)}
    assert not [name for name in settings if not BAD_HERE.get(name, BAD.get(name))]


@pytest.mark.parametrize(("door", "name", "value"), BAD_CASES)
def test_a_wrong_value_is_refused_naming_it_before_the_store_is_used(
    door: Door, name: str, value: Any, session: SQLiteSession
) -> None:
    store = CountingStore()
    with pytest.raises(ConfigurationError, match=name):
        build(door, store, session, **{**BESIDE.get(name, {}), name: value})
    assert (store.gets, store.sets, store.deletes) == (0, 0, 0)


@pytest.mark.parametrize(
    "fraction",
    [
        {"trigger": ("fraction", 0.5)},
        {"keep": ("fraction", 0.1)},
        # Before, this one was taken, and every model call then failed.
        {"refresh": "background", "ceiling": ("fraction", 0.9)},
    ],
    ids=["trigger", "keep", "ceiling"],
)
@pytest.mark.parametrize("door", [CachedSummarizationFilter, CachedSummarySession])
def test_a_fraction_without_context_window_is_refused_when_built(
    door: Door, fraction: dict[str, Any], session: SQLiteSession
) -> None:
    store = CountingStore()
    with pytest.raises(ConfigurationError, match="context_window="):
        build(door, store, session, **fraction)
    assert (store.gets, store.sets) == (0, 0)
