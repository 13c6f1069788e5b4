"""The engine: the compressor, the planner, a request's bookkeeping, the store gateway and a
thread's cache, the lease and the wait for it, the write path, producing summaries, the bound
on one summarizer call, results, settings, policies and strategies.

Import the public names from :mod:`slimcache`; ``MergeFunction`` and ``StrategyName`` (for a
:class:`~slimcache.Custom` strategy) are public at :mod:`slimcache.core.strategies`. Everything
else here is internal.
"""
