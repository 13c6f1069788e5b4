"""The adapter-author toolkit, under its former name: import it from :mod:`slimcache.stores`."""

from slimcache.stores import toolkit as _toolkit
from slimcache.stores.toolkit import *  # noqa: F403 - the toolkit's own __all__, kept in one place

__all__ = list(_toolkit.__all__)
