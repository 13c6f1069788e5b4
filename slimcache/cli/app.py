"""The ``slimcache`` command: ``bench``, ``inspect`` and ``clear``.

typer, rich and matplotlib come with the ``bench`` extra and are imported only when the
command runs, so the library itself never needs them: the commands live in
:mod:`slimcache.cli.bench` and :mod:`slimcache.cli.threads`, imported by :func:`build_app`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slimcache.cli.common import DEFAULT_STORE_URL, USAGE_ERROR

if TYPE_CHECKING:
    import typer

__all__ = ["DEFAULT_STORE_URL", "EXTRA_MESSAGE", "build_app", "main"]

EXTRA_MESSAGE = "slimcache bench needs its extra: pip install 'slimcache[bench]'"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``slimcache`` command (the console-script entry point)."""
    try:
        app = build_app()
    except ImportError:
        print(EXTRA_MESSAGE, file=sys.stderr)
        raise SystemExit(USAGE_ERROR) from None
    app(args=list(argv) if argv is not None else None, prog_name="slimcache")


def build_app() -> typer.Typer:
    """Build the typer application.

    Raises:
        ImportError: typer or rich is not installed (the ``bench`` extra).
    """
    import rich  # noqa: F401 - fail here, with the extra's message, when rich is missing
    import typer

    from slimcache.cli import bench, threads

    app = typer.Typer(
        name="slimcache",
        help="Cached, incremental conversation summaries: benchmark and inspect a store.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    bench.register(app)
    threads.register(app)
    return app
