"""Helpers of the campaign tests: run the fuzz suite in a subprocess from the repository
root, so ``tests.faulty`` impls import, and ``diagfuzz merge`` in this process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: A small run of tests.faulty.wrong:impl (flips a bit when offset > 0): in-process
#: checks, float32 only, tiny tensors, so it finds one or two signatures and shrinks them
#: in seconds.
WRONG = ("--impl", "tests.faulty.wrong:impl", "--diagfuzz-isolation", "inprocess",
         "--hypothesis-profile", "ci", "--diagfuzz-max-elements", "256",
         "--diagfuzz-dtypes", "float32")


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without an enclosing xdist worker's identity."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "TRITON_CACHE_DIR"))}
    env.update(extra or {})
    return env


def suite(report: Path, *args: str, root: Path | None = None,
          env: dict[str, str] | None = None) -> tuple[int, str, dict[str, Any]]:
    """Run the suite with ``args``; (exit code, output, the JSON report or {})."""
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
               "-p", "no:cacheprovider", f"--diagfuzz-root={root or report.parent / 'root'}",
               f"--diagfuzz-report={report}", *args]
    proc = subprocess.run(command, cwd=REPO, env=environment(env), capture_output=True,
                          text=True, timeout=600, check=False)
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, proc.stdout + proc.stderr, data


def merge(*args: str) -> tuple[int, str]:
    """``diagfuzz merge ARGS`` in this process: (exit code, output)."""
    from diagfuzz.gate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["merge", *args])
        except SystemExit as exc:  # argparse's own usage errors
            code = int(exc.code or 0)
    return code, out.getvalue() + err.getvalue()


def comparable(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings without what differs between a run and a merge of its partitions: the
    reproducer paths (each run writes its own) and the order of test ids."""
    return [{**{k: v for k, v in f.items() if k != "reproducer"},
             "test_ids": sorted(f["test_ids"])} for f in findings]
