"""Conversations to replay in the benchmark: the chitchat dataset, or a user's own files.

A user's file holds OpenAI-format chat messages, in any of these shapes:

- JSON: a list of conversations, each a list of messages or a ``{"messages": [...]}`` object;
  a top-level ``{"conversations": [...]}``; or one conversation (a list of messages, or one
  ``{"messages": [...]}`` object).
- JSONL: one conversation per line, as a list of messages or a ``{"messages": [...]}`` object.

Every conversation goes through slimcache's own message validation, so a file the benchmark
accepts is a file :class:`~slimcache.SummarizeCompressor` accepts.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slimcache._exceptions import ConfigurationError, InvalidInput, MissingExtraError
from slimcache._install import pip_install
from slimcache.messages import PINNED_ROLES, check_messages

__all__ = [
    "CHITCHAT",
    "CHITCHAT_SYSTEM_PROMPT",
    "BenchConversation",
    "Dataset",
    "chitchat_conversations",
    "load_chitchat",
    "load_dataset",
    "load_file",
    "load_history",
    "parse_conversations",
    "request_lengths",
    "select_conversations",
]

CHITCHAT = "chitchat"
"""The ``--dataset`` value naming the chitchat dataset."""

CHITCHAT_SYSTEM_PROMPT = "You are a friendly chat partner. Keep replies short and casual."

_USER_ROLES = frozenset({"user", "human"})


@dataclass(frozen=True)
class BenchConversation:
    """One conversation to replay.

    Attributes:
        id: Identifies it within its dataset (the chitchat key, or the position in a file).
        messages: The chat messages, oldest first.
    """

    id: str
    messages: list[dict[str, Any]]

    @property
    def turns(self) -> int:
        """Messages after the leading system prompt."""
        return len(self.messages) - _pinned(self.messages)


@dataclass(frozen=True)
class Dataset:
    """A named set of conversations.

    Attributes:
        name: ``"chitchat"`` or the file's name.
        digest: Short content digest, so a changed file gets new thread ids.
        conversations: The conversations, in the dataset's order.
    """

    name: str
    digest: str
    conversations: list[BenchConversation]


def _pinned(messages: Sequence[Mapping[str, Any]]) -> int:
    count = 0
    for message in messages:
        if message.get("role") not in PINNED_ROLES:
            break
        count += 1
    return count


def request_lengths(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Lengths of the requests a chat server receives for this conversation.

    A request is the history up to and including a user message: the server compresses it
    before producing the next assistant turn.
    """
    return [i + 1 for i, m in enumerate(messages) if m.get("role") in _USER_ROLES]


# ---------------------------------------------------------------- chitchat


def chitchat_conversations(raw: Mapping[str, Any]) -> list[BenchConversation]:
    """Turn the chitchat dataset's JSON into chat conversations.

    Each turn (a list of one sender's texts) becomes one message, texts joined by newlines.
    The first sender is the user and the other the assistant; a short system prompt leads.
    """
    conversations: list[BenchConversation] = []
    for key in sorted(raw):
        turns = raw[key].get("messages") if isinstance(raw[key], Mapping) else None
        if not isinstance(turns, list):
            raise ConfigurationError(f"chitchat conversation {key!r} has no 'messages' list")
        messages: list[dict[str, Any]] = [{"role": "system", "content": CHITCHAT_SYSTEM_PROMPT}]
        first_sender: object = None
        for turn in turns:
            if not turn:
                continue
            if first_sender is None:
                first_sender = turn[0].get("sender")
            role = "user" if turn[0].get("sender") == first_sender else "assistant"
            text = "\n".join(str(part.get("text", "")) for part in turn)
            if messages[-1]["role"] == role:
                messages[-1]["content"] += "\n" + text
            else:
                messages.append({"role": role, "content": text})
        conversations.append(BenchConversation(id=str(key), messages=messages))
    return conversations


def load_chitchat() -> Dataset:
    """Load the chitchat dataset from the installed ``chitchat-dataset`` package.

    Raises:
        MissingExtraError: The package is not installed.
    """
    try:
        source = resources.files("chitchat_dataset").joinpath("dataset.json")
        text = source.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise MissingExtraError(
            f"the chitchat dataset is not installed ({exc}); run: {pip_install('bench')}"
        ) from None
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ConfigurationError("the chitchat dataset.json is not a JSON object")
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=4).hexdigest()
    return Dataset(name=CHITCHAT, digest=digest, conversations=chitchat_conversations(raw))


# ---------------------------------------------------------------- user files


def _conversation_id(item: object, position: int) -> str:
    if isinstance(item, Mapping):
        for field in ("id", "thread_id", "conversation_id"):
            value = item.get(field)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                return str(value)
    return str(position)


def _messages_of(item: object, where: str) -> list[dict[str, Any]]:
    if isinstance(item, Mapping):
        if "messages" not in item:
            raise ConfigurationError(f"{where}: an object needs a 'messages' list")
        item = item["messages"]
    if not isinstance(item, list):
        raise ConfigurationError(
            f"{where}: expected a list of messages or a {{'messages': [...]}} object, "
            f"got {type(item).__name__}"
        )
    return [dict(m) if isinstance(m, Mapping) else m for m in item]


