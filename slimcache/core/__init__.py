"""The engine: compressor, planner, store I/O, lease, entries, keys, results, settings,
policies and strategies.

Internal: import the public names from :mod:`slimcache`.
"""
