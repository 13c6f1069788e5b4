"""How a worker program and the test that started it talk: JSON lines out, a file to go."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["emit", "wait_for"]


def emit(message: Mapping[str, Any]) -> None:
    """Print ``message`` to the parent as one JSON line, at once."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _exists(path: str) -> bool:
    return os.path.exists(path)


async def wait_for(path: str, timeout: float) -> None:
    """Return once ``path`` exists (the parent's signal to go).

    Raises:
        TimeoutError: It did not appear within ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not _exists(path):
        if loop.time() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:g}s")
        await asyncio.sleep(0.005)
