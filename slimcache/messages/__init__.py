"""Chat messages: types, validation, token counting, transcripts and the conversation wrapper.

Internal: import the public names from :mod:`slimcache`.
"""
