"""Chat messages: the message type, token counting, transcripts and the conversation wrapper.

The names in ``__all__`` are public: the message type and token counter shape, how slimcache
counts a message's tokens (:func:`count_message_tokens`, to budget as the front doors do) and
renders messages for a prompt (:func:`render_transcript`, for a summarizer of your own), and the
wrapper that carries a conversation's own message objects through a front door. The most used
of them are also importable from :mod:`slimcache`.

The package also gathers the checks and counting helpers the engine imports from here
(``check_messages``, ``CheckedMessages``, ...): they are internal and may change.
"""

# A name imported "as" itself is one of the internal helpers; __all__ lists the public names.
from slimcache._public import publish as _publish
from slimcache.messages.checks import MAX_NESTING as MAX_NESTING
from slimcache.messages.checks import CheckedMessages as CheckedMessages
from slimcache.messages.checks import check_messages as check_messages
from slimcache.messages.checks import ids_as_records as ids_as_records
from slimcache.messages.conversation import Conversation, unwrap_messages, wrap_messages
from slimcache.messages.tiktoken_counter import TiktokenCounter
from slimcache.messages.tokens import DEFAULT_MESSAGE_OVERHEAD as DEFAULT_MESSAGE_OVERHEAD
from slimcache.messages.tokens import NON_TEXT_PART_TOKENS as NON_TEXT_PART_TOKENS
from slimcache.messages.tokens import LazyTokens as LazyTokens
from slimcache.messages.tokens import RememberingCounter as RememberingCounter
from slimcache.messages.tokens import approx_tokens, count_message_tokens
from slimcache.messages.transcript import message_text as message_text
from slimcache.messages.transcript import render_transcript
from slimcache.messages.types import PINNED_ROLES as PINNED_ROLES
from slimcache.messages.types import ROLES as ROLES
from slimcache.messages.types import Message, TokenCounter
from slimcache.messages.types import MessageT as MessageT

__all__ = [
    "Conversation",
    "Message",
    "TiktokenCounter",
    "TokenCounter",
    "approx_tokens",
    "count_message_tokens",
    "render_transcript",
    "unwrap_messages",
    "wrap_messages",
]

_publish(__name__, globals(), __all__)