def _looks_like_message(item: object) -> bool:
    return isinstance(item, Mapping) and "role" in item and "messages" not in item


def _top_level_items(data: object, source: str) -> list[object]:
    """The conversations of a parsed JSON document, whatever shape it has."""
    if isinstance(data, Mapping):
        if "conversations" in data:
            items = data["conversations"]
            if not isinstance(items, list):
                raise ConfigurationError(f"{source}: 'conversations' must be a list")
            return list(items)
        if "messages" in data:
            return [data]
        raise ConfigurationError(
            f"{source}: expected a list of conversations, {{'conversations': [...]}} "
            "or {'messages': [...]}"
        )
    if isinstance(data, list):
        if data and all(_looks_like_message(item) for item in data):
            return [data]  # one conversation given as a bare list of messages
        return list(data)
    raise ConfigurationError(
        f"{source}: expected a list of conversations, got {type(data).__name__}"
    )


def parse_conversations(items: Sequence[object], source: str) -> list[BenchConversation]:
    """Validate conversations with slimcache's own message checks.

    Args:
        items: Each a list of messages or a ``{"messages": [...]}`` object.
        source: The file name, used in error messages.

    Raises:
        ConfigurationError: A conversation has the wrong shape.
        InvalidInput: A message breaks a rule; the message names the file, the conversation
            and the message index.
    """
    conversations: list[BenchConversation] = []
    seen: set[str] = set()
    for position, item in enumerate(items):
        where = f"{source}: conversation {position}"
        messages = _messages_of(item, where)
        try:
            check_messages(messages)
        except InvalidInput as exc:
            index = f", messages[{exc.index}]" if exc.index is not None else ""
            error = InvalidInput(f"{where}{index}: {exc.rule}")
            error.index = exc.index
            raise error from None
        conversation_id = _conversation_id(item, position)
        if conversation_id in seen:
            conversation_id = f"{conversation_id}.{position}"
        seen.add(conversation_id)
        conversations.append(BenchConversation(id=conversation_id, messages=messages))
    return conversations


def _read_items(path: Path) -> list[object]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(f"dataset file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read dataset file {path}: {exc}") from None
    if path.suffix.lower() == ".jsonl":
        items: list[object] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except ValueError as exc:
                raise ConfigurationError(
                    f"{path}: line {number} is not valid JSON: {exc}"
                ) from None
        return items
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{path} is not valid JSON: {exc}") from None
    return _top_level_items(data, str(path))


def load_file(path: str | Path) -> Dataset:
    """Load conversations from a ``.json`` or ``.jsonl`` file.

    Raises:
        ConfigurationError: The file is missing, unreadable, not JSON, or has the wrong shape.
        InvalidInput: A message breaks a rule (naming file, conversation and message index).
    """
    path = Path(path)
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise ConfigurationError(
            f"dataset must be 'chitchat' or a .json / .jsonl file, got {str(path)!r}"
        )
    items = _read_items(path)
    conversations = parse_conversations(items, path.name)
    if not conversations:
        raise ConfigurationError(f"{path} holds no conversations")
    canonical = json.dumps([c.messages for c in conversations], sort_keys=True, default=str)
    digest = hashlib.blake2b(canonical.encode("utf-8"), digest_size=4).hexdigest()
    return Dataset(name=path.name, digest=digest, conversations=conversations)


def load_dataset(spec: str) -> Dataset:
    """Load ``"chitchat"`` or a ``.json`` / ``.jsonl`` file of conversations."""
    if spec == CHITCHAT:
        return load_chitchat()
    return load_file(spec)


def load_history(path: str | Path) -> list[dict[str, Any]]:
    """Load one conversation's messages (for ``slimcache inspect --history``).

    Raises:
        ConfigurationError: The file does not hold exactly one conversation.
        InvalidInput: A message breaks a rule.
    """
    dataset = load_file(path)
    if len(dataset.conversations) != 1:
        raise ConfigurationError(
            f"{path} holds {len(dataset.conversations)} conversations; give one history"
        )
    return dataset.conversations[0].messages


def select_conversations(
    conversations: Sequence[BenchConversation],
    *,
    count: int,
    min_messages: int = 0,
    seed: int = 0,
) -> list[BenchConversation]:
    """Pick up to ``count`` conversations of at least ``min_messages`` turns.

    When more are eligible than asked for, a ``seed``-determined sample is taken, kept in
    the dataset's order, so the same arguments always replay the same conversations.

    Raises:
        ConfigurationError: ``count`` is not positive, or no conversation is long enough.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigurationError(f"conversations must be a positive integer, got {count!r}")
    if isinstance(min_messages, bool) or not isinstance(min_messages, int) or min_messages < 0:
        raise ConfigurationError(f"min_messages must be an integer >= 0, got {min_messages!r}")
    eligible = [c for c in conversations if c.turns >= min_messages and request_lengths(c.messages)]
    if not eligible:
        raise ConfigurationError(
            f"no conversation has at least {min_messages} messages and a user message; "
            "lower --min-messages"
        )
    if len(eligible) <= count:
        return list(eligible)
    chosen = set(random.Random(seed).sample(range(len(eligible)), count))
    return [c for i, c in enumerate(eligible) if i in chosen]
