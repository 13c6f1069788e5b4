"""The ``slimcache`` command: ``bench``, ``inspect`` and ``clear``.

typer, rich and matplotlib come with the ``bench`` extra and are imported only when the
command runs, so the library itself never needs them.
"""

# No ``from __future__ import annotations`` here: typer reads the commands' annotations at
# run time, and they refer to names imported inside build_app().

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

from slimcache._exceptions import ConfigurationError, InvalidInput, SlimcacheError
from slimcache.bench.datasets import CHITCHAT, load_dataset, load_history, select_conversations
from slimcache.bench.engine import (
    DEFAULT_PRICE_PER_MTOK,
    BenchReport,
    BenchSettings,
    ModeResult,
    OfflineSummarizer,
    OpenAISummarizer,
    make_summarizer,
    redact_url,
    run_bench,
    write_plot,
    write_report_json,
)
from slimcache.core.strategies import StrategyName
from slimcache.recipes.maintenance import RangeInfo, clear_thread, thread_ranges
from slimcache.stores.protocol import Store, SupportsClose
from slimcache.stores.registry import open_store

if TYPE_CHECKING:
    import typer
    from rich.console import Console

__all__ = ["DEFAULT_STORE_URL", "EXTRA_MESSAGE", "build_app", "main"]

DEFAULT_STORE_URL = "sqlite+aiosqlite:///./slimcache-bench.db"
EXTRA_MESSAGE = "slimcache bench needs its extra: pip install 'slimcache[bench]'"
DEFAULT_MIN_MESSAGES = 40
USAGE_ERROR = 2
RUN_ERROR = 1


class _Exit(Exception):
    """Stop the command with a message on stderr and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``slimcache`` command (the console-script entry point)."""
    try:
        app = build_app()
    except ImportError:
        print(EXTRA_MESSAGE, file=sys.stderr)
        raise SystemExit(USAGE_ERROR) from None
    app(args=list(argv) if argv is not None else None, prog_name="slimcache")


# ---------------------------------------------------------------- helpers


def _stderr_console() -> "Console":
    from rich.console import Console

    return Console(stderr=True)


def _stdout_console() -> "Console":
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped or captured output: wide enough for the table not to wrap.
        console = Console(width=120)
    return console


def _fail(error: _Exit) -> NoReturn:
    console = _stderr_console()
    console.print("[bold red]error:[/]", end=" ")
    console.print(str(error), markup=False, highlight=False, soft_wrap=True)
    raise SystemExit(error.code)


def _open(url: str) -> Store:
    try:
        return open_store(url)
    except ConfigurationError as exc:
        raise _Exit(str(exc), USAGE_ERROR) from None


async def _close(store: Store) -> None:
    if isinstance(store, SupportsClose):
        await store.aclose()


def _number(value: int) -> str:
    return f"{value:,}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}x" if value < 0.995 else f"{value:.2f}x"


def _latency(mode: ModeResult) -> str:
    if mode.latency_median_ms is None or mode.latency_p99_ms is None:
        return "-"
    return f"{mode.latency_median_ms:.2f} / {mode.latency_p99_ms:.2f} ms"


def _duration(ms: float) -> str:
    # A hit on memory:// is microseconds, on a network store milliseconds.
    return f"{ms * 1000:.1f} µs" if ms < 1 else f"{ms:.2f} ms"


def _hit_latency(mode: ModeResult) -> str:
    if mode.hit_median_ms is None or mode.index_get_median_ms is None:
        return "-"
    return f"{_duration(mode.hit_median_ms)} / {_duration(mode.index_get_median_ms)}"


# ---------------------------------------------------------------- bench


