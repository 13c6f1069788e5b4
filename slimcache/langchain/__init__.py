"""LangChain messages in and out of slimcache, and a LangChain chat model as the summarizer.

slimcache works on OpenAI-style message dicts; LangChain and LangGraph keep ``BaseMessage``
objects. :func:`from_langchain` and :func:`to_langchain` convert between the two (system,
developer, human, AI with tool calls, tool messages; string content or content parts), and
:func:`compress_langchain` runs a compressor on a LangChain message list and hands back
LangChain messages, the verbatim ones being the very objects given::

    from slimcache.langchain import compress_langchain

    messages = await compress_langchain(compressor, state["messages"], thread_id=thread_id)

:class:`LangChainSummarizer` makes any LangChain chat model (``ChatOpenAI``, ``ChatAnthropic``,
a local model...) a slimcache summarizer.

Needs ``langchain-core``: ``pip install "slimcache[langchain]"``. Importing this module does
not; calling its functions without it raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

from slimcache._public import publish as _publish
from slimcache.langchain._compress import compress_langchain
from slimcache.langchain._convert import DEVELOPER_ROLE_KEY, from_langchain, to_langchain
from slimcache.langchain._summarizer import LangChainSummarizer

__all__ = [
    "DEVELOPER_ROLE_KEY",
    "LangChainSummarizer",
    "compress_langchain",
    "from_langchain",
    "to_langchain",
]

_publish(__name__, globals(), __all__)
