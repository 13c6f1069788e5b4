"""The README and the docs site: every code block runs, every link resolves, the site builds.

A ```python block is either a snippet include of a file under ``examples/`` that a test runs, or
it is run here as a script.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.docs_readme import include, relink, section

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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built once in strict mode, as CI builds it."""
    site_dir = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return site_dir


@pytest.mark.site
def test_the_site_builds_in_strict_mode(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "layers" / "index.html").is_file()


def site_texts(site: Path) -> dict[str, str]:
    """Every page of the built site and its search index, by path."""
    files = [*site.rglob("*.html"), site / "search" / "search_index.json"]
    return {str(path.relative_to(site)): path.read_text() for path in files}


@pytest.mark.site
def test_the_site_shows_no_sphinx_role(site: Path) -> None:
    role = re.compile(r":(?:py:)?(?:class|meth|func|mod|data|attr|exc|obj):")
    shown = {path: role.findall(text) for path, text in site_texts(site).items()}
    assert {path: found for path, found in shown.items() if found} == {}


@pytest.mark.site
def test_the_docstrings_roles_are_links_to_their_entries(site: Path) -> None:
    page = (site / "reference" / "slimcache" / "index.html").read_text()
    # :class:`Concat` in SummarizeCompressor's docstring, :meth:`load_all` in
    # ConversationWindowMemory's (a method of its private base class).
    for anchor in ("slimcache.Concat", "slimcache.ConversationWindowMemory.load_all"):
        assert f'href="#{anchor}"' in page
        assert f'id="{anchor}"' in page
    stores = (site / "reference" / "stores" / "index.html").read_text()
    assert 'href="#slimcache.stores.SupportsBatch"' in stores


@pytest.mark.site
def test_the_reference_documents_no_module_getattr_or_dir(site: Path) -> None:
    hook = re.compile(r"\.__(?:getattr|dir)__\b")
    anchors = {
        path: [a for a in re.findall(r'id="([^"]+)"', text) if hook.search(a)]
        for path, text in site_texts(site).items()
    }
    assert {path: found for path, found in anchors.items() if found} == {}
    index = json.loads((site / "search" / "search_index.json").read_text())
    assert [doc["location"] for doc in index["docs"] if hook.search(doc["location"])] == []


def test_the_front_door_table_is_written_once_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    body = section("front-doors", readme)
    assert body.startswith("| I want to... | use | guide |")
    assert "`TokenWindowMemory`" in body
    index = (ROOT / "docs" / "index.md").read_text()
    assert '\n--8<-- "README.md:front-doors"\n' in index
    copies = [label(page) for page in PAGES if "| I want to... |" in page.read_text()]
    assert copies == ["README.md"]


@pytest.mark.site
def test_the_site_shows_the_readmes_front_door_table_linking_its_own_pages(site: Path) -> None:
    body = section("front-doors", (ROOT / "README.md").read_text())
    targets = re.findall(r"\]\(docs/([^)#]+)\.md(#[^)]*)?\)", body)
    assert len(targets) == len(body.splitlines()) - 2  # one guide per row
    page = (site / "index.html").read_text()
    for path, fragment in targets:
        assert f'href="{path}/{fragment}"' in page
    assert 'href="docs/' not in page


def test_a_readme_section_is_relinked_from_the_page_that_includes_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    readme = (
        "<!-- --8<-- [start:doors] -->\n\n"
        "[sync](docs/guides/sync.md), [cluster](docs/guides/redis-cluster.md#urls), "
        "[site](https://example.org/docs/x.md), [up](#why)\n\n"
        "<!-- --8<-- [end:doors] -->\n"
    )
    page = 'Intro.\n\n--8<-- "README.md:doors"\n\nEnd.\n'
    assert include(page, "index.md", readme) == (
        "Intro.\n\n[sync](guides/sync.md), [cluster](guides/redis-cluster.md#urls), "
        "[site](https://example.org/docs/x.md), [up](#why)\n\nEnd.\n"
    )
    assert include(page, "guides/trim.md", readme).startswith(
        "Intro.\n\n[sync](sync.md), [cluster](redis-cluster.md#urls), "
    )
    assert caplog.records == []
    with caplog.at_level(logging.WARNING):
        relink("[examples](examples/)", "index.md")
    assert [r.name.split(".")[0] for r in caplog.records] == ["mkdocs"]
    with pytest.raises(ValueError, match="no section 'absent'"):
        include('--8<-- "README.md:absent"', "index.md", readme)


PROFILE_ROW = re.compile(
    r"^ +\d+(?:/\d+)? +(?:[\d.]+ +){4}(?P<where>[^\s{][^(]*)\((?P<function>\w+)\)$", flags=re.M
)


def test_every_profiled_slimcache_function_is_named_with_its_module_of_today() -> None:
    text = (ROOT / "docs" / "performance.md").read_text()
    rows = [(m["where"], m["function"]) for m in PROFILE_ROW.finditer(text)]
    assert len(rows) >= 10
    package = "\n".join(p.read_text() for p in (ROOT / "slimcache").rglob("*.py"))
    for where, function in rows:
        if not where.startswith("slimcache/"):
            # Not slimcache's (json's encoder.py): the package has no function by that name.
            defined = re.search(rf"^\s*(?:async )?def {function}\(", package, flags=re.M)
            assert not defined, f"performance.md profiles {function} in {where}: name its module"
    ours = [(where, function) for where, function in rows if where.startswith("slimcache/")]
    assert ours
    for where, function in ours:
        path = ROOT / where
        assert path.is_file(), (
            f"performance.md profiles {function} in {where}, which does not exist"
        )
        defined = re.search(rf"^\s*(?:async )?def {function}\(", path.read_text(), flags=re.M)
        assert defined, f"performance.md profiles {function} in {where}, which does not define it"
