"""The gate under a kernel that hangs on a common shape ends within a few timeouts of a clean
run, with its deterministic hang finding, reproducer, report and JUnit: a known hang is paid
for once (``diagfuzz.execution.timeouts``), in every stage and in classification.

With the whole timeout (20 s here) per hanging Case, the hanging covering Cases of
``diag_embed`` alone (its ``.out`` Cases whose ``out`` has the faulty shape) would keep this
gate running for minutes; here only the first Case of a stage, before anything is
measured, may take the whole timeout."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

IMPL = "tests.faulty.shape_fault:hang"


def test_a_common_shape_hang_costs_the_gate_seconds_not_hours(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "diagfuzz", "gate", "--impl", IMPL, "--ops", "diag_embed",
            "--budget", "200", "-n", "1", "--no-compile", "--no-opinfo", "--no-sequences",
            "--timeout", "20", "--report", "report.json", "--junit", "junit.xml"]
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), environ.get("PYTHONPATH", "")])
    started = time.monotonic()
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=False,
                          env=environ, timeout=900)
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    [finding] = report["findings"]
    assert finding["describe"] == "diag_embed · hang · executor:timeout"
    assert finding["classification"]["label"] == "deterministic"
    hanging = _hanging_covering_cases()
    assert finding["stages"]["covering array"] >= hanging >= 9, finding["stages"]  # all judged
    # The summary and the JSON say the timeouts used and the confirmed hang.
    limits = report["timing"]["timeouts"]
    assert limits["cap_s"] == 20 and limits["confirmed_faults"] == ["diag_embed hang"]
    assert limits["ops"]["diag_embed"]["warm_s"] < 20
    assert "- timeouts: at most 20 s" in proc.stdout
    assert "failure" in (tmp_path / "junit.xml").read_text()
    # The reproducer waits seconds, not the whole timeout, and says the bug is there.
    script = Path(finding["reproducer"])
    wait = float(re.search(r"^TIMEOUT = (.+)$", script.read_text(), re.M).group(1))
    assert wait <= 20, wait
    repro = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                           text=True, check=False, env=environ, timeout=300)
    assert repro.returncode == 1 and "the bug is there" in repro.stdout, repro.stdout
    # The covering stage alone, a whole timeout per hanging Case: at least 9 x 20 s.
    assert took < min(150, hanging * 20 * 0.8), took


def _hanging_covering_cases() -> int:
    """diag_embed's covering Cases that reach the fault (a rank-4 tensor of first dim 3):
    ``.out`` Cases whose ``out`` has the result's shape (``out_form``)."""
    from diagfuzz.oracles.checks import out_form
    from diagfuzz.strategies.covering import covering_set

    def faulty(shape: tuple[int, ...]) -> bool:
        return len(shape) == 4 and shape[0] == 3

    return sum(faulty(c.layout.shape) or (
        bool(c.out_dtype) and faulty(c.sizes)
        and out_form(c, c.sizes) in ("fresh", "transposed"))
        for c in covering_set("diag_embed").cases)
