"""The engine: compressor, planner, turns (a planned read, the wait for the lease), commit
(the write path), producing (summaries from the strategy), store I/O, lease, entries, keys,
results, settings, policies and strategies.

Internal: import the public names from :mod:`slimcache`.
"""
