"""The snapshot codec's JSON for the built-in triggers and keep policies, served by the
registries beside the policies: the format is pinned, and every built-in policy is in it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from slimcache import (
    AnyOf,
    ContextWindow,
    EvictableTokens,
    KeepMessages,
    KeepTokens,
    KeepWithin,
    Manual,
    MessageThreshold,
    TokenThreshold,
)
from slimcache.core import policy
from slimcache.core.policy import BUILT_IN_KEEPS, BUILT_IN_TRIGGERS, built_in_name
from slimcache.recipes.compressor_snapshot import (
    keep_from_json,
    keep_to_json,
    trigger_from_json,
    trigger_to_json,
)

TRIGGERS: list[tuple[Any, str]] = [
    (MessageThreshold(10), '{"type": "messages", "messages": 10}'),
    (TokenThreshold(100), '{"type": "tokens", "tokens": 100}'),
    (EvictableTokens(50), '{"type": "evictable_tokens", "tokens": 50}'),
    (
        ContextWindow(1000, 0.5),
        '{"type": "context_window", "max_tokens": 1000, "fraction": 0.5}',
    ),
    (Manual(), '{"type": "manual"}'),
    (
        AnyOf(MessageThreshold(3), AnyOf(TokenThreshold(9))),
        '{"type": "any_of", "triggers": [{"type": "messages", "messages": 3}, '
        '{"type": "any_of", "triggers": [{"type": "tokens", "tokens": 9}]}]}',
    ),
]

KEEPS: list[tuple[Any, str]] = [
    (KeepMessages(3), '{"type": "messages", "messages": 3}'),
    (KeepTokens(9), '{"type": "tokens", "tokens": 9}'),
    (KeepWithin(3, 9), '{"type": "within", "messages": 3, "tokens": 9}'),
]


@pytest.mark.parametrize(("trigger", "text"), TRIGGERS, ids=lambda v: type(v).__name__)
def test_a_built_in_trigger_is_written_as_before_and_read_back(trigger: Any, text: str) -> None:
    data = trigger_to_json(trigger)
    assert json.dumps(data) == text
    assert repr(trigger_from_json(json.loads(text))) == repr(trigger)


@pytest.mark.parametrize(("keep", "text"), KEEPS, ids=lambda v: type(v).__name__)
def test_a_built_in_keep_is_written_as_before_and_read_back(keep: Any, text: str) -> None:
    assert json.dumps(keep_to_json(keep)) == text
    assert keep_from_json(json.loads(text)) == keep


def test_every_built_in_policy_is_registered() -> None:
    classes = [getattr(policy, name) for name in policy.__all__]
    triggers = {c for c in classes if isinstance(c, type) and hasattr(c, "reason")}
    keeps = {c for c in classes if isinstance(c, type) and hasattr(c, "satisfied")}
    triggers -= {policy.Trigger}
    keeps -= {policy.Keep}
    assert set(BUILT_IN_TRIGGERS.values()) == triggers
    assert set(BUILT_IN_KEEPS.values()) == keeps
    assert {type(t) for t, _ in TRIGGERS} == triggers
    assert {type(k) for k, _ in KEEPS} == keeps


@dataclass(frozen=True)
class EveryOtherTurn(MessageThreshold):
    """A caller's own trigger, built on a built-in one."""


def test_a_policy_of_the_callers_own_is_not_written() -> None:
    assert built_in_name(EveryOtherTurn(2), BUILT_IN_TRIGGERS) is None
    assert trigger_to_json(EveryOtherTurn(2)) is None
    assert trigger_to_json(AnyOf(MessageThreshold(3), EveryOtherTurn(2))) is None
    assert keep_to_json(KeepMessages(2)) is not None


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ({"type": "messages"}, KeyError, "messages"),
        ({"type": "context_window", "max_tokens": 10}, KeyError, "fraction"),
        ({"type": "weekly"}, ValueError, "unknown trigger type 'weekly'"),
        ({"type": ["messages"]}, ValueError, "unknown trigger type"),
        ({"type": "any_of", "triggers": "x"}, TypeError, "must be a list"),
        ({"type": "any_of", "triggers": [None]}, ValueError, "unknown trigger"),
        ([], TypeError, "must be a dict or null"),
    ],
)
def test_a_malformed_trigger_is_refused(data: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        trigger_from_json(data)


def test_a_malformed_keep_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown keep type 'all'"):
        keep_from_json({"type": "all"})
    with pytest.raises(KeyError, match="tokens"):
        keep_from_json({"type": "within", "messages": 3})
    assert keep_from_json(None) is None
