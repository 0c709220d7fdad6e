"""Fuzz-suite runs that several tests assert different things about: each runs once a
session, whichever xdist worker asks first (the others wait for it and read its result).

The run's directory and its result (exit code, output, report) live in the session's
temporary directory, which every xdist worker of the session shares: pytest-N/, the parent
of each worker's own pytest-N/popen-gwX/.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.test_suite_run import fuzz


def session_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary directory, shared by its xdist workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def fuzz_once(tmp_path_factory: pytest.TempPathFactory, name: str,
              *args: str) -> tuple[int, str, dict[str, Any]]:
    """``tests.test_suite_run.fuzz(directory, *args)``, run once a session under ``name``."""
    base = session_directory(tmp_path_factory)
    directory = base / f"shared-run-{name}"
    with open(base / f"shared-run-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        saved = directory / "result.json"
        if not saved.exists():
            directory.mkdir(exist_ok=True)
            code, out, report = fuzz(directory, *args)
            saved.write_text(json.dumps([code, out, report]))
        code, out, report = json.loads(saved.read_text())
    return code, out, report
