"""Store keys and message fingerprints.

The key grammar::

    key        = [namespace ":"] "thread_" encoded-id ":" suffix
    suffix     = "index" | "summary:" start "-" end | "lease"          ; SummarizeCompressor
               | "messages" [":" epoch ":" chunk]                       ; window memory
               | "session" | "next"                                    ; Compaction (llm mode)
               | "wrapped:index" | "wrapped:summary:" start "-" end    ; cached_summarizer
               | "turns"                                               ; SlidingWindow
    encoded-id = 1*( ALPHA / DIGIT / "_" / "." / "-" / "%" HEXDIG HEXDIG ) | "~" 64HEXDIG

Start and end are inclusive, 0-based indices into the conversation's messages; epoch is the
window memory's random alphanumeric id of one incarnation of the history, chunk a 0-based
number. ``turns`` is never stored: it names the in-process lock the sliding windows of one
thread take turns with. This module is the only one that spells these suffixes; every other
module asks :class:`ThreadKeys` for a key. The encoded id
never holds ``:``, so a key splits back into exactly one (namespace, thread id, suffix): the
namespace is everything before the last ``:`` that precedes ``thread_``, and a namespace given
without its trailing ``:`` gets one (``"myapp"`` and ``"myapp:"`` are the same namespace).
No thread id or namespace can collide with, or reach into, another thread's keys.
"""

from __future__ import annotations

import hashlib
import re
import sys
from array import array
from collections.abc import Sequence
from urllib.parse import quote, unquote

from slimcache._exceptions import ConfigurationError, InvalidInput

__all__ = [
    "HEADS",
    "MAX_INT_ID_DIGITS",
    "MAX_PLAIN_ID_LENGTH",
    "SUFFIXES",
    "ThreadKeys",
    "WrappedKeys",
    "decode_thread_id",
    "encode_thread_id",
    "fingerprint_chain",
    "fingerprint_range",
    "normalize_namespace",
    "thread_of",
]

# Encoded ids longer than this are replaced by a digest, keeping keys short enough for S3
# (1024 bytes) and SQL primary-key indexes.
MAX_PLAIN_ID_LENGTH = 128

# Integers above this size are refused before ``str()`` is asked to convert them (Python
# itself refuses past 4,300 digits); 1,000 digits is far beyond any real identifier.
MAX_INT_ID_DIGITS = 1000
MAX_INT_ID_BITS = 3321  # floor(1000 * log2(10))

# The suffix words of the grammar above, each spelled here and nowhere else.
_INDEX = "index"
_SUMMARY = "summary:"
_LEASE = "lease"
_HISTORY = "messages"
_SESSION = "session"
_LINK = "next"
_WRAPPED = "wrapped:"
_TURNS = "turns"

SUFFIXES = frozenset(
    {
        _INDEX,
        _SUMMARY,
        _LEASE,
        _HISTORY,
        _SESSION,
        _LINK,
        _WRAPPED + _INDEX,
        _WRAPPED + _SUMMARY,
        _TURNS,
    }
)
"""Every literal a key's suffix starts with (see the grammar in this module's docstring)."""

HEADS = {
    _INDEX: "compressor",
    _HISTORY: "window memory",
    _SESSION: "compaction",
    _WRAPPED + _INDEX: "cached_summarizer",
}
"""The suffixes of the one key each front door keeps a thread under, and the front door's name:
a thread is in the store while one of them is."""

# An id made only of characters percent-encoding keeps, short enough to stay plain, is its own
# encoding: the common case (a UUID, a database key) skips the encoder.
_PLAIN_ID = re.compile(rf"[A-Za-z0-9_.\-]{{1,{MAX_PLAIN_ID_LENGTH}}}")
# Integers of at most this many bits have at most 127 digits: a sign and all, still plain.
_PLAIN_INT_BITS = 421


