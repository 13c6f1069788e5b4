"""The ``slimcache`` entry points: ``python -m slimcache``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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
