"""A real S3 endpoint for the tests: moto's server mode as its own process, on a loopback port.

The server runs ``python -m moto.server`` with moto's request recorder on, writing every
request to a file in a private temp directory. ``stop()`` kills the process; ``start()`` runs
a new one on the same port and replays the recording into it, so buckets and objects come
back as they were. Requests are replayed in the order they arrived, so after a restart the
outcome of concurrent writes to one key may differ from the original one; fault tests should
write what they check afterwards sequentially. A server that cannot start fails the tests; it
is never skipped.

Clients get dummy credentials and the region explicitly (see :meth:`S3Server.client_options`),
so nothing is put in the environment of the other tests.

Fixtures:
    s3_server: Session-scoped :class:`S3Server`, with ``host``, ``port``, ``endpoint_url``
        (``http://127.0.0.1:<port>``), ``region`` (``us-east-1``), ``client_options`` (the
        keywords that give a boto3 client or ``S3Store.from_url`` the endpoint, region and
        credentials), ``client()`` (a new boto3 S3 client), ``create_bucket()``, and
        ``stop()`` / ``start()`` and ``freeze()`` / ``thaw()`` (SIGSTOP / SIGCONT)
        for fault tests.

Its stores: ``s3_store_factory`` (:mod:`tests.servers.store_factories`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config

from tests.servers import ServerProcess

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "S3Server",
    "s3_server",
    "unique_bucket_name",
]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0
_PROBE_TIMEOUT = 2.0
_REPLAY_TIMEOUT = 120.0
_PROBE_PATH = "/moto-api/"
_REPLAY_PATH = "/moto-api/recorder/replay-recording"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def unique_bucket_name() -> str:
    """Return a bucket name no other test uses."""
    return f"slimcache-test-{uuid.uuid4().hex}"


class S3Server(ServerProcess):
    """One moto server process, restartable on the same port with the same buckets and objects.

    Args:
        directory: Private directory for the request recording and the server's log.
    """

    host = "127.0.0.1"
    region = "us-east-1"
    access_key = "testing"
    secret_key = "testing"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self._recording = directory / "requests.jsonl"
        self._log = directory / "moto.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """HTTP URL of the endpoint."""
        return f"http://{self.host}:{self.port}"

    @property
    def client_options(self) -> dict[str, str]:
        """Keywords giving a boto3 client (or ``S3Store.from_url``) this endpoint and its keys."""
        return {
            "endpoint_url": self.endpoint_url,
            "region_name": self.region,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
        }

    def client(self, **config: Any) -> S3Client:
        """Return a new boto3 S3 client for this server; ``config`` goes to botocore's Config."""
        config.setdefault("connect_timeout", 5.0)
        config.setdefault("read_timeout", 10.0)
        config.setdefault("retries", {"max_attempts": 2, "mode": "standard"})
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(**config),
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique one unless ``name`` is given) and return its name."""
        name = name or unique_bucket_name()
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        finally:
            client.close()
        return name

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _request(self, method: str, path: str, timeout: float) -> int:
        request = urllib.request.Request(self.endpoint_url + path, method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status: int = response.status
            return status

    def _answers(self) -> bool:
        try:
            return self._request("GET", _PROBE_PATH, _PROBE_TIMEOUT) == 200
        except (urllib.error.URLError, OSError):
            return False

    def _repair_recording(self) -> int:
        """Drop unreadable lines from the recording; return how many requests it holds.

        moto appends each request with its own ``open``/``write``; a large request written
        while another thread appends can leave a garbled line, which would abort the replay.
        """
        if not self._recording.exists():
            return 0
        lines = self._recording.read_bytes().splitlines(keepends=False)
        kept: list[bytes] = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                kept.append(line)
        if len(kept) != len(lines):
            self._recording.write_bytes(b"".join(line + b"\n" for line in kept))
        return len(kept)

    def start(self) -> None:
        """Start the server (again) on the same port and restore its buckets and objects.

        Raises:
            RuntimeError: The process exited, did not answer in time, or the replay failed.
        """
        if self.running:
            return
        replay = self._repair_recording() > 0
        env = dict(os.environ)
        env["MOTO_ENABLE_RECORDING"] = "True"
        env["MOTO_RECORDER_FILEPATH"] = str(self._recording)
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"moto server exited with code {self._process.returncode} on port "
                    f"{self.port}; log:\n{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                self._kill()
                raise RuntimeError(
                    f"moto server did not answer on port {self.port} within {_START_TIMEOUT}s; "
                    f"log:\n{self._log_tail()}"
                )
            time.sleep(0.05)
        if replay:
            try:
                status = self._request("POST", _REPLAY_PATH, _REPLAY_TIMEOUT)
            except (urllib.error.URLError, OSError) as exc:
                self._kill()
                raise RuntimeError(f"moto server could not replay its requests: {exc}") from exc
            if status != 200:
                self._kill()
                raise RuntimeError(f"moto server answered {status} to the replay request")

    def stop(self) -> None:
        """Kill the server process; clients see refused connections until :meth:`start`."""
        if not self.running:
            return
        assert self._process is not None
        self._process.terminate()
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
def s3_server() -> Iterator[S3Server]:
    """A real moto S3 server for the whole session."""
    directory = Path(tempfile.mkdtemp(prefix="slimcache-s3-"))
    server = S3Server(directory)
    try:
        server.start()
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
