"""LangChain and LangGraph with slimcache: an agent middleware, conversions, summarizers.

For an agent made with ``langchain.agents.create_agent``, :class:`CachedSummarizationMiddleware`
keeps what the model sees within bounds, with its summaries cached in your store and shared by
every worker, while the graph's state keeps every message::

    from langchain.agents import create_agent
    from slimcache.langchain import CachedSummarizationMiddleware

    summarize = CachedSummarizationMiddleware("openai:gpt-4o-mini", "redis://localhost:6379/0")
    agent = create_agent("openai:gpt-4o", tools=[...], middleware=[summarize])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "chat-42"}})

slimcache works on OpenAI-style message dicts; LangChain and LangGraph keep ``BaseMessage``
objects. :func:`from_langchain` and :func:`to_langchain` convert between the two (system,
developer, human, AI with tool calls, tool messages; string content or content parts), and
:func:`compress_langchain` runs a compressor on a LangChain message list and hands back
LangChain messages, the verbatim ones being the very objects given.

:class:`LangChainSummarizer` makes any LangChain chat model (``ChatOpenAI``, ``ChatAnthropic``,
a local model...) a slimcache summarizer; :func:`as_langchain_summarizer` goes the other way,
for LangChain's own ``SummarizationMiddleware(summarizer=...)``; :func:`as_token_counter`
makes a LangChain token counter slimcache's ``token_counter``.

Needs ``langchain`` (the middleware) or ``langchain-core`` (the rest):
``pip install "slimcache[langchain]"``. Importing this module imports neither; using what
needs them without them raises :class:`~slimcache.MissingExtraError`.
"""

from __future__ import annotations

import typing as _typing

from slimcache._public import publish as _publish
from slimcache.frameworks.lazy import lazy_exports as _lazy_exports
from slimcache.langchain._compress import compress_langchain
from slimcache.langchain._convert import DEVELOPER_ROLE_KEY, from_langchain, to_langchain
from slimcache.langchain._summarizer import (
    LangChainSummarizer,
    as_langchain_summarizer,
    as_token_counter,
)

if _typing.TYPE_CHECKING:
    from slimcache.langchain._middleware import (
        CachedSummarizationMiddleware as CachedSummarizationMiddleware,
    )

__all__ = [
    "DEVELOPER_ROLE_KEY",
    "CachedSummarizationMiddleware",
    "LangChainSummarizer",
    "as_langchain_summarizer",
    "as_token_counter",
    "compress_langchain",
    "from_langchain",
    "to_langchain",
]

_publish(__name__, globals(), [name for name in __all__ if name in globals()])

# Subclasses langchain's AgentMiddleware, so it is imported on first use, not with this module.
_LAZY = {"CachedSummarizationMiddleware": "slimcache.langchain._middleware"}

_lazy_exports(__name__, globals(), _LAZY)
