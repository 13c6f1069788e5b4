"""Store keys and message fingerprints.

Keys look like ``<namespace>thread_<id>:summary:<start>-<end>``, start and end being inclusive,
0-based indices into the conversation's messages. The thread id is encoded so that no id can
collide with, or reach into, another thread's keys.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from slimcache._exceptions import ConfigurationError, InvalidInput

__all__ = [
    "MAX_PLAIN_ID_LENGTH",
    "ThreadKeys",
    "encode_thread_id",
    "fingerprint_chain",
]

# Encoded ids longer than this are replaced by a digest, keeping keys short enough for S3
# (1024 bytes) and SQL primary-key indexes.
MAX_PLAIN_ID_LENGTH = 128


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
    text = str(thread_id)
    if not text:
        raise InvalidInput("thread_id must not be empty")
    encoded = quote(text, safe="", errors="surrogatepass").replace("~", "%7E")
    if len(encoded) > MAX_PLAIN_ID_LENGTH:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"~{digest}"
    return encoded


class ThreadKeys:
    """The keys of one thread.

    Args:
        thread_id: The thread id (encoded with :func:`encode_thread_id`).
        namespace: Optional prefix put before every key, e.g. ``"myapp:"``.
    """

    def __init__(self, thread_id: str | int, namespace: str = "") -> None:
        if not isinstance(namespace, str) or any(ch in namespace for ch in "\r\n\x00"):
            raise ConfigurationError("namespace must be a string without newlines or NUL")
        self.encoded = encode_thread_id(thread_id)
        self.prefix = f"{namespace}thread_{self.encoded}:"

    def summary(self, start: int, end: int) -> str:
        """Key of the summary of messages ``start`` to ``end`` (inclusive)."""
        return f"{self.prefix}summary:{start}-{end}"

    @property
    def index(self) -> str:
        """Key of the thread's index entry (which ranges exist, and the newest summary)."""
        return f"{self.prefix}index"

    def lock(self, start: int, end: int) -> str:
        """Key of the short-lived lock taken while one worker summarizes a range."""
        return f"{self.prefix}lock:{start}-{end}"


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
