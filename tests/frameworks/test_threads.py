"""Which thread an integration's model call belongs to: given, carried by the call, or none."""

from __future__ import annotations

import logging

import pytest

from slimcache import ConfigurationError
from slimcache.frameworks.threads import ThreadIds


def test_a_thread_id_is_given_or_read_from_the_call_and_a_missing_one_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    threads: ThreadIds[dict[str, object]] = ThreadIds(
        lambda call: call.get("user"),  # type: ignore[arg-type, return-value]
        owner="Door",
        context="call",
        carried=lambda call: call.get("conversation"),
        missing="the call has no conversation",
        call="request",
    )
    assert threads.of({"user": "u-1", "conversation": 7}) == "u-1"
    assert threads.of({"conversation": 7}) == "7"
    with caplog.at_level(logging.WARNING, logger="slimcache"):
        assert threads.of({}) is None
        assert threads.of({}) is None
    assert [r.getMessage() for r in caplog.records] == [
        "Door: the call has no conversation, so nothing is cached and every request "
        "summarizes again"
    ]
    fixed: ThreadIds[dict[str, object]] = ThreadIds("fixed", owner="Door", context="call")
    assert fixed.of({}) == "fixed"


def test_a_thread_id_that_is_neither_string_nor_function_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="function of the RunContext, got 42"):
        ThreadIds(42, owner="Door", context="RunContext")  # type: ignore[arg-type]
