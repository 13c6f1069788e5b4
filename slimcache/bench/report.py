"""The benchmark's outputs: the table and its notes, the JSON file and the plot.

rich and matplotlib come with the ``bench`` extra and are imported only inside the functions
that draw with them, so this module imports without the extra.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slimcache._install import pip_install
from slimcache.bench.results import BenchReport, ModeResult

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["print_report", "write_plot", "write_report_json"]


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
    # A hit on memory:// is microseconds, on a network store milliseconds, a model call seconds.
    if ms < 1:
        return f"{ms * 1000:.1f} µs"
    return f"{ms:.2f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _call_latency(mode: ModeResult) -> str:
    return "-" if mode.call_median_ms is None else _duration(mode.call_median_ms)


def _cached_mode(report: BenchReport) -> ModeResult | None:
    """The first slimcache mode that ran: its figures stand for the cache's in the notes."""
    for key in ("memory", "store", "second_pass"):
        if key in report.modes:
            return report.modes[key]
    return None


def _hit_latency(mode: ModeResult) -> str:
    if mode.hit_median_ms is None or mode.index_get_median_ms is None:
        return "-"
    return f"{_duration(mode.hit_median_ms)} / {_duration(mode.index_get_median_ms)}"


def _store_state(report: BenchReport) -> str:
    threads = len(report.thread_ids)
    if report.warm_threads == 0:
        return "cold"
    return f"warm ({report.warm_threads}/{threads} threads cached)"


def print_report(report: BenchReport, console: Console) -> None:
    """Print the benchmark table and the floor line."""
    console.print(_table(report))
    console.print("\n".join(_notes(report)), highlight=False, soft_wrap=True)


def _table(report: BenchReport) -> Table:
    """One column per mode, one row per figure."""
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
        if mode.failure is not None:
            header = f"{header}\nFAILED after {mode.replayed:,}/{mode.requests:,}"
        table.add_column(header, justify="right")

    def row(name: str, values: list[str]) -> None:
        table.add_row(name, *values)

    against_naive = "naive" in report.modes
    row(
        "summarizer calls / requests",
        [f"{m.summarizer_calls:,} / {m.summarizer_requests:,}" for m in modes],
    )
    if against_naive:
        row("  vs naive", [_ratio(report.ratio(m.key, "summarizer_calls")) for m in modes])
    row("summarizer input tokens", [_number(m.input_tokens) for m in modes])
    if against_naive:
        row("  vs naive", [_ratio(report.ratio(m.key, "input_tokens")) for m in modes])
    if any(m.request_input_tokens != m.input_tokens for m in modes):
        row("  every request, retries included", [_number(m.request_input_tokens) for m in modes])
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
    row("round trips per hit: newest / older", [_hit_round_trips(m) for m in modes])
    row("summarizer call median", [_call_latency(m) for m in modes])
    if any(m.truncated_replies or m.shorter_retries for m in modes):
        row(
            "cut replies / shorter retries / kept cut",
            [
                f"{m.truncated_replies:,} / {m.shorter_retries:,} / {m.truncated_accepted:,}"
                for m in modes
            ],
        )
    if any(m.condensed_over_budget for m in modes):
        row(
            "over budget: condensed / cut",
            [f"{m.condensed_over_budget:,} / {m.cut_over_budget:,}" for m in modes],
        )
    if any(m.summarizer_errors for m in modes):
        row("summarizer errors", [_number(m.summarizer_errors) for m in modes])
    row("wall time", [f"{m.wall_seconds:.2f} s" for m in modes])
    return table


