"""The front doors built on the core, one module each.

Import the front doors from :mod:`slimcache`. A few names their users annotate or compare with
live in the front door's own module and are public there: ``ConversationStats``
(:mod:`slimcache.recipes.conversation_compressor`), ``WindowStats``
(:mod:`slimcache.recipes.sliding_window`), ``ExtendFunction`` and ``PlainSummarizer``
(:mod:`slimcache.recipes.cached_summarizer`), ``DEFAULT_SESSION_TEMPLATE`` and
``NEW_SESSION_TOOL`` (:mod:`slimcache.recipes.compaction`). Everything else here is internal.
"""
