"""Store keys and message fingerprints.

The key grammar::

    key        = [namespace ":"] "thread_" encoded-id ":" suffix
    suffix     = "index" | "summary:" start "-" end | "lease"          ; SummarizeCompressor
               | "messages" [":" epoch ":" chunk]                       ; window memory
               | "session" | "next"                                    ; Compaction (llm mode)
               | "wrapped:index" | "wrapped:summary:" start "-" end    ; cached_summarizer
    encoded-id = 1*( ALPHA / DIGIT / "_" / "." / "-" / "%" HEXDIG HEXDIG ) | "~" 64HEXDIG

Start and end are inclusive, 0-based indices into the conversation's messages. The encoded id
never holds ``:``, so a key splits back into exactly one (namespace, thread id, suffix): the
namespace is everything before the last ``:`` that precedes ``thread_``, and a namespace given
without its trailing ``:`` gets one (``"myapp"`` and ``"myapp:"`` are the same namespace).
No thread id or namespace can collide with, or reach into, another thread's keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from urllib.parse import quote

from slimcache._exceptions import ConfigurationError, InvalidInput

__all__ = [
    "MAX_INT_ID_DIGITS",
    "MAX_PLAIN_ID_LENGTH",
    "ThreadKeys",
    "encode_thread_id",
    "fingerprint_chain",
    "fingerprint_range",
    "normalize_namespace",
]

# Encoded ids longer than this are replaced by a digest, keeping keys short enough for S3
# (1024 bytes) and SQL primary-key indexes.
MAX_PLAIN_ID_LENGTH = 128

# Integers above this size are refused before ``str()`` is asked to convert them (Python
# itself refuses past 4,300 digits); 1,000 digits is far beyond any real identifier.
MAX_INT_ID_DIGITS = 1000
MAX_INT_ID_BITS = 3321  # floor(1000 * log2(10))


def encode_thread_id(thread_id: str | int) -> str:
    """Encode a thread id into a key-safe, injective form.

    Letters, digits, ``_``, ``.`` and ``-`` stay as they are; every other character (``:``,
    ``/``, ``%``, ``~``, newlines, non-ASCII) is percent-encoded as UTF-8. An encoding longer
    than ``MAX_PLAIN_ID_LENGTH`` becomes ``~`` plus the SHA-256 of the id; ``~`` never appears
    in a plain encoding, so the two forms cannot collide.

    Raises:
        InvalidInput: If the id is empty or not a string or integer.
    """
    if isinstance(thread_id, bool) or not isinstance(thread_id, (str, int)):
        raise InvalidInput(
            f"thread_id must be a string or an integer, got {type(thread_id).__name__}"
        )
    if isinstance(thread_id, int):
        if thread_id.bit_length() > MAX_INT_ID_BITS:
            raise InvalidInput(
                f"an integer thread_id must have at most {MAX_INT_ID_DIGITS} digits; "
                "pass a longer id as a string"
            )
        text = str(thread_id)
    else:
        text = thread_id
    if not text:
        raise InvalidInput("thread_id must not be empty")
    encoded = quote(text, safe="", errors="surrogatepass").replace("~", "%7E")
    if len(encoded) > MAX_PLAIN_ID_LENGTH:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"~{digest}"
    return encoded


def normalize_namespace(namespace: object) -> str:
    """Return the key prefix of a namespace: ``""``, or the namespace ending in one ``:``.

    Raises:
        ConfigurationError: The namespace is not a string, or holds a newline or NUL.
    """
    if not isinstance(namespace, str):
        raise ConfigurationError(f"namespace must be a string, got {type(namespace).__name__}")
    if any(ch in namespace for ch in "\r\n\x00"):
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
    """

    def __init__(self, thread_id: str | int, namespace: str = "") -> None:
        namespace = normalize_namespace(namespace)
        self.encoded = encode_thread_id(thread_id)
        self.prefix = f"{namespace}thread_{self.encoded}:"

    def summary(self, start: int, end: int) -> str:
        """Key of the summary of messages ``start`` to ``end`` (inclusive)."""
        return f"{self.prefix}summary:{start}-{end}"

    @property
    def index(self) -> str:
        """Key of the thread's index entry (which ranges exist, and the newest summary)."""
        return f"{self.prefix}index"

    @property
    def lease(self) -> str:
        """Key of the short-lived lease a worker holds while it summarizes for the thread."""
        return f"{self.prefix}lease"


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


FINGERPRINT_PREFIX = "2:"
"""Marks fingerprints made by :func:`fingerprint_range`; older ones are bare hex."""


def fingerprint_range(canonical: Sequence[bytes], start: int, end: int) -> str:
    """Fingerprint messages ``start..end`` (inclusive) in one hash over their encodings.

    The canonical encodings are JSON objects, which delimit themselves, so their
    concatenation identifies exactly the covered messages: editing, removing or reordering
    any of them changes the fingerprint. One hash over the joined bytes costs far less than
    one hash per message, so checking a cached range against a long history stays cheap.
    Fingerprints made this way start with ``"2:"``; entries cached with the older per-message
    chain (:func:`fingerprint_chain`) are still checked with it.
    """
    # SHA-256: processors' SHA instructions make it the fastest of hashlib's hashes here, and
    # a hit hashes the whole history it serves.
    state = hashlib.sha256(f"slimcache-fp-v2:{start}:".encode())
    state.update(b"".join(canonical[start : end + 1]))
    return FINGERPRINT_PREFIX + state.hexdigest()[:32]