def encode_thread_id(thread_id: str | int, *, name: str = "thread_id") -> str:
    """Encode a thread id into a key-safe, injective form.

    Letters, digits, ``_``, ``.`` and ``-`` stay as they are; every other character (``:``,
    ``/``, ``%``, ``~``, newlines, non-ASCII) is percent-encoded as UTF-8. An encoding longer
    than ``MAX_PLAIN_ID_LENGTH`` becomes ``~`` plus the SHA-256 of the id; ``~`` never appears
    in a plain encoding, so the two forms cannot collide.

    Args:
        thread_id: The id.
        name: What the caller calls the id, for the error message.

    Raises:
        InvalidInput: If the id is empty, only whitespace, or not a string or integer.
    """
    if type(thread_id) is str and _PLAIN_ID.fullmatch(thread_id):
        return thread_id
    if type(thread_id) is int and thread_id.bit_length() <= _PLAIN_INT_BITS:
        return str(thread_id)
    if isinstance(thread_id, bool) or not isinstance(thread_id, (str, int)):
        raise InvalidInput(f"{name} must be a string or an integer, got {type(thread_id).__name__}")
    if isinstance(thread_id, int):
        if thread_id.bit_length() > MAX_INT_ID_BITS:
            raise InvalidInput(
                f"an integer {name} must have at most {MAX_INT_ID_DIGITS} digits; "
                "pass a longer id as a string"
            )
        text = str(thread_id)
    else:
        text = thread_id
    if not text:
        raise InvalidInput(f"{name} must not be empty")
    if not text.strip():  # a blank id is as surely a mistake as an empty one
        raise InvalidInput(f"{name} must not be only whitespace, got {text!r}")
    encoded = quote(text, safe="", errors="surrogatepass").replace("~", "%7E")
    if len(encoded) > MAX_PLAIN_ID_LENGTH:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"~{digest}"
    return encoded


def decode_thread_id(encoded: str) -> str | None:
    """The thread id :func:`encode_thread_id` made ``encoded`` of; ``None`` for a long one,
    kept as its hash (``~`` and 64 hex digits). An integer id comes back as its digits."""
    if encoded.startswith("~"):
        return None
    return unquote(encoded, errors="surrogatepass")


def thread_of(key: str, namespace: str = "") -> tuple[str, str] | None:
    """The encoded thread id and the suffix of a key of ``namespace``, or ``None`` for a key
    that is not one (see the grammar above)."""
    prefix = f"{normalize_namespace(namespace)}thread_"
    encoded, colon, suffix = key[len(prefix) :].partition(":")
    if not key.startswith(prefix) or not colon or not encoded:
        return None
    return encoded, suffix


def normalize_namespace(namespace: object) -> str:
    """Return the key prefix of a namespace: ``""``, or the namespace ending in one ``:``.

    Raises:
        ConfigurationError: The namespace is not a string, or holds a newline or NUL.
    """
    if not isinstance(namespace, str):
        raise ConfigurationError(f"namespace must be a string, got {type(namespace).__name__}")
    if "\n" in namespace or "\r" in namespace or "\x00" in namespace:
        raise ConfigurationError("namespace must not contain newlines or NUL")
    if not namespace or namespace.endswith(":"):
        return namespace
    return namespace + ":"


