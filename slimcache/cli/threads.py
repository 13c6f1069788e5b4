"""``slimcache threads``, ``slimcache inspect`` and ``slimcache clear``: list a store's threads,
look at one thread's summaries and delete them.

Imported by :func:`slimcache.cli.app.build_app` only, as it needs typer and rich (the ``bench``
extra) at import time.
"""

# No ``from __future__ import annotations`` here: typer reads the commands' annotations at
# run time.

import asyncio
import math
import shlex
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from slimcache._exceptions import ConfigurationError, InvalidInput, SlimcacheError
from slimcache.bench.datasets import load_history
from slimcache.bench.engine import redact_url
from slimcache.cli.common import (
    RUN_ERROR,
    USAGE_ERROR,
    CommandError,
    close_store,
    fail,
    open_url,
    stdout_console,
)
from slimcache.core.settings.compressor import DEFAULTS
from slimcache.recipes.maintenance import (
    RangeInfo,
    ThreadListing,
    clear_thread,
    list_threads,
    thread_ranges,
)
from slimcache.stores.protocol import Store

_T = TypeVar("_T")

__all__ = ["clear", "format_age", "inspect", "register", "threads"]

UrlArgument = Annotated[str, typer.Argument(metavar="URL", help="Store URL.")]
ThreadOption = Annotated[str, typer.Option(metavar="ID", help="Thread id.")]
NamespaceOption = Annotated[
    str, typer.Option(metavar="NAME", help="Key namespace of the compressor.")
]


def register(app: typer.Typer) -> None:
    """Add the ``threads``, ``inspect`` and ``clear`` commands to ``app``, in that order."""
    app.command()(threads)
    app.command()(inspect)
    app.command()(clear)


def threads(
    url: UrlArgument,
    namespace: NamespaceOption = DEFAULTS.namespace,
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, help="List at least N threads, then stop.")
    ] = 100,
    cursor: Annotated[
        str | None,
        typer.Option(metavar="CURSOR", help="Go on where a previous listing stopped."),
    ] = None,
) -> None:
    """List the threads a store holds, a page at a time: each thread id, tab, what keeps it."""
    try:
        handle = open_url(url)
        listing = asyncio.run(_threads(handle, namespace, cursor, limit))
    except CommandError as error:
        fail(error)
    for thread, kinds in listing.threads.items():
        print(f"{thread}\t{', '.join(kinds)}")
    if listing.cursor is not None:
        again = ["slimcache", "threads", redact_url(url), "--cursor", listing.cursor]
        if namespace:
            again += ["--namespace", namespace]
        print(f"more: {shlex.join(again)}", file=sys.stderr)


def inspect(
    url: UrlArgument,
    thread: ThreadOption,
    history: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="The conversation as JSON: also say whether each range is valid."
        ),
    ] = None,
    namespace: NamespaceOption = DEFAULTS.namespace,
    summaries: Annotated[
        bool, typer.Option("--summaries", help="Also print each summary's text.")
    ] = False,
    fingerprint: Annotated[
        str,
        typer.Option(
            metavar="content|id", help="The compressor's fingerprint setting: content or id."
        ),
    ] = DEFAULTS.fingerprint,
    wrapped: Annotated[
        bool,
        typer.Option(
            "--wrapped",
            help="List the summaries of a cached_summarizer function instead of the compressor's.",
        ),
    ] = False,
) -> None:
    """List a thread's cached summary ranges."""
    try:
        messages = None
        if history is not None:
            try:
                messages = load_history(history)
            except (ConfigurationError, InvalidInput) as exc:
                raise CommandError(str(exc), USAGE_ERROR) from None
        handle = open_url(url)
        ranges = asyncio.run(
            _inspect(handle, thread, namespace, messages, fingerprint, wrapped=wrapped)
        )
    except CommandError as error:
        fail(error)
    _print_ranges(url, thread, ranges, summaries, wrapped=wrapped)


def clear(
    url: UrlArgument, thread: ThreadOption, namespace: NamespaceOption = DEFAULTS.namespace
) -> None:
    """Delete a thread's index and every cached range it lists."""
    try:
        handle = open_url(url)
        deleted = asyncio.run(_clear(handle, thread, namespace))
    except CommandError as error:
        fail(error)
    print(f"deleted {deleted} keys of thread {thread}")


def _count(value: int) -> str:
    return f"{value:,}"


