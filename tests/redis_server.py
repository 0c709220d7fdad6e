"""A real Redis server for the campaign tests, on a free loopback port, and its client.

``redis-server`` is looked up on PATH (``find_server``). Where it is missing and the tests
run as root on a machine with ``apt-get`` (Debian and Ubuntu CI images), the distribution's
package is installed once, under a file lock so that xdist workers never run apt at once
(``DIAGFUZZ_TEST_NO_INSTALL=1`` leaves that out, e.g. offline). The ``redis`` client comes
with the ``dev`` extra (``pip install -e '.[dev]'``, which ``tools/dev`` runs where it
installs dependencies). Where either is still missing, the tests that need it skip and say
why (``server_missing``).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: Why an install was not made or failed (for the skip reason), once per process.
_install_notes: list[str] = []


def _apt_install() -> None:
    """Install Debian's redis-server package, once for all workers (a file lock)."""
    if os.environ.get("DIAGFUZZ_TEST_NO_INSTALL", "") not in ("", "0"):
        _install_notes.append("not installing it (DIAGFUZZ_TEST_NO_INSTALL=1)")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        _install_notes.append("cannot install it here (not root, or no apt-get)")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = Path(tempfile.gettempdir()) / "diagfuzz-test-redis-install.lock"
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if shutil.which("redis-server"):  # another worker installed it meanwhile
            return
        for command in (["apt-get", "update", "-q"],
                        ["apt-get", "install", "-y", "-q", "--no-install-recommends",
                         "redis-server"]):
            proc = subprocess.run(command, capture_output=True, text=True, check=False,
                                  env=env, timeout=600)
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
                _install_notes.append(f"{' '.join(command[:2])} exited {proc.returncode}: "
                                      f"{' '.join(tail)}")
                return


def find_server() -> str | None:
    """The ``redis-server`` binary on PATH (installed first where ``_apt_install`` can), or
    None."""
    found = shutil.which("redis-server")
    if found is None and not _install_notes:
        _apt_install()
        found = shutil.which("redis-server")
    return found


def client_missing() -> str:
    """'' when the ``redis`` client imports, else why the tests that need it skip."""
    if importlib.util.find_spec("redis") is None:
        return ("no redis client: pip install 'diagfuzz[redis]' (the dev extra has it)")
    return ""


def server_missing() -> str:
    """'' when a Redis server can be started here, else why the tests that need one skip."""
    return client_missing() or ("" if find_server() else
                                "no redis-server on PATH (a system package: redis-server "
                                "on Debian and Ubuntu); " + "; ".join(_install_notes))


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
