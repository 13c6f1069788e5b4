"""The savings benchmark behind ``slimcache bench``: replay engine, datasets, report.

Internal: run it with ``slimcache bench``.
"""
