"""Helper of the suite tests: the fuzz suite in a subprocess, as a user runs it, from a
directory of the test's own, with ``tests.faulty`` impls importable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.campaign_runs import environment

ROOT = Path(__file__).resolve().parents[1]


def run_suite(tmp_path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    """``pytest -p diagfuzz --pyargs diagfuzz.suite -n 0 ARGS``: its exit code, its output
    and its JSON report (``tmp_path/report.json``; runs under ``tmp_path/runs``)."""
    env = environment()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
         "-p", "no:cacheprovider", "-n", "0", f"--diagfuzz-root={tmp_path / 'runs'}",
         f"--diagfuzz-report={report}", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text())
