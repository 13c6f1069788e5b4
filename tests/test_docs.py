"""The README and the docs site: every code block runs, every link resolves, the site builds.

A ```python block is either a snippet include of a file under ``examples/`` that a test runs, or
it is run here as a script.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
INCLUDE = re.compile(r'--8<-- "(examples/[\w-]+\.py)"\n')
MAX_README_LINES = 300


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def label(page: Path) -> str:
    return str(page.relative_to(ROOT))


def included_and_run() -> list[tuple[str, str]]:
    return [
        (label(page), block)
        for page in PAGES
        for block in python_blocks(page.read_text())
        if INCLUDE.fullmatch(block)
    ]


def executed() -> list[tuple[str, int, str]]:
    return [
        (label(page), number, block)
        for page in PAGES
        for number, block in enumerate(python_blocks(page.read_text()))
        if not INCLUDE.fullmatch(block)
    ]


def test_every_example_is_included_by_a_page() -> None:
    matches = [INCLUDE.fullmatch(block) for _, block in included_and_run()]
    included = {match.group(1) for match in matches if match}
    examples = {f"examples/{path.name}" for path in (ROOT / "examples").glob("*.py")}
    assert included == examples
    assert len(executed()) >= 4


@pytest.mark.parametrize(("page", "block"), included_and_run())
def test_an_included_example_exists_and_a_test_runs_it(page: str, block: str) -> None:
    match = INCLUDE.fullmatch(block)
    assert match is not None
    path = match.group(1)
    assert (ROOT / path).is_file(), f"{page} includes {path}, which does not exist"
    name = Path(path).name
    runners = [
        test
        # The core's tests, and each adapter's beside its distribution.
        for test in [*(ROOT / "tests").rglob("test_*.py"), *ROOT.glob("adapters/*/tests/test_*.py")]
        if f'ROOT / "examples" / "{name}"' in (text := test.read_text())
        and "subprocess.run(" in text
        and test.name != Path(__file__).name
    ]
    assert runners, f"no test runs {path}, included by {page}"


@pytest.mark.parametrize(
    ("page", "number", "block"),
    executed(),
    ids=[f"{page}:{number}" for page, number, _ in executed()],
)
def test_a_python_block_runs(page: str, number: int, block: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block)
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, f"{page} block {number}:\n{result.stderr}"


def test_the_readme_is_at_most_300_lines() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, len(lines)


def test_no_page_holds_a_merge_conflict_marker() -> None:
    marker = re.compile(r"^(<{7} |={7}$|>{7} )", flags=re.M)
    marked = [label(page) for page in PAGES if marker.search(page.read_text())]
    assert marked == []


def test_every_relative_link_in_the_readme_exists() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'src="([^"]+)"', text)
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and t[0] != "#"]
    assert relative
    missing = [t for t in relative if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, missing


def test_snippet_includes_resolve_from_the_root_and_fail_when_missing() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "pymdownx.snippets:" in config
    assert 'base_path: ["."]' in config
    assert "check_paths: true" in config


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "layers" / "index.html").is_file()
