"""README sections shown on the docs site too, written once in the README.

A page includes a section of the README with the snippets syntax, ``--8<-- "README.md:name"``,
and the README marks the section with ``<!-- --8<-- [start:name] -->`` and
``<!-- --8<-- [end:name] -->`` (comments, so GitHub shows nothing of them). This MkDocs hook
(registered in ``mkdocs.yml``) includes the section before the snippets extension would, and
makes its links work from the page: the README links to ``docs/guides/sync.md``, which from
``docs/index.md`` is ``guides/sync.md``. A link to a file outside ``docs/`` has no page on the
site, so it is a warning, which fails the strict build.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = "docs"

INCLUDE = re.compile(r'^--8<-- "README\.md:(?P<section>[\w-]+)"$', flags=re.M)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
EXTERNAL = re.compile(r"[a-z][a-z0-9+.-]*:|#")

logger = logging.getLogger(f"mkdocs.plugins.{__name__}")


def section(name: str, readme: str) -> str:
    """The lines between the README's start and end markers of section ``name``."""
    found = re.search(
        rf"^<!-- --8<-- \[start:{name}\] -->\n(?P<body>.*?)^<!-- --8<-- \[end:{name}\] -->$",
        readme,
        flags=re.S | re.M,
    )
    if found is None:
        raise ValueError(f"README.md has no section {name!r} (<!-- --8<-- [start:{name}] -->)")
    return found["body"].strip("\n")


def relink(text: str, page: str) -> str:
    """``text`` with its README-relative links made relative to ``page`` (a path under docs/)."""
    here = os.path.dirname(page)

    def replace(match: re.Match[str]) -> str:
        target = match["target"]
        if EXTERNAL.match(target):
            return match[0]
        path, hash_, fragment = target.partition("#")
        if not path.startswith(f"{DOCS}/"):
            logger.warning("%s: README link %s has no page on the site", page, target)
            return match[0]
        relative = os.path.relpath(path.removeprefix(f"{DOCS}/"), here or ".")
        return f"]({relative}{hash_}{fragment})"

    return LINK.sub(replace, text)


def include(markdown: str, page: str, readme: str) -> str:
    """``markdown`` with each README include replaced by that section, relinked for ``page``."""
    return INCLUDE.sub(lambda m: relink(section(m["section"], readme), page), markdown)


def on_page_markdown(markdown: str, *, page: Any, **kwargs: Any) -> str:
    """MkDocs hook: include the README sections a page names."""
    if not INCLUDE.search(markdown):
        return markdown
    return include(markdown, page.file.src_uri, README.read_text())
