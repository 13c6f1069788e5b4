"""Cost of checking messages, the step that dominates a cache hit.

Every ``compress`` call validates the whole history and prepares what its fingerprints hash
before its one store read, so on a hit this is much of the work. This benchmark times
:func:`slimcache.messages.checks.check_messages` against a copy of the implementation it replaced
(kept below as ``reference_check_messages``; it called ``json.dumps(..., sort_keys=True)``,
building a new encoder, for every message, and fingerprints hashed those bytes; now a plain
turn is hashed as its role letter and its text, with no encoding at all), on the same inputs
in the same run:

- ``plain-200`` and ``plain-2000``: alternating user/assistant messages with string content;
- ``tools-2000``: 500 rounds of a user message with text and image parts, an assistant
  message with a tool call, the tool result, and a plain answer.

Before timing, both implementations must agree on every output (canonical bytes, which the
current implementation builds only when asked, tokens, pinned count, units); the run stops if
they do not. The two alternate within each round, in an
order that flips every round, so drift in the machine's speed hits both alike.

Usage::

    uv run python benchmarks/hit_bench.py [--rounds R] [--min-time SECONDS] [--no-profile]

Prints the median per-message cost in microseconds of each implementation and their ratio,
then the ten most expensive functions of each under cProfile (whose own overhead inflates the
absolute figures; the ranking is what it is for).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slimcache._exceptions import InvalidInput
from slimcache.messages import CheckedMessages, check_messages

Message = Mapping[str, Any]


@dataclass(frozen=True)
class ReferenceChecked:
    """What the replaced implementation returned."""

    messages: Sequence[Message]
    canonical: list[bytes]
    tokens: list[int]
    pinned: int
    unit_end: list[int]


Check = Callable[[Sequence[Message]], "CheckedMessages | ReferenceChecked"]

# ---------------------------------------------------------------- the reference implementation
# Copied from slimcache/messages/checks.py as it was before the fast path (same behaviour for the
# valid inputs used here), so both are measured by the same run on the same machine.

_ROLES = frozenset({"system", "developer", "user", "human", "assistant", "tool"})
_PINNED_ROLES = frozenset({"system", "developer"})
_NON_TEXT_PART_TOKENS = 85


def _approx_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _reference_count_tokens(
    message: Message, counter: Callable[[str], int] = _approx_tokens, overhead: int = 4
) -> int:
    total = overhead
    content = message.get("content")
    if isinstance(content, str):
        total += counter(content)
    elif isinstance(content, list):
        for part in content:
            if part.get("type") in ("text", "refusal"):
                total += counter(str(part.get("text", part.get("refusal", ""))))
            else:
                total += _NON_TEXT_PART_TOKENS
    tool_calls = message.get("tool_calls")
    if tool_calls:
        total += counter(json.dumps(tool_calls, ensure_ascii=False, sort_keys=True))
    name = message.get("name")
    if isinstance(name, str):
        total += counter(name)
    return total


def _reference_check_content(message: Message, index: int, role: str, has_calls: bool) -> None:
    if "content" not in message or message["content"] is None:
        if role == "assistant" and has_calls:
            return
        raise InvalidInput(f"a {role} message needs 'content'", index=index)
    content = message["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidInput("'content' must be a string or a list of parts", index=index)
    for pos, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidInput(f"content part {pos} must be a dict", index=index)
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise InvalidInput(f"text content part {pos} needs a string 'text'", index=index)


def _reference_check_tool_calls(message: Message, index: int, role: str) -> list[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if role != "assistant":
        raise InvalidInput("only assistant messages may carry 'tool_calls'", index=index)
    if not isinstance(calls, list):
        raise InvalidInput("'tool_calls' must be a list", index=index)
    ids: list[str] = []
    for pos, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise InvalidInput(f"tool_calls[{pos}] must be a dict", index=index)
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInput(f"tool_calls[{pos}] needs a non-empty string 'id'", index=index)
        if call_id in ids:
            raise InvalidInput(f"tool_calls[{pos}] repeats the id {call_id!r}", index=index)
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidInput(f"tool_calls[{pos}] needs a 'function' dict", index=index)
        if not isinstance(function.get("arguments", ""), str):
            raise InvalidInput(f"tool_calls[{pos}].function.arguments", index=index)
        ids.append(call_id)
    return ids


def _reference_canonical(message: Message, role: str, index: int) -> bytes:
    view = {
        "role": "user" if role == "human" else role,
        "content": message.get("content"),
        "name": message.get("name"),
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": message.get("tool_call_id"),
    }
    try:
        text = json.dumps(view, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"message must be JSON-serializable ({exc})", index=index) from None
    return text.encode("utf-8", "surrogatepass")


def reference_check_messages(messages: Sequence[Message]) -> ReferenceChecked:
    """``check_messages`` as it was before the fast path."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of dicts")
    canonical: list[bytes] = []
    tokens: list[int] = []
    unit_end: list[int] = []
    pinned = 0
    open_calls: set[str] = set()
    answered_unit_start = -1
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput("each message must be a dict", index=index)
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise InvalidInput(f"unknown role {role!r}", index=index)
        call_ids = _reference_check_tool_calls(message, index, role)
        _reference_check_content(message, index, role, bool(call_ids))
        for key in ("name", "tool_call_id"):
            if key in message and message[key] is not None and not isinstance(message[key], str):
                raise InvalidInput(f"'{key}' must be a string", index=index)
        if "metadata" in message and not isinstance(message["metadata"], (Mapping, type(None))):
            raise InvalidInput("'metadata' must be a dict", index=index)
        if "id" in message and isinstance(message["id"], bool | float):
            raise InvalidInput("'id' must be a string or an integer", index=index)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidInput("a tool message needs a string 'tool_call_id'", index=index)
            if call_id not in open_calls:
                raise InvalidInput(f"tool result {call_id!r} answers no tool call", index=index)
            open_calls.discard(call_id)
            for pos in range(answered_unit_start, index):
                unit_end[pos] = index
            unit_end.append(index)
        else:
            open_calls = set(call_ids)
            answered_unit_start = index
            unit_end.append(index)
        if index == pinned and role in _PINNED_ROLES:
            pinned += 1
        canonical.append(_reference_canonical(message, role, index))
        tokens.append(_reference_count_tokens(message))
    return ReferenceChecked(messages, canonical, tokens, pinned, unit_end)


