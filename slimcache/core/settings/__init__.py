"""The front doors' settings: each declared once, with its default and its check.

- :mod:`~slimcache.core.settings.compressor`: every setting of a summarize compressor, its
  type, default and check, the defaults every front door reads (``DEFAULTS``), and what is
  derived from the settings, once per distinct set.
- :mod:`~slimcache.core.settings.checks`: the kinds of check a setting is given, each raising a
  message that names the argument.
- :mod:`~slimcache.core.settings.groups`: what settings share beside their checks: types,
  defaults that are no setting's own, the default policies, hooks.
"""

import warnings
from typing import TYPE_CHECKING

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """The groups and checks, served from here as when the settings were one module, for
        one more release, with a warning."""
        from slimcache.core.settings import checks, groups

        for module in (groups, checks):
            if name in module.__all__:
                message = f"{__name__}.{name} is deprecated: it is now {module.__name__}.{name}"
                warnings.warn(message, DeprecationWarning, stacklevel=2)
                return getattr(module, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
