"""The ``pip install`` that adds an extra, said for where slimcache itself was installed from.

``pip install 'slimcache[redis]'`` works once slimcache is on a package index. Installed from a
checkout (``pip install .``, ``uv sync``) it fails: it asks the index for slimcache, and the
adapter extras name distributions of the repository's workspace (``adapters/redis`` is
``slimcache-redis``) that no index holds. The installer records where a distribution came from
(``direct_url.json``, PEP 610); an error message that names an install reads it here and names
the one that works: the adapter's folder of that checkout, or the repository at the commit
installed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

__all__ = ["ADAPTERS", "install_command", "pip_install"]

ADAPTERS: dict[str, tuple[str, str, str]] = {
    "redis": ("slimcache-redis", "adapters/redis", ""),
    "sql": ("slimcache-sql", "adapters/sql", "[sqlite]"),
    "postgres": ("slimcache-sql", "adapters/sql", "[postgres]"),
    "s3": ("slimcache-s3", "adapters/s3", ""),
    "dynamodb": ("slimcache-dynamodb", "adapters/dynamodb", ""),
}
"""The extras that install an adapter: its distribution, its folder in the repository and the
distribution's own extra the slimcache extra asks for."""


@functools.cache
def _direct_url() -> dict[str, Any] | None:
    """Where the installed slimcache came from, when not from an index (PEP 610)."""
    try:
        text = importlib.metadata.distribution("slimcache").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _checkout(url: str) -> Path | None:
    """The local folder a ``file:`` URL names, if it is one that exists."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    folder = Path(url2pathname(unquote(parts.path)))
    return folder if folder.is_dir() else None


def install_command(extra: str, direct_url: dict[str, Any] | None) -> str:
    """The ``pip install`` that adds ``extra`` to a slimcache installed as ``direct_url`` says.

    Args:
        extra: A slimcache extra (``"redis"``, ``"otel"``, ...).
        direct_url: The installed distribution's ``direct_url.json`` (``None``: from an index).

    Returns:
        For an index install, ``pip install 'slimcache[extra]'``. From a checkout, the adapter's
        folder in it (``pip install '/path/adapters/redis'``), or the checkout with the extra
        for one that installs no adapter. From a repository URL, the same from that URL at the
        commit installed.
    """
    adapter = ADAPTERS.get(extra)
    url = direct_url.get("url") if direct_url is not None else None
    if not isinstance(url, str) or direct_url is None:
        return f"pip install 'slimcache[{extra}]'"
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id")
        at = f"{vcs['vcs']}+{url}" + (f"@{commit}" if isinstance(commit, str) else "")
        if adapter is None:
            return f"pip install 'slimcache[{extra}] @ {at}'"
        name, folder, own = adapter
        return f"pip install '{name}{own} @ {at}#subdirectory={folder}'"
    checkout = _checkout(url) if "dir_info" in direct_url else None
    if checkout is None:
        return f"pip install 'slimcache[{extra}]'"
    if adapter is None:
        return f"pip install '{checkout}[{extra}]'"
    name, folder, own = adapter
    return f"pip install '{checkout / folder}{own}'"


def pip_install(extra: str) -> str:
    """The ``pip install`` that adds ``extra`` to this slimcache (see :func:`install_command`)."""
    return install_command(extra, _direct_url())
