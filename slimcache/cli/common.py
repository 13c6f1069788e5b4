"""What every ``slimcache`` command shares: exit codes, consoles, opening and closing a store.

rich is imported only inside the functions that need it, so this module imports without the
``bench`` extra.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import TYPE_CHECKING, NoReturn

from slimcache._exceptions import ConfigurationError
from slimcache._version import VERSION
from slimcache.stores.protocol import Store, SupportsClose
from slimcache.stores.registry import open_store

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEFAULT_STORE_URL",
    "RUN_ERROR",
    "USAGE_ERROR",
    "CommandError",
    "close_store",
    "fail",
    "installed_version",
    "open_url",
    "stderr_console",
    "stdout_console",
]

DEFAULT_STORE_URL = "sqlite+aiosqlite:///./slimcache-bench.db"
"""The store ``slimcache bench`` uses when given none: a SQLite file in the current directory."""

USAGE_ERROR = 2
"""Exit code of a bad option, a bad file or an unusable store URL or endpoint."""

RUN_ERROR = 1
"""Exit code of a failure while the command runs (the store or the summarizer failed)."""


class CommandError(Exception):
    """Stop the command with a message on stderr and an exit code.

    Args:
        message: What went wrong.
        code: The exit code (:data:`USAGE_ERROR` or :data:`RUN_ERROR`).
    """

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def stderr_console() -> Console:
    """A rich console on stderr."""
    from rich.console import Console

    return Console(stderr=True)


def stdout_console() -> Console:
    """A rich console on stdout, wide enough for the tables when the output is not a terminal."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped or captured output: wide enough for the table not to wrap.
        console = Console(width=120)
    return console


def fail(error: CommandError) -> NoReturn:
    """Print ``error`` on stderr and exit with its code."""
    console = stderr_console()
    console.print("[bold red]error:[/]", end=" ")
    console.print(str(error), markup=False, highlight=False, soft_wrap=True)
    raise SystemExit(error.code)


def installed_version() -> str:
    """The version of the installed ``slimcache`` distribution, as ``slimcache --version``
    prints it; run from a source tree that is not installed, the package's own, so marked."""
    try:
        return importlib.metadata.version("slimcache")
    except importlib.metadata.PackageNotFoundError:
        return f"{VERSION} (not installed)"


def open_url(url: str) -> Store:
    """Open the store ``url`` names.

    Raises:
        CommandError: The URL is not usable (exit code :data:`USAGE_ERROR`).
    """
    try:
        return open_store(url)
    except ConfigurationError as exc:
        raise CommandError(str(exc), USAGE_ERROR) from None


async def close_store(store: Store) -> None:
    """Close ``store`` when it can be closed."""
    if isinstance(store, SupportsClose):
        await store.aclose()
