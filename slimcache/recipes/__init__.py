"""The front doors built on the core, one module each.

Everything here is internal. Import the front doors from :mod:`slimcache`, and the names
their users annotate or compare with (``WindowStats``, ``ConversationStats``,
``PlainSummarizer``, ``NEW_SESSION_TOOL``, ...) from :mod:`slimcache.types`.
"""
