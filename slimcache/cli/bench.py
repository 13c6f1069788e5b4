"""``slimcache bench``: replay conversations with and without the cache, print what it saved.

Imported by :func:`slimcache.cli.app.build_app` only, as it needs typer and rich (the ``bench``
extra) at import time.
"""

# No ``from __future__ import annotations`` here: typer reads the command's annotations at
# run time.

import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from slimcache._exceptions import ConfigurationError, InvalidInput, SlimcacheError
from slimcache._install import pip_install
from slimcache.bench.datasets import (
    CHITCHAT,
    BenchConversation,
    Dataset,
    load_dataset,
    select_conversations,
)
from slimcache.bench.engine import MODES, check_modes, run_bench
from slimcache.bench.report import print_report, write_plot, write_report_json
from slimcache.bench.results import (
    BENCH_DEFAULTS,
    DEFAULT_PRICE_PER_MTOK,
    BenchReport,
    BenchSettings,
)
from slimcache.cli.common import (
    DEFAULT_STORE_URL,
    RUN_ERROR,
    USAGE_ERROR,
    CommandError,
    close_store,
    fail,
    open_url,
    stderr_console,
    stdout_console,
)
from slimcache.cli.summarizers import (
    BenchModelSummarizer,
    ModelOptions,
    check_endpoint,
    close_summarizer,
    make_summarizer,
)
from slimcache.core.strategies import StrategyName
from slimcache.core.summarizer import OnOverBudget
from slimcache.core.truncation import check_on_truncated
from slimcache.llm import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from slimcache.stores.protocol import Store

__all__ = ["DEFAULT_MIN_MESSAGES", "DEFAULT_MODES", "bench", "parse_modes", "register"]

DEFAULT_MIN_MESSAGES = 40
"""Shortest chitchat conversation replayed by default: shorter ones barely leave the window."""

# On the command line the modes are spelt with hyphens; "slimcache" is the cached replay on the
# chosen store, the one mode to keep beside the second pass when every call costs.
_MODE_NAMES = {mode.replace("_", "-"): mode for mode in MODES} | {"slimcache": "store"}
DEFAULT_MODES = ",".join(mode.replace("_", "-") for mode in MODES)
"""Every mode, as ``--modes`` spells them."""

