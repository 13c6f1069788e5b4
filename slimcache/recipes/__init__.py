"""The front doors built on the core, one module each.

Internal: import the public names from :mod:`slimcache`.
"""
