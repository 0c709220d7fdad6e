"""A real Redis server for the campaign tests, on a free loopback port, and its client.

``redis-server`` is looked up on PATH (``find_server``); the ``redis`` client comes with the
``dev`` extra (``pip install -e '.[dev]'``, which ``tools/dev`` runs where it installs
dependencies). Nothing is installed here: where either is missing, the tests that need it
skip and say which (``missing``).
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import time
from pathlib import Path


def find_server() -> str | None:
    """The ``redis-server`` binary on PATH, or None."""
    return shutil.which("redis-server")


def client_missing() -> str:
    """'' when the ``redis`` client imports, else why the tests that need it skip."""
    if importlib.util.find_spec("redis") is None:
        return ("no redis client: pip install 'diagfuzz[redis]' (the dev extra has it)")
    return ""


def server_missing() -> str:
    """'' when a Redis server can be started here, else why the tests that need one skip."""
    return client_missing() or ("" if find_server() else
                                "no redis-server on PATH (a system package: redis-server "
                                "on Debian and Ubuntu)")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process of a test: loopback only, no persistence."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> RedisServer:
        """Start on a free port (another one if that was taken meanwhile) and wait for it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            self.port = free_port()
            with (self.workdir / "redis.log").open("ab") as log:
                self.process = subprocess.Popen(
                    [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
                    stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if _pong(self.port):
                    return self
                time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"redis-server did not start; see {self.workdir / 'redis.log'}")

    def stop(self) -> None:
        """Stop the server (if it still runs)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
