"""The front doors' settings: each declared once, with its default and its check.

- :mod:`~slimcache.core.settings.compressor`: every setting of a summarize compressor, its
  type, default and check, the defaults every front door reads (``DEFAULTS``), and what is
  derived from the settings, once per distinct set.
- :mod:`~slimcache.core.settings.checks`: the kinds of check a setting is given, each raising a
  message that names the argument.
- :mod:`~slimcache.core.settings.groups`: what settings share beside their checks: types,
  defaults that are no setting's own, the default policies, hooks.
"""
