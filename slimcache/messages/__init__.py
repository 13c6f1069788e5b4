"""Chat messages: types, validation, token counting, transcripts and the conversation wrapper.

Import the public names from :mod:`slimcache`; ``count_message_tokens`` and
``render_transcript`` are public here. Everything else is internal.
"""

from slimcache.messages.checks import MAX_NESTING, CheckedMessages, check_messages, ids_as_records
from slimcache.messages.conversation import Conversation, unwrap_messages, wrap_messages
from slimcache.messages.tokens import (
    DEFAULT_MESSAGE_OVERHEAD,
    NON_TEXT_PART_TOKENS,
    LazyTokens,
    RememberingCounter,
    approx_tokens,
    count_message_tokens,
)
from slimcache.messages.transcript import message_text, render_transcript
from slimcache.messages.types import PINNED_ROLES, ROLES, Message, MessageT, TokenCounter

__all__ = [
    "DEFAULT_MESSAGE_OVERHEAD",
    "MAX_NESTING",
    "NON_TEXT_PART_TOKENS",
    "PINNED_ROLES",
    "ROLES",
    "CheckedMessages",
    "Conversation",
    "LazyTokens",
    "Message",
    "MessageT",
    "RememberingCounter",
    "TokenCounter",
    "approx_tokens",
    "check_messages",
    "count_message_tokens",
    "ids_as_records",
    "message_text",
    "render_transcript",
    "unwrap_messages",
    "wrap_messages",
]
