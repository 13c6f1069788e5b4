"""The engine: the compressor, the planner, a request's bookkeeping, the store gateway and a
thread's cache, the lease and the wait for it, the write path, producing summaries, the bound
on one summarizer call, results, settings, policies and strategies.

Everything here is internal. Import the public names from :mod:`slimcache`, and the types to
annotate with (``Outcome``, ``MergeFunction``, ``StrategyName``, ...) from :mod:`slimcache.types`.
"""