def _notes(report: BenchReport) -> list[str]:
    """The lines under the table: the floor, and what each mode sent against it."""
    floor = report.floor_tokens
    cached = _cached_mode(report)
    naive = report.modes.get("naive")
    lines = [f"Floor: {floor:,} tokens = every message that ever left the window, counted once."]
    if cached is not None and cached.summarizer_calls == 0:
        lines.append(f"{cached.label} made no summarizer call: every summary came from the store.")
    elif cached is not None:
        extra = cached.input_tokens - cached.message_tokens
        if cached.message_tokens == floor:
            against = "exactly the floor"
        elif floor:
            # The tree strategy's merges may read a range's messages again.
            against = f"{cached.message_tokens / floor:.2f}x the floor"
        else:
            against = "no floor to compare with"
        lines.append(
            f"slimcache sent {cached.message_tokens:,} message tokens to the summarizer "
            f"({against}), plus {extra:,} tokens of prompts and previous summaries."
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
        lines.extend(_round_trips_note(second))
        lines.extend(_call_note(report, second.hit_median_ms))
    lines.append(
        "Requests count every request sent to the summarizer, retries included; cost counts "
        "the input tokens of every request, and only those."
    )
    failed = report.failed
    if failed is not None:
        lines.append(
            f"Stopped: {failed.label} failed after {failed.replayed:,} of {failed.requests:,} "
            f"requests ({failed.failure}); the figures above are what ran until then."
        )
    return lines


def _per_hit(round_trips: int, hits: int) -> str:
    return f"{round_trips / hits:.2f}" if hits else "-"


def _hit_round_trips(mode: ModeResult) -> str:
    if not mode.newest_hits and not mode.older_hits:
        return "-"
    newest = _per_hit(mode.newest_hit_round_trips, mode.newest_hits)
    return f"{newest} / {_per_hit(mode.older_hit_round_trips, mode.older_hits)}"


def _round_trips_note(mode: ModeResult) -> list[str]:
    """Store round trips per hit, on the newest history and on older ones."""
    if not mode.newest_hits and not mode.older_hits:
        return []
    return [
        f"Round trips per hit: {_per_hit(mode.newest_hit_round_trips, mode.newest_hits)} "
        f"on the newest history of a thread ({mode.newest_hits:,} hits), "
        f"{_per_hit(mode.older_hit_round_trips, mode.older_hits)} on an earlier point of it "
        f"({mode.older_hits:,} hits: the index and, unless this process read it before, "
        "the older range)."
    ]


def _call_note(report: BenchReport, hit_ms: float) -> list[str]:
    """A summarizer call beside a cache hit, when some mode timed calls."""
    timed = [m for m in report.modes.values() if m.call_median_ms is not None]
    if not timed or hit_ms <= 0:
        return []
    mode = max(timed, key=lambda m: m.call_samples)
    call_ms = mode.call_median_ms or 0.0
    ratio = call_ms / hit_ms
    shown = f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2g}x"  # an offline call is quick
    return [
        f"A summarizer call took {_duration(call_ms)} (median of {mode.call_samples:,} in "
        f"{mode.label}): {shown} a cache hit."
    ]


def write_report_json(report: BenchReport, path: str | Path) -> None:
    """Write every figure of ``report`` as JSON."""
    Path(path).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")


def _cumulative(values: Sequence[int]) -> list[int]:
    total, out = 0, []
    for value in values:
        total += value
        out.append(total)
    return out


def _tokens_label(value: float, _position: object) -> str:
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def write_plot(report: BenchReport, path: str | Path) -> None:
    """Plot cumulative summarizer input tokens, naive against slimcache, as a PNG.

    Left: request by request through the longest conversation, where re-summarizing grows
    quadratically and slimcache linearly. Right: the whole replay.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError as exc:
        from slimcache._exceptions import MissingExtraError

        raise MissingExtraError(
            f"--plot needs matplotlib ({exc}); run: {pip_install('bench')}"
        ) from None

    counts = report.requests_per_conversation
    longest = max(range(len(counts)), key=lambda i: counts[i])
    begin = sum(counts[:longest])
    span = slice(begin, begin + counts[longest])
    cached = _cached_mode(report)
    shown = [k for k in ("naive", cached.key if cached else None) if k in report.modes]
    styles = {"naive": ("#d62728", "naive: re-summarize every request")}

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for key in shown:
        mode = report.modes[key]
        colour, label = styles.get(key, ("#1f77b4", f"{mode.label}: cached, incremental"))
        per_conversation = mode.per_request_input_tokens[span]
        left.plot(
            range(1, len(per_conversation) + 1),
            _cumulative(per_conversation),
            color=colour,
            label=label,
            linewidth=2,
        )
        right.plot(
            range(1, len(mode.per_request_input_tokens) + 1),
            _cumulative(mode.per_request_input_tokens),
            color=colour,
            label=label,
            linewidth=2,
        )
    left.set_title(f"Longest conversation ({counts[longest]} requests): quadratic vs linear")
    left.set_xlabel("request (each user turn, full history sent)")
    left.set_ylabel("cumulative summarizer input tokens")
    right.set_title(f"All {len(report.conversations)} conversations, in replay order")
    right.set_xlabel("request number across the replay")
    for axes in (left, right):
        axes.yaxis.set_major_formatter(FuncFormatter(_tokens_label))
        axes.grid(alpha=0.3)
        axes.legend(loc="upper left")
    figure.suptitle(
        f"slimcache bench: summarizer input tokens, {report.dataset}, "
        f"window {report.settings.keep}-{report.settings.threshold} messages"
    )
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)
