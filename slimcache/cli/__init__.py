"""The ``slimcache`` command."""

from slimcache.cli.app import main

__all__ = ["main"]
