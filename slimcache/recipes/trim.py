"""The trim compressor: drop the oldest whole units until the conversation fits a token budget.

No summarizer and no store: trimming is deterministic and free, for when losing the oldest
messages is acceptable (slimcontext's ``TrimCompressor``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

from slimcache.core.settings.checks import check_flag
from slimcache.core.settings.compressor import DEFAULTS, check_fields
from slimcache.messages import (
    CheckedMessages,
    Conversation,
    Message,
    MessageT,
    TokenCounter,
    check_messages,
)
from slimcache.messages.conversation import split_conversation, with_report
from slimcache.stores.keys import encode_thread_id
from slimcache.stores.protocol import positive_int

__all__ = ["TrimCompressor", "TrimResult"]


@dataclass(frozen=True)
class TrimResult:
    """What one trim did.

    Attributes:
        messages: The messages kept: pinned system messages, then the most recent whole units.
        dropped: How many messages were dropped.
        tokens: Tokens of the messages kept.
        fits: Whether ``tokens`` is within the budget. ``False`` only when the pinned system
            messages and the last unit alone exceed it (they are kept all the same).
    """

    messages: list[dict[str, Any]]
    dropped: int
    tokens: int
    fits: bool


class TrimCompressor:
    """Drops the oldest messages until the conversation fits ``max_tokens``.

    Messages are dropped in whole units, oldest first: an assistant message with tool calls
    and its tool results go together, so the result never starts with an orphan tool result.
    Leading system (and developer) messages are pinned when ``keep_system`` is true.

    The last unit is always kept, even when it alone (with the pinned messages) exceeds
    ``max_tokens``: an empty conversation is never a useful answer, so the result is then
    over the budget (``compress_detailed(...).fits`` tells).

    Args:
        max_tokens: Token budget of the whole result, pinned messages included.
        token_counter: Counts a text's tokens (default: ``ceil(len / 4)``).
        message_overhead: Tokens added per message for role and framing.
        keep_system: Pin the leading system/developer messages; when false they are dropped
            like any other message once they are the oldest.

    Raises:
        ConfigurationError: For any invalid argument.
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        token_counter: TokenCounter = DEFAULTS.token_counter,
        message_overhead: int = DEFAULTS.message_overhead,
        keep_system: bool = True,
    ) -> None:
        positive_int("max_tokens", max_tokens)
        check_fields(token_counter=token_counter, message_overhead=message_overhead)
        check_flag("keep_system", keep_system)
        self._max_tokens = max_tokens
        self._count = token_counter
        self._overhead = message_overhead
        self._keep_system = keep_system

    @property
    def max_tokens(self) -> int:
        """The token budget."""
        return self._max_tokens

    @overload
    async def compress(self, messages: Conversation, *, thread_id: None = None) -> Conversation: ...

    @overload
    async def compress(
        self, messages: Sequence[MessageT], *, thread_id: str | int | None = None
    ) -> list[MessageT]: ...

    async def compress(
        self,
        messages: Conversation | Sequence[Message],
        *,
        thread_id: str | int | None = None,
    ) -> Conversation | list[Any]:
        """Trim a conversation to the budget.

        Args:
            messages: A list of chat messages, or a :class:`Conversation`.
            thread_id: Accepted so that this compressor and ``SummarizeCompressor`` are
                interchangeable; trimming caches nothing, so it is only checked.

        Returns:
            For a list: ``[pinned system messages..., *most recent whole units]``. For a
            :class:`Conversation`: a new one with those messages, and a ``"slimcache"`` entry
            in its metadata (``dropped``, ``tokens``, ``fits``).

        Raises:
            InvalidInput: A message or the thread id is malformed.
        """
        result = await self.compress_detailed(messages, thread_id=thread_id)
        if isinstance(messages, Conversation):
            report = {
                "outcome": "trimmed" if result.dropped else "unchanged",
                "dropped": result.dropped,
                "tokens": result.tokens,
                "fits": result.fits,
            }
            return with_report(messages, result.messages, report)
        return result.messages

    async def compress_detailed(
        self,
        messages: Conversation | Sequence[Message],
        *,
        thread_id: str | int | None = None,
    ) -> TrimResult:
        """Like :meth:`compress`, returning a :class:`TrimResult` with what was dropped."""
        messages, thread_id = split_conversation(messages, thread_id)
        if thread_id is not None:
            encode_thread_id(thread_id)
        checked = check_messages(messages, self._count, self._overhead)
        pinned = checked.pinned if self._keep_system else 0
        start = _first_kept(checked, pinned, self._max_tokens)
        kept = [dict(m) for m in checked.messages[:pinned]]
        kept.extend(dict(m) for m in checked.messages[start:])
        tokens = sum(checked.tokens[:pinned]) + sum(checked.tokens[start:])
        return TrimResult(kept, start - pinned, tokens, tokens <= self._max_tokens)


def _first_kept(checked: CheckedMessages, pinned: int, budget: int) -> int:
    """Index of the first message kept after the pinned ones.

    Whole units are dropped from the front while the rest exceeds the budget; the last unit
    is never dropped.
    """
    total = len(checked)
    tokens = sum(checked.tokens)
    position = pinned
    while position < total and tokens > budget:
        end = checked.unit_end[position]
        if end >= total - 1:
            break
        tokens -= sum(checked.tokens[position : end + 1])
        position = end + 1
    return position
