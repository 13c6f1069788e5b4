"""LlamaIndex with slimcache: a memory block whose summary is cached in your store.

:class:`CachedSummaryBlock` summarizes the messages a LlamaIndex ``Memory`` flushes out of its
chat history, extending the cached summary with each new batch only, so every worker and every
``Memory`` built again on the same session reads the same summary with no summarizer call::

    from llama_index.core.memory import Memory
    from slimcache.llama_index import CachedSummaryBlock

    block = CachedSummaryBlock(llm, "redis://localhost:6379/0")
    memory = Memory.from_defaults(session_id="chat-42", memory_blocks=[block])

:class:`LlamaIndexSummarizer` makes any LlamaIndex LLM a slimcache summarizer.

Needs llama-index-core (``pip install "slimcache[llama-index]"``). Importing this module does
not import it; using what needs it without it raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import typing as _typing

from slimcache.frameworks.lazy import lazy_exports as _lazy_exports
from slimcache.frameworks.settings import AgentOptions as AgentOptions
from slimcache.frameworks.settings import AgentSettings as AgentSettings

if _typing.TYPE_CHECKING:
    from slimcache.llama_index._block import CachedSummaryBlock as CachedSummaryBlock
    from slimcache.llama_index._summarizer import LlamaIndexSummarizer as LlamaIndexSummarizer

__all__ = [
    "AgentOptions",
    "AgentSettings",
    "CachedSummaryBlock",
    "LlamaIndexSummarizer",
]


# Both need llama_index, so they are imported on first use, not with this module.
_LAZY = {
    "CachedSummaryBlock": "slimcache.llama_index._block",
    "LlamaIndexSummarizer": "slimcache.llama_index._summarizer",
}

_lazy_exports(__name__, globals(), _LAZY)