def _range_rows(ranges: list[RangeInfo]) -> list[list[str]]:
    rows = []
    for info in ranges:
        age = info.age()
        rows.append(
            [
                f"{info.start}-{info.end}",
                "yes" if info.head else "",
                "yes" if info.stored else "no",
                "-" if info.summary_chars is None else _count(info.summary_chars),
                "-" if info.summary_tokens is None else _count(info.summary_tokens),
                "-" if info.covered_tokens is None else _count(info.covered_tokens),
                "-" if age is None else format_age(age),
                info.summarizer or "-",
                info.strategy or "-",
                {None: "-", True: "valid", False: "stale"}[info.valid],
            ]
        )
    return rows


def format_age(seconds: float) -> str:
    """An age as ``inspect`` shows it: its two largest units, ``"59s"``, ``"16m 0s"``,
    ``"2h 5m"``, ``"3d 4h"``.

    The age is rounded once, to the smaller unit shown, before it is split: ``959.6`` seconds
    is ``"16m 0s"``, never ``"15m 60s"``, and ``3599.7`` is ``"1h 0m"``. Halves round up.

    Args:
        seconds: The age, zero or more.
    """
    whole_seconds = _round(seconds)
    if whole_seconds < 3600:
        minutes, secs = divmod(whole_seconds, 60)
        return f"{minutes}m {secs}s" if minutes else f"{secs}s"
    whole_minutes = _round(seconds / 60)
    if whole_minutes < 24 * 60:
        hours, minutes = divmod(whole_minutes, 60)
        return f"{hours}h {minutes}m"
    days, hours = divmod(_round(seconds / 3600), 24)
    return f"{days}d {hours}h"


def _round(value: float) -> int:
    """``value`` to the nearest whole number, halves up (``round`` takes halves to even)."""
    return math.floor(value + 0.5)


async def _inspect(
    store: Store,
    thread: str,
    namespace: str,
    messages: list[dict[str, Any]] | None,
    fingerprint: str,
    *,
    wrapped: bool = False,
) -> list[RangeInfo]:
    async def ranges() -> list[RangeInfo]:
        if fingerprint not in ("content", "id"):
            raise ConfigurationError(f"--fingerprint must be content or id, got {fingerprint!r}")
        if wrapped and fingerprint == "id":
            raise ConfigurationError(
                "--wrapped lists cached_summarizer's summaries, checked by content: "
                "--fingerprint id does not apply"
            )
        return await thread_ranges(
            store,
            thread,
            namespace=namespace,
            messages=messages,
            fingerprint="id" if fingerprint == "id" else "content",
            source="wrapped" if wrapped else "compressor",
        )

    return await _on_store(store, ranges())


async def _threads(store: Store, namespace: str, cursor: str | None, limit: int) -> ThreadListing:
    # Pages of keys in step with the threads asked for: a thread has a few keys or more.
    page_size = min(max(4 * limit, 10), 1000)
    listing = list_threads(
        store, namespace=namespace, cursor=cursor, limit=limit, page_size=page_size
    )
    return await _on_store(store, listing)


async def _clear(store: Store, thread: str, namespace: str) -> int:
    return await _on_store(store, clear_thread(store, thread, namespace=namespace))


async def _on_store(store: Store, call: Awaitable[_T]) -> _T:
    """Await ``call``, a command's work on ``store``, then close the store; a slimcache error
    is the command's error (bad input: a usage error)."""
    try:
        return await call
    except (ConfigurationError, InvalidInput) as exc:
        raise CommandError(str(exc), USAGE_ERROR) from None
    except SlimcacheError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}", RUN_ERROR) from None
    finally:
        await close_store(store)


def _print_ranges(
    url: str, thread: str, ranges: list[RangeInfo], summaries: bool, *, wrapped: bool = False
) -> None:
    from rich.table import Table

    console = stdout_console()
    whose = " of cached_summarizer" if wrapped else ""
    if not ranges:
        console.print(f"no cached summaries{whose} for thread {thread!r} in {redact_url(url)}")
        return
    table = Table(
        title=f"thread {thread!r} in {redact_url(url)}: {len(ranges)} cached ranges{whose}"
    )
    for name in (
        "range",
        "head",
        "stored",
        "summary chars",
        "summary tokens",
        "covers tokens",
        "age",
        "summarizer",
        "strategy",
        "valid",
    ):
        table.add_column(name, justify="right" if "tokens" in name or "chars" in name else "left")
    for row in _range_rows(ranges):
        table.add_row(*row)
    console.print(table)
    if summaries:
        for info in ranges:
            console.print(f"\n[bold]{info.start}-{info.end}[/]")
            console.print(info.summary or "(not in the store)", markup=False, highlight=False)