# ---------------------------------------------------------------- workloads


def plain_chat(count: int) -> list[dict[str, Any]]:
    """A system prompt, then alternating user/assistant messages with varied text."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    for i in range(count - 1):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Message {i}: " + "some words, a «quote» and a newline\n " * (1 + i % 9)
        messages.append({"role": role, "content": text})
    return messages


def tool_chat(rounds: int) -> list[dict[str, Any]]:
    """Rounds of: user text + image parts, assistant tool call, tool result, assistant answer."""
    messages: list[dict[str, Any]] = []
    for i in range(rounds):
        call_id = f"call_{i:05d}"
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"What is in picture {i}? " * 3},
                    {"type": "image_url", "image_url": {"url": f"https://img.example/{i}.png"}},
                ],
            }
        )
        arguments = json.dumps({"picture": i, "detail": "high", "tags": ["a", "b"]})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "describe_image", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": f"A cat, {i} whiskers. " * 4}
        )
        messages.append({"role": "assistant", "content": f"It shows a cat ({i}). " * 5})
    return messages


WORKLOADS: dict[str, list[dict[str, Any]]] = {
    "plain-200": plain_chat(200),
    "plain-2000": plain_chat(2000),
    "tools-2000": tool_chat(500),
}
IMPLEMENTATIONS: dict[str, Check] = {
    "before": reference_check_messages,
    "now": check_messages,
}


# ---------------------------------------------------------------- measuring


def check_agreement() -> None:
    """Stop unless both implementations give identical results on every workload."""
    for name, messages in WORKLOADS.items():
        before = reference_check_messages(messages)
        now = check_messages(messages)
        if (before.canonical, before.tokens, before.pinned, before.unit_end) != (
            now.canonical,
            now.tokens,
            now.pinned,
            now.unit_end,
        ):
            raise SystemExit(f"{name}: the implementations disagree; nothing to compare")


def time_call(check: Check, messages: Sequence[Message], min_time: float) -> float:
    """Seconds per call, averaged over as many calls as fit in ``min_time``."""
    calls = 0
    started = time.perf_counter()
    elapsed = 0.0
    while elapsed < min_time:
        check(messages)
        calls += 1
        elapsed = time.perf_counter() - started
    return elapsed / calls


def measure(rounds: int, min_time: float) -> dict[tuple[str, str], list[float]]:
    """Per-message microseconds, one figure per round, per (workload, implementation)."""
    samples: dict[tuple[str, str], list[float]] = {}
    order = list(IMPLEMENTATIONS)
    for round_number in range(rounds):
        if round_number % 2:
            order.reverse()
        for workload, messages in WORKLOADS.items():
            for implementation in order:
                seconds = time_call(IMPLEMENTATIONS[implementation], messages, min_time)
                per_message = seconds / len(messages) * 1e6
                samples.setdefault((workload, implementation), []).append(per_message)
    return samples


def print_table(samples: dict[tuple[str, str], list[float]]) -> None:
    print(f"{'workload':<12} {'messages':>8} {'before µs/msg':>14} {'now µs/msg':>11} {'ratio':>6}")
    for workload, messages in WORKLOADS.items():
        before = statistics.median(samples[(workload, "before")])
        now = statistics.median(samples[(workload, "now")])
        print(
            f"{workload:<12} {len(messages):>8} {before:>14.2f} {now:>11.2f} {before / now:>5.1f}x"
        )


def print_profiles(calls: int) -> None:
    for workload in ("plain-2000", "tools-2000"):
        messages = WORKLOADS[workload]
        for implementation, check in IMPLEMENTATIONS.items():
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(calls):
                check(messages)
            profiler.disable()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
            stats.print_stats(10)
            body = out.getvalue()
            table = body[body.index("   ncalls") :].rstrip()
            print(f"\n--- cProfile, {workload}, {implementation}: top 10 by own time ---")
            print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    parser.add_argument(
        "--min-time", type=float, default=0.2, help="seconds timed per sample (default 0.2)"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile tables")
    args = parser.parse_args()
    if args.rounds < 1 or args.min_time <= 0:
        parser.error("--rounds must be >= 1 and --min-time > 0")
    check_agreement()
    samples = measure(args.rounds, args.min_time)
    print(f"check_messages, median of {args.rounds} rounds, µs per message")
    print_table(samples)
    if not args.no_profile:
        print_profiles(calls=5)


if __name__ == "__main__":
    main()
