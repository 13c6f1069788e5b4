"""The trigger and keep sizes every framework bridge takes, read as slimcache policies."""

from __future__ import annotations

import pytest

from slimcache import ConfigurationError, KeepMessages, KeepTokens
from slimcache.core.policy import AnyOf, WindowState
from slimcache.frameworks.sizes import (
    AllReached,
    Reaches,
    keep_policy,
    needs_context_size,
    trigger_policy,
)


def state(messages: int, tokens: int) -> WindowState:
    return WindowState(
        messages=messages, tokens=tokens, pinned_tokens=0, summary_tokens=0,
        evictable_messages=0, evictable_tokens=0,
    )  # fmt: skip


def test_one_size_a_dict_of_all_and_a_list_of_any() -> None:
    assert trigger_policy(("messages", 50)) == Reaches("messages", 50)
    both = trigger_policy({"messages": 10, "tokens": 4000})
    assert both == AllReached((Reaches("messages", 10), Reaches("tokens", 4000)))
    assert both.reason(state(10, 3999)) is None
    assert both.reason(state(10, 4000)) == "messages>=10 and tokens>=4000"
    either = trigger_policy([("messages", 10), {"tokens": 100}])
    assert isinstance(either, AnyOf)
    assert either.reason(state(1, 100)) == "tokens>=100"


def test_fractions_need_the_context_size() -> None:
    assert needs_context_size(("fraction", 0.8), ("messages", 2))
    assert not needs_context_size(("messages", 8), ("tokens", 2))
    assert trigger_policy(("fraction", 0.5), 1000) == Reaches("tokens", 500)
    with pytest.raises(ConfigurationError, match="context size"):
        trigger_policy(("fraction", 0.5))
    assert keep_policy(("fraction", 0.1), Reaches("messages", 5), 1000) == KeepTokens(100)


@pytest.mark.parametrize(
    "trigger",
    [("messages", 0), ("fraction", 1.5), ("minutes", 3), {}, [], [[("messages", 3)]], 50],
)
def test_a_malformed_trigger_is_refused(trigger: object) -> None:
    with pytest.raises(ConfigurationError, match="trigger"):
        trigger_policy(trigger)


def test_keep_must_be_below_a_trigger_of_its_unit() -> None:
    assert keep_policy(("messages", 3), Reaches("messages", 4)) == KeepMessages(3)
    assert keep_policy(("messages", 30), Reaches("tokens", 4)) == KeepMessages(30)
    with pytest.raises(ConfigurationError, match="below the trigger"):
        keep_policy(("messages", 4), trigger_policy([("tokens", 9), ("messages", 4)]))
