"""The front doors' settings: each checked once, grouped, and a compressor's as one object.

- :mod:`~slimcache.core.settings.checks`: one check per setting, raising a message that names
  the argument.
- :mod:`~slimcache.core.settings.groups`: the small frozen groups every front door builds from
  its flat keywords (:class:`~slimcache.core.settings.groups.Timeouts`,
  :class:`~slimcache.core.settings.groups.Coordination`, ...), each checking itself.
- :mod:`~slimcache.core.settings.compressor`: a summarize compressor's settings as one frozen
  object, checked through the groups, and what is derived from them, once per distinct set.
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
