"""Real servers for the tests, started on loopback by the fixtures in this package."""

from __future__ import annotations

import os
import signal
import subprocess


class ServerProcess:
    """What the single-process servers share: whether they run, their pid, freeze and thaw."""

    _process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """Process id of the running server.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError("the server is not running")
        return self._process.pid

    def freeze(self) -> None:
        """Stop the server process (SIGSTOP): connections stay open and nothing answers.

        Always pair with :meth:`thaw` (in a ``finally``).
        """
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server run again (SIGCONT); harmless when it is not frozen."""
        if self.running:
            os.kill(self.pid, signal.SIGCONT)
