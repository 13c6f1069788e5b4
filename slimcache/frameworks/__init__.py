"""What the agent framework integrations share.

- :mod:`~slimcache.frameworks.sizes`: ``trigger`` and ``keep`` in the sizes LangChain made
  familiar (``("messages", 50)``, ``("tokens", 4000)``, ``("fraction", 0.8)``).
- :mod:`~slimcache.frameworks.stores`: the store rule (a URL is opened, owned and closed by
  the front door; a store object stays the caller's).
- :mod:`~slimcache.frameworks.compression`: the compression each integration runs, on
  slimcache's event loop (awaited, or blocking for a sync hook), degrading to the last cached
  summary when the summarizer fails, counted in its stats, and where the summary went in the
  messages given.
- :mod:`~slimcache.frameworks.spans`: exactly a given span of a thread summarized, cached by
  its range, for a framework that hands over the very messages to summarize.
- :mod:`~slimcache.frameworks.settings`: the settings every integration takes by keyword, as
  one frozen object (every setting of the compressor among them, by its keyword), and their
  place in each integration's signature.
- :mod:`~slimcache.frameworks.summarizers`: what ``model=`` makes, and a framework model's
  summarizer, asking once more, shorter, for a reply cut at its limit.
- :mod:`~slimcache.frameworks.caller_loop`: a framework model's requests go back to the
  agent's own event loop.
- :mod:`~slimcache.frameworks.providers`: the provider a framework's model reaches, in
  OpenTelemetry's words.
- :mod:`~slimcache.frameworks.lazy`: a bridge's names that need its framework, imported on
  first use.
"""
