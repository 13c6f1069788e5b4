"""``python -m slimcache``: the ``slimcache`` command."""

from slimcache._cli import main

main()