class _RichProgress:
    """A rich progress bar on stderr, one task per mode; silent when stderr is not a TTY."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        console = _stderr_console()
        self.progress = Progress(
            "{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self.task: Any = None

    def start(self, label: str, total: int) -> None:
        self.task = self.progress.add_task(label, total=total)

    def advance(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)


def _store_state(report: BenchReport) -> str:
    threads = len(report.thread_ids)
    if report.warm_threads == 0:
        return "cold"
    return f"warm ({report.warm_threads}/{threads} threads cached)"


def print_report(report: BenchReport, console: "Console") -> None:
    """Print the benchmark table and the floor line."""
    from rich.table import Table
    from rich.text import Text

    settings = report.settings
    price = settings.price_per_mtok
    modes = list(report.modes.values())
    title = (
        f"slimcache bench: {len(report.conversations)} {report.dataset} conversations, "
        f"{_number(report.requests)} requests per mode\n"
        f"summarizer {report.summarizer}; summarize when > {settings.threshold} messages, "
        f"keep {settings.keep}; strategy {settings.strategy}\n"
        f"store {report.store}: {_store_state(report)} before this run"
    )
    table = Table(title=Text(title), title_justify="left", show_lines=False)
    table.add_column("per mode", style="bold", no_wrap=True)
    for mode in modes:
        header = mode.label.replace(" (", "\n(", 1)
        if mode.key == "store":
            header = f"{header}\n{_store_state(report)}"
        elif mode.key == "second_pass":
            header = f"{header}\nsame threads again"
        table.add_column(header, justify="right")

    def row(name: str, values: list[str]) -> None:
        table.add_row(name, *values)

    row("summarizer calls", [_number(m.summarizer_calls) for m in modes])
    row("  vs naive", [_ratio(report.ratio(m.key, "summarizer_calls")) for m in modes])
    row("summarizer input tokens", [_number(m.input_tokens) for m in modes])
    row("  vs naive", [_ratio(report.ratio(m.key, "input_tokens")) for m in modes])
    row("summarizer output tokens", [_number(m.output_tokens) for m in modes])
    row(f"input-token cost @ ${price:g}/Mtok", [f"${m.cost(price):.4f}" for m in modes])
    row(
        "cache hits / extensions / misses",
        [
            "-" if m.key == "naive" else f"{m.cache_hits:,} / {m.extensions:,} / {m.misses:,}"
            for m in modes
        ],
    )
    row(
        "invalidated summaries",
        ["-" if m.key == "naive" else _number(m.invalidations) for m in modes],
    )
    row("store round trips", [_number(m.store_round_trips) for m in modes])
    row("store latency median / p99", [_latency(m) for m in modes])
    row("cache hit / store.get median", [_hit_latency(m) for m in modes])
    row("wall time", [f"{m.wall_seconds:.2f} s" for m in modes])
    console.print(table)

    floor = report.floor_tokens
    memory = report.modes.get("memory")
    naive = report.modes.get("naive")
    lines = [f"Floor: {floor:,} tokens = every message that ever left the window, counted once."]
    if memory is not None:
        extra = memory.input_tokens - memory.message_tokens
        lines.append(
            f"slimcache sent {memory.message_tokens:,} message tokens to the summarizer "
            f"({'exactly the floor' if memory.message_tokens == floor else 'vs the floor'}), "
            f"plus {extra:,} tokens of prompts and previous summaries."
        )
    if naive is not None and floor:
        lines.append(
            f"naive sent {naive.message_tokens:,} message tokens: "
            f"{naive.message_tokens / floor:.1f}x the floor."
        )
    second = report.modes.get("second_pass")
    if second is not None and second.hit_median_ms is not None and second.index_get_median_ms:
        lines.append(
            f"A cache hit took {_duration(second.hit_median_ms)} (median of "
            f"{second.hit_samples:,} in the second pass): "
            f"{second.hit_median_ms / second.index_get_median_ms:.1f}x one plain store.get of "
            f"the thread's index ({_duration(second.index_get_median_ms)}) in the same run."
        )
    lines.append("Cost counts summarizer input tokens only.")
    console.print("\n".join(lines), highlight=False, soft_wrap=True)


async def _bench(
    store: Store,
    store_url: str,
    dataset_spec: str,
    conversations: int,
    min_messages: int | None,
    seed: int,
    summarizer: OfflineSummarizer | OpenAISummarizer,
    settings: BenchSettings,
) -> BenchReport:
    try:
        dataset = load_dataset(dataset_spec)
        if min_messages is None:
            min_messages = DEFAULT_MIN_MESSAGES if dataset_spec == CHITCHAT else 0
        chosen = select_conversations(
            dataset.conversations, count=conversations, min_messages=min_messages, seed=seed
        )
        if isinstance(summarizer, OpenAISummarizer):
            try:
                await asyncio.to_thread(summarizer.preflight)
            except SlimcacheError as exc:
                raise _Exit(f"the summarizer endpoint is not usable: {exc}", USAGE_ERROR) from None
    except (ConfigurationError, InvalidInput) as exc:
        await _close(store)
        raise _Exit(str(exc), USAGE_ERROR) from None
    except BaseException:
        await _close(store)
        raise
    progress = _RichProgress()
    try:
        with progress.progress:
            return await run_bench(
                dataset,
                chosen,
                store=store,
                store_url=store_url,
                summarizer=summarizer,
                settings=settings,
                progress=progress,
                extra={
                    "dataset_digest": dataset.digest,
                    "conversations_requested": conversations,
                    "min_messages": min_messages,
                    "seed": seed,
                },
            )
    except SlimcacheError as exc:
        raise _Exit(f"{type(exc).__name__}: {exc}", RUN_ERROR) from None
    finally:
        await _close(store)


def _range_rows(ranges: list[RangeInfo]) -> list[list[str]]:
    rows = []
    for info in ranges:
        age = info.age()
        rows.append(
            [
                f"{info.start}-{info.end}",
                "yes" if info.head else "",
                "yes" if info.stored else "no",
                "-" if info.summary_chars is None else _number(info.summary_chars),
                "-" if info.summary_tokens is None else _number(info.summary_tokens),
                "-" if info.covered_tokens is None else _number(info.covered_tokens),
                "-" if age is None else _age(age),
                info.summarizer or "-",
                info.strategy or "-",
                {None: "-", True: "valid", False: "stale"}[info.valid],
            ]
        )
    return rows


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m {seconds % 60:.0f}s"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h {seconds % 3600 // 60:.0f}m"
    return f"{seconds // 86400:.0f}d {seconds % 86400 // 3600:.0f}h"


# ---------------------------------------------------------------- the app


def build_app() -> "typer.Typer":
    """Build the typer application.

    Raises:
        ImportError: typer or rich is not installed (the ``bench`` extra).
    """
    import rich  # noqa: F401 - fail here, with the extra's message, when rich is missing
    import typer

    app = typer.Typer(
        name="slimcache",
        help="Cached, incremental conversation summaries: benchmark and inspect a store.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.command()
    def bench(
        store: Annotated[
            str, typer.Option(help="Store URL for the store modes (memory://, redis://, ...).")
        ] = DEFAULT_STORE_URL,
        conversations: Annotated[
            int, typer.Option("--conversations", "-n", min=1, help="Conversations to replay.")
        ] = 50,
        dataset: Annotated[
            str,
            typer.Option(help="'chitchat', or your own OpenAI-format .json / .jsonl file."),
        ] = CHITCHAT,
        summarizer: Annotated[
            str,
            typer.Option(
                help="'offline' (deterministic, no network) or 'openai:MODEL' "
                "(OPENAI_API_KEY, optional OPENAI_BASE_URL)."
            ),
        ] = "offline",
        price_per_mtok: Annotated[
            float,
            typer.Option(min=0.0, help="Dollars per million summarizer input tokens."),
        ] = DEFAULT_PRICE_PER_MTOK,
        json_out: Annotated[
            Path | None, typer.Option("--json", help="Write every figure to this JSON file.")
        ] = None,
        plot: Annotated[
            Path | None, typer.Option(help="Write a PNG of cumulative summarizer input tokens.")
        ] = None,
        threshold: Annotated[
            int, typer.Option(min=1, help="Summarize when the window holds more messages.")
        ] = 20,
        keep: Annotated[
            int, typer.Option(min=1, help="Messages kept verbatim after summarizing.")
        ] = 10,
        strategy: Annotated[
            str, typer.Option(help="extend, concat, hybrid or replace.")
        ] = "extend",
        summary_tokens: Annotated[
            int, typer.Option(min=1, help="Token budget of a summary.")
        ] = 400,
        checkpoints: Annotated[
            int | None,
            typer.Option(
                min=1,
                help="Ranges listed per thread (default: the compressor's).",
                show_default=False,
            ),
        ] = None,
        min_messages: Annotated[
            int | None,
            typer.Option(
                min=0,
                help=f"Only conversations with at least this many messages "
                f"(default: {DEFAULT_MIN_MESSAGES} for chitchat, 0 for a file).",
                show_default=False,
            ),
        ] = None,
        seed: Annotated[
            int, typer.Option(help="Which conversations are sampled when more are eligible.")
        ] = 0,
    ) -> None:
        """Replay conversations as a stateless chat server would, with and without the cache."""
        try:
            try:
                settings = BenchSettings(
                    threshold=threshold,
                    keep=keep,
                    strategy=cast("StrategyName", strategy),  # BenchSettings checks the value
                    summary_tokens=summary_tokens,
                    checkpoints=checkpoints,
                    price_per_mtok=price_per_mtok,
                )
                # A missing key fails here, before the dataset or the store is touched.
                chosen_summarizer = make_summarizer(summarizer)
            except ConfigurationError as exc:
                raise _Exit(str(exc), USAGE_ERROR) from None
            for option, target in (("--json", json_out), ("--plot", plot)):
                if target is not None and not target.parent.is_dir():
                    raise _Exit(f"{option}: no such directory: {target.parent}", USAGE_ERROR)
            if plot is not None:
                _check_plotting()
            handle = _open(store)
            report = asyncio.run(
                _bench(
                    handle,
                    store,
                    dataset,
                    conversations,
                    min_messages,
                    seed,
                    chosen_summarizer,
                    settings,
                )
            )
        except _Exit as error:
            _fail(error)
        print_report(report, _stdout_console())
        if json_out is not None:
            write_report_json(report, json_out)
            print(f"wrote {json_out}", file=sys.stderr)
        if plot is not None:
            write_plot(report, plot)
            print(f"wrote {plot}", file=sys.stderr)

    @app.command()
    def inspect(
        url: Annotated[str, typer.Argument(help="Store URL.")],
        thread: Annotated[str, typer.Option(help="Thread id.")],
        history: Annotated[
            Path | None,
            typer.Option(help="The conversation as JSON: also say whether each range is valid."),
        ] = None,
        namespace: Annotated[str, typer.Option(help="Key namespace of the compressor.")] = "",
        summaries: Annotated[
            bool, typer.Option("--summaries", help="Also print each summary's text.")
        ] = False,
        fingerprint: Annotated[
            str,
            typer.Option(help="The compressor's fingerprint setting: content or id."),
        ] = "content",
        wrapped: Annotated[
            bool,
            typer.Option(
                "--wrapped",
                help="List the summaries of a cached_summarizer function instead of the "
                "compressor's.",
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
                    raise _Exit(str(exc), USAGE_ERROR) from None
            handle = _open(url)
            ranges = asyncio.run(
                _inspect(handle, thread, namespace, messages, fingerprint, wrapped=wrapped)
            )
        except _Exit as error:
            _fail(error)
        _print_ranges(url, thread, ranges, summaries, wrapped=wrapped)

    @app.command()
    def clear(
        url: Annotated[str, typer.Argument(help="Store URL.")],
        thread: Annotated[str, typer.Option(help="Thread id.")],
        namespace: Annotated[str, typer.Option(help="Key namespace of the compressor.")] = "",
    ) -> None:
        """Delete a thread's index and every cached range it lists."""
        try:
            handle = _open(url)
            deleted = asyncio.run(_clear(handle, thread, namespace))
        except _Exit as error:
            _fail(error)
        print(f"deleted {deleted} keys of thread {thread}")

    return app


