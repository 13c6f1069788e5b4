"""The front doors' settings: each checked once, grouped, and a compressor's as one object.

- :mod:`~slimcache.core.settings.checks`: one check per setting, raising a message that names
  the argument.
- :mod:`~slimcache.core.settings.groups`: the small frozen groups every front door builds from
  its flat keywords (:class:`~slimcache.core.settings.groups.Timeouts`,
  :class:`~slimcache.core.settings.groups.Coordination`, ...), each checking itself.
- :mod:`~slimcache.core.settings.compressor`: a summarize compressor's settings as one frozen
  object, checked through the groups, and what is derived from them, once per distinct set.
"""
