"""A pytest plugin for tests (``-p tests.worker_exit``): how each xdist worker process ends.

With ``DIAGFUZZ_TEST_EXITS=DIR``, each worker writes to ``DIR/<worker id>``: ``atexit`` from
an ``atexit`` function registered as this plugin loads (before diagfuzz configures the
worker), ``finalised`` from an object that only the interpreter's finalisation deletes.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

EXITS_ENV = "DIAGFUZZ_TEST_EXITS"


class _Finalised:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self, write=os.write) -> None:  # (os may be half torn down by then)
        write(self.fd, b"finalised\n")


_directory = os.environ.get(EXITS_ENV)
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _directory and _worker:
    Path(_directory).mkdir(parents=True, exist_ok=True)
    _fd = os.open(Path(_directory) / _worker, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    atexit.register(os.write, _fd, b"atexit\n")
    _kept = _Finalised(_fd)
