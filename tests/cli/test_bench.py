"""``slimcache bench``: its errors and exit codes, and runs on every data set format."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from slimcache._install import pip_install
from tests.cli.support import SMALL, conversation, flat, invoke, sqlite_url
from tests.servers.llm_server import (
    ANTHROPIC_PATH,
    MODELS_PATH,
    OPENAI_PATH,
    LLMServer,
    system_text,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--conversations", "0"], "'--conversations' / '-n': Input should be greater than"),
        (["-n", "x"], "unable to parse string as an integer"),
        (
            ["--summarizer", "gpt"],
            "summarizer must be 'offline', 'openai:MODEL' or 'anthropic:MODEL'",
        ),
        (["--modes", "naive,fast"], "--modes: unknown mode 'fast'"),
        (["--modes", " , "], "choose at least one mode"),
        (["--timeout", "0"], "'--timeout': Input should be greater than or equal to 0.001"),
        (["--max-retries", "-1"], "'--max-retries': Input should be greater than or equal to 0"),
        (["--keep", "20", "--threshold", "20"], "keep (20) must be below threshold (20)"),
        (["--strategy", "custom"], "strategy must be one of"),
        (["--store", "nosuch://x"], "unknown store URL scheme 'nosuch'"),
        (["--store", "sqlite:///x.db"], "use sqlite+aiosqlite:// instead"),
        (["--dataset", "missing.json"], "dataset file not found"),
        (["--dataset", "chats.txt"], "dataset must be 'chitchat' or a .json / .jsonl file"),
        (["--price-per-mtok", "-1"], "--price-per-mtok"),
        (["--json", "/nonexistent/dir/out.json"], "--json: no such directory: /nonexistent/dir"),
        (["--on-truncated", "keep"], "on_truncated must be 'raise' or 'accept', got 'keep'"),
        (["--on-over-budget", "keep"], "on_over_budget must be 'cut' or 'raise', got 'keep'"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], message: str) -> None:
    result = invoke("bench", "--store", "memory://", *args)
    assert result.exit_code == 2, result.output
    assert message in flat(result.stderr)


def test_missing_openai_key_fails_before_anything(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    result = invoke(
        "bench",
        "--store",
        sqlite_url(db),
        "--summarizer",
        "openai:gpt-4o-mini",
        env={"OPENAI_API_KEY": None},
    )
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr
    assert not db.exists()


def test_dead_openai_endpoint_fails_fast(data_json: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = invoke(
        "bench",
        "--store",
        "memory://",
        "--dataset",
        str(data_json),
        "--summarizer",
        "openai:tiny",
        "--max-retries",
        "0",
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"},
    )
    assert result.exit_code == 2
    assert "summarizer endpoint is not usable" in result.stderr
    assert f"127.0.0.1:{port}/v1/models did not answer" in flat(result.stderr)


def test_missing_sdk_names_the_pip_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    db = tmp_path / "never.db"
    result = invoke(
        "bench",
        "--store",
        sqlite_url(db),
        "--summarizer",
        "openai:tiny",
        env={"OPENAI_API_KEY": "k"},
    )
    assert result.exit_code == 2
    assert f"needs the openai package: {pip_install('bench,openai')}" in flat(result.stderr)
    assert not db.exists()


def test_invalid_message_names_file_conversation_and_index(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    rows = [conversation(4, "a"), [{"role": "user", "content": "hi"}, {"role": "robot"}]]
    bad.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    result = invoke("bench", "--store", "memory://", "--dataset", str(bad))
    assert result.exit_code == 2
    assert "bad.jsonl: conversation 1, messages[1]: unknown role 'robot'" in result.stderr


def test_too_few_long_conversations(data_json: Path) -> None:
    result = invoke(
        "bench", "--store", "memory://", "--dataset", str(data_json), "--min-messages", "500"
    )
    assert result.exit_code == 2
    assert "lower --min-messages" in result.stderr


# ---------------------------------------------------------------- bench


def test_bench_json_dataset_on_memory(data_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = invoke(
        "bench", "--store", "memory://", "--dataset", str(data_json), "--json", str(out), *SMALL
    )
    assert result.exit_code == 0, result.stderr
    # stderr is not a terminal here: each mode says when it starts and ends, not silent.
    for mode in ("naive", "memory", "store"):
        assert re.search(rf"{mode}\b.*: 0/\d+ requests replayed", result.stderr), result.stderr
    assert re.search(r": (\d+)/\1 requests replayed", result.stderr), result.stderr
    assert "(no cache)" in result.stdout
    assert "summarizer calls" in result.stdout
    assert "Floor:" in result.stdout
    assert "exactly the floor" in result.stdout
    figures = json.loads(out.read_text())
    modes = figures["modes"]
    assert figures["conversations"] == 2
    assert figures["settings"]["dataset"] == "chats.json"
    assert figures["settings"]["min_messages"] == 0
    assert [t["conversation"] for t in figures["threads"]] == ["0", "b"]
    assert modes["naive"]["summarizer_calls"] > modes["memory"]["summarizer_calls"] > 0
    assert modes["memory"]["summarizer_calls"] == modes["store"]["summarizer_calls"]
    assert modes["memory"]["message_tokens"] == figures["floor_tokens"]
    assert modes["store"]["message_tokens"] == figures["floor_tokens"]
    assert modes["naive"]["message_tokens"] > 2 * figures["floor_tokens"]
    assert modes["second_pass"]["cache_hits"] > 0
    assert modes["store"]["cost_usd"] == pytest.approx(modes["store"]["input_tokens"] * 0.15e-6)


def test_bench_jsonl_on_sqlite_twice_with_plot(data_jsonl: Path, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "bench.db")
    plot, first_json, second_json = tmp_path / "b.png", tmp_path / "1.json", tmp_path / "2.json"
    first = invoke(
        "bench",
        "--store",
        url,
        "--dataset",
        str(data_jsonl),
        "-n",
        "2",
        "--seed",
        "3",
        "--json",
        str(first_json),
        "--plot",
        str(plot),
        "--price-per-mtok",
        "1",
        *SMALL,
    )
    assert first.exit_code == 0, first.stderr
    assert "cold" in first.stdout
    assert plot.read_bytes().startswith(PNG_SIGNATURE)
    figures = json.loads(first_json.read_text())
    assert figures["conversations"] == 2
    assert figures["store_warm_threads"] == 0
    store = figures["modes"]["store"]
    assert store["latency_median_ms"] is not None
    assert store["store_round_trips"] > 0
    assert store["cost_usd"] == pytest.approx(store["input_tokens"] / 1e6)

    second = invoke(
        "bench",
        "--store",
        url,
        "--dataset",
        str(data_jsonl),
        "-n",
        "2",
        "--seed",
        "3",
        "--json",
        str(second_json),
        *SMALL,
    )
    assert second.exit_code == 0, second.stderr
    assert "warm (2/2 threads cached) before this run" in flat(second.stdout)
    again = json.loads(second_json.read_text())
    assert again["threads"] == figures["threads"]
    assert again["store_warm_threads"] == 2
    assert again["modes"]["store"]["cache_hits"] > 0
    for run, output in ((figures, first.stdout), (again, second.stdout)):
        hits = run["modes"]["second_pass"]
        assert hits["hit_samples"] == hits["cache_hits"] > 0
        assert hits["hit_median_ms"] > 0
        assert hits["index_get_median_ms"] > 0
        assert "cache hit / store.get median" in output
        assert "A cache hit took " in flat(output)
        assert "one plain store.get of the thread's index" in flat(output)


def test_bench_on_chitchat(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    result = invoke("bench", "--store", "memory://", "-n", "2", "--json", str(out))
    assert result.exit_code == 0, result.stderr
    figures = json.loads(out.read_text())
    assert figures["settings"]["dataset"] == "chitchat"
    assert figures["settings"]["min_messages"] == 40
    assert figures["messages"] >= 2 * 41
    assert (
        figures["modes"]["naive"]["summarizer_calls"]
        > figures["modes"]["memory"]["summarizer_calls"]
    )


# ---------------------------------------------------------------- bench on a real client


def openai_env(server: LLMServer) -> dict[str, str | None]:
    return {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.openai_base_url}


def test_bench_openai_runs_the_chosen_modes_through_the_sdk(
    llm_server: LLMServer, data_json: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    result = invoke(
        "bench",
        "--store",
        sqlite_url(tmp_path / "bench.db"),
        "--dataset",
        str(data_json),
        "--summarizer",
        "openai:tiny",
        "--modes",
        "slimcache,second-pass",
        "--json",
        str(out),
        *SMALL,
        env=openai_env(llm_server),
    )
    assert result.exit_code == 0, result.stderr
    figures = json.loads(out.read_text())
    assert list(figures["modes"]) == ["store", "second_pass"]
    assert figures["settings"]["modes"] == ["store", "second_pass"]
    assert figures["settings"]["summarizer"] == "openai:tiny"
    store, second = figures["modes"]["store"], figures["modes"]["second_pass"]
    assert second["summarizer_calls"] == 0
    assert second["cache_hits"] > 0
    # The endpoint check first, then one request per summarizer call, each with the budget.
    first = llm_server.requests[0]
    assert (first.method, first.path.partition("?")[0]) == ("GET", MODELS_PATH)
    bodies = llm_server.bodies(OPENAI_PATH)
    assert len(bodies) == store["summarizer_calls"] > 0
    assert {b["max_tokens"] for b in bodies} == {60}
    assert {b["temperature"] for b in bodies} == {0.0}
    assert all(r.headers["x-stainless-lang"] == "python" for r in llm_server.requests)
    assert store["call_samples"] == store["summarizer_calls"]
    assert "(no cache)" not in result.stdout
    assert "summarizer call median" in result.stdout
    assert "A summarizer call took " in flat(result.stdout)


def test_bench_anthropic_sends_the_budget(llm_server: LLMServer, data_json: Path) -> None:
    result = invoke(
        "bench",
        "--store",
        "memory://",
        "--dataset",
        str(data_json),
        "--summarizer",
        "anthropic:claude-tiny",
        "--modes",
        "store",
        "--temperature",
        "0.3",
        *SMALL,
        env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": llm_server.anthropic_base_url},
    )
    assert result.exit_code == 0, result.stderr
    bodies = llm_server.bodies(ANTHROPIC_PATH)
    assert bodies
    assert {(b["max_tokens"], b["temperature"]) for b in bodies} == {(60, 0.3)}
    assert "anthropic:claude-tiny" in result.stdout


LONG = "A rambling summary that goes on and on. " * 30


def shorter_when_asked(path: str, body: dict[str, Any]) -> str:
    return "Short." if "Write a shorter one" in system_text(path, body) else LONG


def test_bench_counts_cut_replies_and_keeps_going_on_one_cut_twice(
    llm_server: LLMServer, data_json: Path, tmp_path: Path
) -> None:
    llm_server.text = shorter_when_asked
    args = ["bench", "--store", "memory://", "--dataset", str(data_json)]
    args += ["--summarizer", "openai:tiny", "--modes", "memory", *SMALL]
    retried = invoke(*args, env=openai_env(llm_server))
    assert retried.exit_code == 0, retried.stderr
    assert "cut replies / shorter retries / kept cut" in retried.stdout
    calls = len(llm_server.bodies(OPENAI_PATH))
    assert calls % 2 == 0  # every call was cut once, then answered shorter
    assert f"{calls // 2:,} / {calls // 2:,} / 0" in retried.stdout
    # Every request the server received is counted, and the cost is of all their tokens.
    [row] = [line for line in retried.stdout.splitlines() if "summarizer calls / requests" in line]
    assert f"{calls // 2:,} / {calls:,}" in row
    assert "every request, retries included" in retried.stdout

    # A model that is cut every time: by default the cut summaries are kept and counted.
    llm_server.text = lambda path, body: LONG
    out = tmp_path / "cut.json"
    kept = invoke(*args, "--json", str(out), env=openai_env(llm_server))
    assert kept.exit_code == 0, kept.stderr
    memory = json.loads(out.read_text())["modes"]["memory"]
    assert memory["summarizer_calls"] > 0
    assert memory["summarizer_requests"] == len(llm_server.bodies(OPENAI_PATH)) - calls
    assert memory["summarizer_requests"] == 2 * memory["summarizer_calls"]
    assert memory["request_input_tokens"] == 2 * memory["input_tokens"]
    assert memory["truncated_accepted"] == memory["summarizer_calls"]
    assert memory["truncated_replies"] == memory["shorter_retries"] * 2 > 0
    assert (memory["replayed"], memory["failure"]) == (memory["requests"], None)


def test_a_failed_mode_is_named_and_what_ran_is_written(
    llm_server: LLMServer, data_json: Path, tmp_path: Path
) -> None:
    llm_server.text = lambda path, body: LONG
    out = tmp_path / "partial.json"
    failed = invoke(
        "bench",
        "--store",
        "memory://",
        "--dataset",
        str(data_json),
        "--summarizer",
        "openai:tiny",
        "--modes",
        "memory,slimcache,second-pass",
        "--on-truncated",
        "raise",
        "--json",
        str(out),
        *SMALL,
        env=openai_env(llm_server),
    )
    assert failed.exit_code == 1
    assert "mode slimcache (no store) failed: SummarizerError" in flat(failed.stderr)
    assert "cut at the budget of 60 tokens" in flat(failed.stderr)
    assert f"wrote {out}" in failed.stderr
    figures = json.loads(out.read_text())
    assert figures["failed_mode"] == "memory"
    assert list(figures["modes"]) == ["memory"]  # the modes after it did not run
    memory = figures["modes"]["memory"]
    assert memory["failure"].startswith("SummarizerError: summarizer failed on messages")
    assert "openai:tiny: the summary was cut" in memory["failure"]
    assert memory["summarizer_calls"] == memory["summarizer_errors"] == 1
    assert memory["replayed"] < memory["requests"]
    assert "FAILED after" in flat(failed.stdout)
    assert "Stopped: slimcache (no store) failed after" in flat(failed.stdout)


def test_bench_keeps_going_when_the_model_overshoots_every_time(
    llm_server: LLMServer, data_json: Path, tmp_path: Path
) -> None:
    # A server that ignores max_tokens (llama.cpp's do with max_completion_tokens) and a
    # model that writes five times the budget, condense included: each summary is cut.
    llm_server.bounds_reply = False
    llm_server.text = lambda path, body: "The trip goes on. " * 70  # 315 tokens against 60
    args = ["bench", "--store", "memory://", "--dataset", str(data_json)]
    args += ["--summarizer", "openai:tiny", "--modes", "memory", *SMALL]
    out = tmp_path / "cut.json"
    kept = invoke(*args, "--json", str(out), env=openai_env(llm_server))
    assert kept.exit_code == 0, kept.stderr
    memory = json.loads(out.read_text())["modes"]["memory"]
    assert memory["cut_over_budget"] == memory["condensed_over_budget"] > 0
    assert memory["summarizer_calls"] == 2 * memory["cut_over_budget"]
    assert memory["summarizer_errors"] == 0
    assert "over budget: condensed / cut" in kept.stdout

    raised = invoke(*args, "--on-over-budget", "raise", env=openai_env(llm_server))
    assert raised.exit_code == 1
    assert "mode slimcache (no store) failed: SummarizerError" in flat(raised.stderr)
    assert "when asked to condense it" in flat(raised.stderr)


@pytest.mark.parametrize(("every", "lines"), [(0.0, 5), (3600.0, 2)])
def test_progress_off_a_terminal_is_a_line_per_interval(
    capsys: pytest.CaptureFixture[str], every: float, lines: int
) -> None:
    from slimcache.cli.bench import _RichProgress

    progress = _RichProgress(every=every)
    progress.start("store", 4)
    for _ in range(4):
        progress.advance()
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == lines, printed
    assert printed[0].startswith("store: 0/4 requests replayed")
    assert printed[-1].startswith("store: 4/4 requests replayed")