# The options, in the order ``--help`` lists them.
StoreOption = Annotated[
    str,
    typer.Option(metavar="URL", help="Store URL for the store modes (memory://, redis://, ...)."),
]
ConversationsOption = Annotated[
    int, typer.Option("--conversations", "-n", min=1, metavar="N", help="Conversations to replay.")
]
DatasetOption = Annotated[
    str,
    typer.Option(
        metavar="NAME|FILE", help="'chitchat', or your own OpenAI-format .json / .jsonl file."
    ),
]
SummarizerOption = Annotated[
    str,
    typer.Option(
        metavar="SUMMARIZER",
        help="'offline' (deterministic, no network), 'openai:MODEL' (any OpenAI-compatible "
        "server: OPENAI_API_KEY, optional OPENAI_BASE_URL) or 'anthropic:MODEL' "
        "(ANTHROPIC_API_KEY, optional ANTHROPIC_BASE_URL).",
    ),
]
ModesOption = Annotated[
    str,
    typer.Option(
        metavar="MODES",
        help="Modes to run, comma-separated: naive, memory, store (or slimcache), second-pass. "
        "With a real model, 'slimcache,second-pass' skips the calls of the other two.",
    ),
]
TemperatureOption = Annotated[
    float, typer.Option(metavar="T", help="Temperature of a real model (openai:/anthropic:).")
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        min=0.001, metavar="SECONDS", help="Seconds one request to a real model may take."
    ),
]
MaxRetriesOption = Annotated[
    int,
    typer.Option(
        min=0, metavar="N", help="Retries of a failed request to a real model (429, 5xx, timeouts)."
    ),
]
OnTruncatedOption = Annotated[
    str,
    typer.Option(
        metavar="accept|raise",
        help="A reply of a real model cut at --summary-tokens even when asked for a shorter "
        "one: 'accept' keeps it (counted in the table), 'raise' stops the mode there.",
    ),
]
OnOverBudgetOption = Annotated[
    str,
    typer.Option(
        metavar="cut|raise",
        help="A summary still over --summary-tokens after the condense call: 'cut' keeps it "
        "cut to the budget (counted in the table), 'raise' stops the mode there.",
    ),
]
PriceOption = Annotated[
    float,
    typer.Option(min=0.0, metavar="DOLLARS", help="Dollars per million summarizer input tokens."),
]
JsonOption = Annotated[
    Path | None,
    typer.Option("--json", metavar="FILE", help="Write every figure to this JSON file."),
]
PlotOption = Annotated[
    Path | None,
    typer.Option(metavar="FILE", help="Write a PNG of cumulative summarizer input tokens."),
]
ThresholdOption = Annotated[
    int, typer.Option(min=1, metavar="N", help="Summarize when the window holds more messages.")
]
KeepOption = Annotated[
    int, typer.Option(min=1, metavar="N", help="Messages kept verbatim after summarizing.")
]
StrategyOption = Annotated[
    str, typer.Option(metavar="NAME", help="extend, concat, hybrid or replace.")
]
SummaryTokensOption = Annotated[
    int, typer.Option(min=1, metavar="N", help="Token budget of a summary.")
]
CheckpointsOption = Annotated[
    int, typer.Option(min=1, metavar="N", help="Ranges listed per thread.")
]
MinMessagesOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        metavar="N",
        help=f"Only conversations with at least this many messages "
        f"(default: {DEFAULT_MIN_MESSAGES} for chitchat, 0 for a file).",
        show_default=False,
    ),
]
SeedOption = Annotated[
    int, typer.Option(metavar="N", help="Which conversations are sampled when more are eligible.")
]


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to ``app``."""
    app.command()(bench)


def bench(
    store: StoreOption = DEFAULT_STORE_URL,
    conversations: ConversationsOption = 50,
    dataset: DatasetOption = CHITCHAT,
    summarizer: SummarizerOption = "offline",
    modes: ModesOption = DEFAULT_MODES,
    price_per_mtok: PriceOption = DEFAULT_PRICE_PER_MTOK,
    json_out: JsonOption = None,
    plot: PlotOption = None,
    threshold: ThresholdOption = BENCH_DEFAULTS.threshold,
    keep: KeepOption = BENCH_DEFAULTS.keep,
    strategy: StrategyOption = BENCH_DEFAULTS.strategy,
    summary_tokens: SummaryTokensOption = BENCH_DEFAULTS.summary_tokens,
    checkpoints: CheckpointsOption = BENCH_DEFAULTS.checkpoints,
    min_messages: MinMessagesOption = None,
    seed: SeedOption = 0,
    temperature: TemperatureOption = 0.0,
    timeout: TimeoutOption = DEFAULT_TIMEOUT,
    max_retries: MaxRetriesOption = DEFAULT_MAX_RETRIES,
    on_truncated: OnTruncatedOption = "accept",
    on_over_budget: OnOverBudgetOption = BENCH_DEFAULTS.on_over_budget,
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
                on_over_budget=cast("OnOverBudget", on_over_budget),  # checked there
            )
            chosen_modes = parse_modes(modes)
            # A missing key or SDK fails here, before the dataset or the store is touched.
            options = ModelOptions(
                temperature, timeout, max_retries, check_on_truncated(on_truncated)
            )
            chosen_summarizer = make_summarizer(summarizer, options)
        except ConfigurationError as exc:
            raise CommandError(str(exc), USAGE_ERROR) from None
        _check_outputs(json_out, plot)
        handle = open_url(store)
        choice = _Choice(dataset, conversations, min_messages, seed, chosen_modes)
        report = asyncio.run(_bench(handle, store, choice, chosen_summarizer, settings))
    except CommandError as error:
        fail(error)
    print_report(report, stdout_console())
    _write_outputs(report, json_out, plot)
    failed = report.failed
    if failed is not None:  # what ran until then is printed and written above
        fail(CommandError(f"mode {failed.label} failed: {failed.failure}", RUN_ERROR))


def parse_modes(spec: str) -> tuple[str, ...]:
    """The engine's modes a ``--modes`` value names, in the order they run.

    Raises:
        ConfigurationError: An unknown name, or none.
    """
    names = [name.strip().lower() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in _MODE_NAMES]
    if unknown:
        raise ConfigurationError(
            f"--modes: unknown mode {', '.join(map(repr, unknown))}; "
            "choose among naive, memory, store (or slimcache), second-pass"
        )
    return check_modes(_MODE_NAMES[name] for name in names)


def _check_outputs(json_out: Path | None, plot: Path | None) -> None:
    """Fail before the replay when an output cannot be written."""
    for option, target in (("--json", json_out), ("--plot", plot)):
        if target is not None and not target.parent.is_dir():
            raise CommandError(f"{option}: no such directory: {target.parent}", USAGE_ERROR)
    if plot is not None:
        _check_plotting()


def _check_plotting() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CommandError(
            f"--plot needs matplotlib: {pip_install('bench')}", USAGE_ERROR
        ) from None


def _write_outputs(report: BenchReport, json_out: Path | None, plot: Path | None) -> None:
    if json_out is not None:
        write_report_json(report, json_out)
        print(f"wrote {json_out}", file=sys.stderr)
    if plot is not None:
        write_plot(report, plot)
        print(f"wrote {plot}", file=sys.stderr)


# Seconds between the progress lines printed when stderr is not a terminal.
LOG_EVERY = 10.0


class _RichProgress:
    """Progress on stderr, one task per mode: a rich progress bar on a terminal; elsewhere (a
    log file, a CI job) a line when a mode starts, at least every :data:`LOG_EVERY` seconds
    while it runs, and when it ends, so that a long run is never silent."""

    def __init__(self, every: float = LOG_EVERY) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        console = stderr_console()
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
        self.lines = not console.is_terminal
        self.every = every
        self.label, self.total, self.done = "", 0, 0
        self.started = self.printed = 0.0

    def start(self, label: str, total: int) -> None:
        self.task = self.progress.add_task(label, total=total)
        self.label, self.total, self.done = label, total, 0
        self.started = self.printed = time.monotonic()
        self._line()

    def advance(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)
        self.done += 1
        if self.done == self.total or time.monotonic() - self.printed >= self.every:
            self._line()

    def _line(self) -> None:
        if not self.lines:
            return
        self.printed = time.monotonic()
        elapsed = self.printed - self.started
        print(
            f"{self.label}: {self.done}/{self.total} requests replayed, {elapsed:.0f} s",
            file=sys.stderr,
            flush=True,
        )


@dataclass(frozen=True)
class _Choice:
    """What to replay: the data set, how many conversations, and the modes."""

    dataset: str
    conversations: int
    min_messages: int | None
    seed: int
    modes: tuple[str, ...]


async def _choose(
    choice: _Choice, summarizer: BenchModelSummarizer
) -> tuple[Dataset, list[BenchConversation], int]:
    """Load the dataset, pick the conversations and check the summarizer's endpoint.

    Returns:
        The dataset, the conversations picked, and the ``min_messages`` applied.
    """
    dataset = load_dataset(choice.dataset)
    min_messages = choice.min_messages
    if min_messages is None:
        min_messages = DEFAULT_MIN_MESSAGES if choice.dataset == CHITCHAT else 0
    chosen = select_conversations(
        dataset.conversations,
        count=choice.conversations,
        min_messages=min_messages,
        seed=choice.seed,
    )
    try:
        await check_endpoint(summarizer)
    except SlimcacheError as exc:
        raise CommandError(f"the summarizer endpoint is not usable: {exc}", USAGE_ERROR) from None
    return dataset, chosen, min_messages


async def _bench(
    store: Store,
    store_url: str,
    choice: _Choice,
    summarizer: BenchModelSummarizer,
    settings: BenchSettings,
) -> BenchReport:
    try:
        return await _replay(store, store_url, choice, summarizer, settings)
    finally:
        await close_summarizer(summarizer)
        await close_store(store)


async def _replay(
    store: Store,
    store_url: str,
    choice: _Choice,
    summarizer: BenchModelSummarizer,
    settings: BenchSettings,
) -> BenchReport:
    try:
        dataset, chosen, min_messages = await _choose(choice, summarizer)
    except (ConfigurationError, InvalidInput) as exc:
        raise CommandError(str(exc), USAGE_ERROR) from None
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
                modes=choice.modes,
                extra={
                    "dataset_digest": dataset.digest,
                    "conversations_requested": choice.conversations,
                    "min_messages": min_messages,
                    "seed": choice.seed,
                    "modes": list(choice.modes),
                },
            )
    except SlimcacheError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}", RUN_ERROR) from None