class ThreadKeys:
    """The keys of one thread.

    Args:
        thread_id: The thread id (encoded with :func:`encode_thread_id`).
        namespace: Optional namespace put before every key, e.g. ``"myapp"``; it is separated
            from the rest by ``:`` (added when missing).
        name: What the caller calls the id, for the error message of a malformed one.

    Raises:
        InvalidInput: The id is malformed (see :func:`encode_thread_id`).
    """

    def __init__(
        self, thread_id: str | int, namespace: str = "", *, name: str = "thread_id"
    ) -> None:
        namespace = normalize_namespace(namespace)
        self.encoded = encode_thread_id(thread_id, name=name)
        self.prefix = f"{namespace}thread_{self.encoded}:"

    def summary(self, start: int, end: int) -> str:
        """Key of the summary of messages ``start`` to ``end`` (inclusive)."""
        return f"{self.prefix}{_SUMMARY}{start}-{end}"

    @property
    def index(self) -> str:
        """Key of the thread's index entry (which ranges exist, and the newest summary)."""
        return self.prefix + _INDEX

    @property
    def lease(self) -> str:
        """Key of the short-lived lease a worker holds while it summarizes for the thread."""
        return self.prefix + _LEASE

    @property
    def history_head(self) -> str:
        """Key of the window memory's head: message count, epoch, chunk size and tail."""
        return self.prefix + _HISTORY

    def history_chunk(self, epoch: str, number: int) -> str:
        """Key of chunk ``number`` of the window memory's history incarnation ``epoch``."""
        return f"{self.prefix}{_HISTORY}:{epoch}:{number}"

    @property
    def session(self) -> str:
        """Key of the compaction record of the session this thread was started as."""
        return self.prefix + _SESSION

    @property
    def link(self) -> str:
        """Key of the compaction link from this thread to the session that follows it."""
        return self.prefix + _LINK

    @property
    def wrapped(self) -> WrappedKeys:
        """The keys ``cached_summarizer`` keeps this thread's summaries under."""
        return WrappedKeys(self)

    @property
    def turns(self) -> str:
        """In-process name of the lock the thread's sliding windows take turns with.

        Never a store key: it only tells one thread's turns from another's.
        """
        return self.prefix + _TURNS


class WrappedKeys:
    """The keys ``cached_summarizer`` writes for one thread, beside the compressor's.

    They have the same roles as :attr:`ThreadKeys.index` and :meth:`ThreadKeys.summary`.

    Args:
        keys: The thread's keys.
    """

    def __init__(self, keys: ThreadKeys) -> None:
        self.encoded = keys.encoded
        self.index = f"{keys.prefix}{_WRAPPED}{_INDEX}"
        self._summary = f"{keys.prefix}{_WRAPPED}{_SUMMARY}"

    def summary(self, start: int, end: int) -> str:
        """Key of the summary of messages ``start`` to ``end`` (inclusive)."""
        return f"{self._summary}{start}-{end}"


def fingerprint_chain(canonical: list[bytes], start: int) -> list[str]:
    """Fingerprint every prefix of ``canonical[start:]`` in one pass.

    Element ``i - start`` of the result identifies exactly messages ``start..i``: each hash
    covers the previous hash and the next message, so editing, removing or reordering any
    covered message changes every fingerprint from that point on.
    """
    state = hashlib.blake2b(f"slimcache-fp-v1:{start}".encode(), digest_size=16).digest()
    chain: list[str] = []
    for item in canonical[start:]:
        state = hashlib.blake2b(state + item, digest_size=16).digest()
        chain.append(state.hex())
    return chain


FINGERPRINT_PREFIX = "3:"
"""Marks fingerprints made by :func:`fingerprint_range`; the oldest ones are bare hex."""


def fingerprint_range(kinds: str, payloads: Sequence[str], start: int, end: int) -> str:
    """Fingerprint messages ``start..end`` (inclusive) in one hash.

    Each message is recorded as a kind (one letter: a plain turn's role, or ``"j"``) and a
    payload text (a plain turn's content, or another message's canonical JSON); see
    :class:`slimcache.messages.checks.CheckedMessages`. The hash covers the kinds, every payload's
    length and then the payloads joined, so editing, removing or reordering any covered
    message changes the fingerprint, and no two lists of messages share the hashed bytes.

    Plain content is hashed as it is, not JSON-escaped: a cache hit fingerprints the whole
    history it serves, and one hash over the joined text costs little more than copying it.
    Fingerprints made this way start with ``"3:"``; entries cached with the per-message chain
    (:func:`fingerprint_chain`, bare hex) are still checked with it.
    """
    covered = payloads[start : end + 1]
    lengths = array("Q", map(len, covered))
    if sys.byteorder == "big":
        lengths.byteswap()  # the same bytes on every machine sharing the store
    # SHA-256: processors' SHA instructions make it the fastest of hashlib's hashes here.
    state = hashlib.sha256(f"slimcache-fp-v3:{start}:{kinds[start : end + 1]}:".encode())
    state.update(lengths)
    state.update("".join(covered).encode("utf-8", "surrogatepass"))
    return FINGERPRINT_PREFIX + state.hexdigest()[:32]
