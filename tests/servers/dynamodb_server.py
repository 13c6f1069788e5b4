"""A real DynamoDB endpoint for the tests: moto's server mode as its own process, on loopback.

moto's DynamoDB checks a write's condition and applies it in separate steps, with nothing
between requests that arrive at once on its threads; DynamoDB applies each request to its items
atomically. So the server runs moto's own application behind one lock, one request at a time
(``python -m tests.servers.dynamodb_server --port N``), which makes each request atomic as on
DynamoDB. A server that cannot start fails the tests; it is never skipped.

Clients get dummy credentials and the region explicitly (see
:attr:`DynamoDBServer.client_options`), so nothing is put in the environment of the other tests.

Fixtures:
    dynamodb_server: Session-scoped :class:`DynamoDBServer`, with ``endpoint_url``, ``region``,
        ``client_options`` (the keywords that give a boto3 client or
        ``DynamoDBStore.from_url`` the endpoint, region and credentials), ``client()`` (a new
        boto3 DynamoDB client), ``url(table)`` and ``freeze()`` / ``thaw()``.

Its stores: ``dynamodb_store_factory`` (:mod:`tests.servers.store_factories`).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config

from tests.servers import ServerProcess

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["DynamoDBServer", "dynamodb_server", "unique_table_name"]

_START_TIMEOUT = 30.0
STORE_TIMEOUT = 20.0
"""The store timeout the tests give: the server answers one request at a time, and on a loaded
machine a call can queue behind others for longer than the default 5 s."""
_STOP_TIMEOUT = 10.0
_PROBE_TIMEOUT = 2.0
_PROBE_PATH = "/moto-api/"
_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def unique_table_name() -> str:
    """Return a table name no other test uses."""
    return f"slimcache-test-{uuid.uuid4().hex}"


class DynamoDBServer(ServerProcess):
    """One moto server process serving DynamoDB, one request at a time.

    Args:
        directory: Private directory for the server's log.
    """

    host = "127.0.0.1"
    region = "us-east-1"
    access_key = "testing"
    secret_key = "testing"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self._log = directory / "moto.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """HTTP URL of the endpoint."""
        return f"http://{self.host}:{self.port}"

    @property
    def client_options(self) -> dict[str, str]:
        """Keywords giving a boto3 client (or ``DynamoDBStore.from_url``) this endpoint."""
        return {
            "endpoint_url": self.endpoint_url,
            "region_name": self.region,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
        }

    def url(self, table: str, **options: str) -> str:
        """A ``dynamodb://`` URL of ``table`` on this server (credentials come from elsewhere),
        with a store timeout of :data:`STORE_TIMEOUT` seconds unless ``options`` give one."""
        query = "&".join(
            f"{name}={value}"
            for name, value in {
                "endpoint_url": self.endpoint_url,
                "region": self.region,
                "timeout": str(STORE_TIMEOUT),
                **options,
            }.items()
        )
        return f"dynamodb://{table}?{query}"

    @property
    def environment(self) -> dict[str, str]:
        """The variables that give a process started for a test this server's credentials."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
        }

    def client(self) -> DynamoDBClient:
        """Return a new boto3 DynamoDB client for this server."""
        return boto3.session.Session().client(
            "dynamodb",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(connect_timeout=5.0, read_timeout=10.0),
        )

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _answers(self) -> bool:
        try:
            request = urllib.request.Request(self.endpoint_url + _PROBE_PATH)
            with urllib.request.urlopen(request, timeout=_PROBE_TIMEOUT) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> None:
        """Start the server.

        Raises:
            RuntimeError: The process exited or did not answer in time.
        """
        if self.running:
            return
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.servers.dynamodb_server", "--port", str(self.port)],
                cwd=_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"moto server exited with code {self._process.returncode} on port "
                    f"{self.port}; log:\n{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"moto server did not answer on port {self.port} within {_START_TIMEOUT}s; "
                    f"log:\n{self._log_tail()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """End the server process."""
        if self._process is None:
            return
        self.thaw()
        self._process.terminate()
        try:
            self._process.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=_STOP_TIMEOUT)


@pytest.fixture(scope="session")
def dynamodb_server() -> Iterator[DynamoDBServer]:
    """A real moto DynamoDB server for the whole session."""
    directory = Path(tempfile.mkdtemp(prefix="slimcache-dynamodb-"))
    server = DynamoDBServer(directory)
    try:
        server.start()
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


# -- the server process ----------------------------------------------------------------------

_App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _one_at_a_time(app: _App) -> _App:
    """``app`` answering one request at a time, its whole response made under the lock."""
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with lock:
            return list(app(environ, start_response))

    return serve


def main() -> None:
    """Run moto's server application on loopback, one request at a time."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        "127.0.0.1",
        port,
        _one_at_a_time(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