def _check_plotting() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise _Exit(
            "--plot needs matplotlib: pip install 'slimcache[bench]'", USAGE_ERROR
        ) from None


async def _inspect(
    store: Store,
    thread: str,
    namespace: str,
    messages: list[dict[str, Any]] | None,
    fingerprint: str,
    *,
    wrapped: bool = False,
) -> list[RangeInfo]:
    try:
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
    except (ConfigurationError, InvalidInput) as exc:
        raise _Exit(str(exc), USAGE_ERROR) from None
    except SlimcacheError as exc:
        raise _Exit(f"{type(exc).__name__}: {exc}", RUN_ERROR) from None
    finally:
        await _close(store)


async def _clear(store: Store, thread: str, namespace: str) -> int:
    try:
        return await clear_thread(store, thread, namespace=namespace)
    except (ConfigurationError, InvalidInput) as exc:
        raise _Exit(str(exc), USAGE_ERROR) from None
    except SlimcacheError as exc:
        raise _Exit(f"{type(exc).__name__}: {exc}", RUN_ERROR) from None
    finally:
        await _close(store)


def _print_ranges(
    url: str, thread: str, ranges: list[RangeInfo], summaries: bool, *, wrapped: bool = False
) -> None:
    from rich.table import Table

    console = _stdout_console()
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
