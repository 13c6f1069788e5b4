"""The ``slimcache`` entry points: ``python -m slimcache``."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from slimcache import __version__
from slimcache._install import pip_install
from slimcache.cli.common import DEFAULT_STORE_URL
from tests.cli.support import invoke


def test_python_m_slimcache(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slimcache", "bench", "--summarizer", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "summarizer must be 'offline', 'openai:MODEL' or 'anthropic:MODEL'" in done.stderr


def test_version_is_the_installed_distributions(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slimcache", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"slimcache {importlib.metadata.version('slimcache')}\n"
    assert done.stderr == ""


def test_version_from_a_source_tree_says_it_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    done = invoke("--version")
    assert done.exit_code == 0
    assert done.stdout == f"slimcache {__version__} (not installed)\n"


_WITHOUT = """
import sys

class Without:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None

sys.meta_path.insert(0, Without())
from slimcache.cli import main
main(sys.argv[1:])
"""


def _run_without(blocked: set[str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``slimcache *args`` in a process where the ``blocked`` packages cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(blocked=sorted(blocked)), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )


BENCH_ONLY = {"matplotlib", "chitchat_dataset", "slimcache_sql", "aiosqlite", "sqlalchemy"}


def test_the_store_tools_need_only_the_cli_extra(tmp_path: Path) -> None:
    for args in (["--help"], ["inspect", "--help"], ["clear", "--help"], ["bench", "--help"]):
        done = _run_without(BENCH_ONLY, *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "Usage: slimcache" in done.stdout
    done = _run_without(BENCH_ONLY, "inspect", "memory://", "--thread", "t-1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no cached summaries for thread 't-1' in memory://" in done.stdout
    done = _run_without(BENCH_ONLY, "clear", "memory://", "--thread", "t-1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_without_typer_each_command_names_the_extra_it_needs(tmp_path: Path) -> None:
    done = _run_without({"typer", "rich"}, "inspect", "memory://", "--thread", "t", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == f"the slimcache command needs its extra: {pip_install('cli')}"
    done = _run_without({"typer", "rich"}, "bench", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == f"slimcache bench needs its extra: {pip_install('bench')}"


def test_version_needs_no_extra(tmp_path: Path) -> None:
    done = _run_without({"typer", "rich"}, "--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"slimcache {importlib.metadata.version('slimcache')}\n"


@pytest.mark.parametrize("command", [[], ["bench"], ["inspect"], ["clear"]])
def test_help_names_each_options_value_and_cuts_no_default(command: list[str]) -> None:
    done = invoke(*command, "--help", env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    options = done.output.split("Options:")[1]
    assert "<bool>" not in options
    assert "<str>" not in options
    assert "<int" not in options
    if command == ["bench"]:
        # Wrapped over lines maybe, but whole.
        assert f"[default:{DEFAULT_STORE_URL}]" in "".join(options.split())
        assert "--store URL" in options
        assert "-n, --conversations N" in options
