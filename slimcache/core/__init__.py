"""The engine: compressor, planner, turns (a planned read, the wait for the lease), commit
(the write path), producing (summaries from the strategy), store I/O, lease,
results, settings, policies and strategies.

Import the public names from :mod:`slimcache`; ``MergeFunction`` and ``StrategyName`` (for a
:class:`~slimcache.Custom` strategy) are public at :mod:`slimcache.core.strategies`. Everything
else here is internal.
"""
