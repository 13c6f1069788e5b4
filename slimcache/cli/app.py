"""The ``slimcache`` command: ``bench``, ``threads``, ``inspect`` and ``clear``, and
``slimcache --version``.

typer and rich come with the ``cli`` extra (which the ``bench`` extra includes, with the dataset,
matplotlib and the SQLite store) and are imported only when the command runs, so the library
itself never needs them: the commands live in :mod:`slimcache.cli.bench` and
:mod:`slimcache.cli.threads`, imported by :func:`build_app`. ``threads``, ``inspect`` and
``clear`` need only the ``cli`` extra (and the adapter of the store they are given).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slimcache._install import pip_install
from slimcache.cli.common import DEFAULT_STORE_URL, USAGE_ERROR, installed_version

if TYPE_CHECKING:
    import typer

__all__ = ["DEFAULT_STORE_URL", "build_app", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``slimcache`` command (the console-script entry point)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        app = build_app()
    except ImportError:
        if args == ["--version"]:  # needs no extra
            _print_version()
            return
        if args and args[0] == "bench":
            print(f"slimcache bench needs its extra: {pip_install('bench')}", file=sys.stderr)
        else:
            print(f"the slimcache command needs its extra: {pip_install('cli')}", file=sys.stderr)
        raise SystemExit(USAGE_ERROR) from None
    app(args=args, prog_name="slimcache")


def build_app() -> typer.Typer:
    """Build the typer application.

    Raises:
        ImportError: typer or rich is not installed (the ``cli`` extra).
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
        # Plain help: each option with its metavar (no "<bool>"), defaults wrapped, never cut.
        rich_markup_mode=None,
    )

    def print_version(wanted: bool) -> None:
        if wanted:
            _print_version()
            raise typer.Exit()

    @app.callback()
    def options(
        version: bool = typer.Option(
            False,
            "--version",
            is_eager=True,
            callback=print_version,
            help="Print the installed slimcache's version and exit.",
        ),
    ) -> None:
        """Options of the slimcache command itself, before the command's name."""

    bench.register(app)
    threads.register(app)
    return app


def _print_version() -> None:
    print(f"slimcache {installed_version()}")
