"""``python -m slimcache``: the ``slimcache`` command."""

from slimcache.cli import main

main()
