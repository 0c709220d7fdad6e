"""The gate under a kernel that hangs on a common shape ends within a few timeouts of a clean
run, with its deterministic hang finding, reproducer, report and JUnit: a known hang is paid
for once (``diagfuzz.execution.timeouts``), in every stage and in classification.

With the whole timeout (20 s here) per hanging Case, the forty hanging covering Cases of
``diag_embed`` alone would keep this gate running for a quarter of an hour; here only the
first Case of a stage, before anything is measured, may take the whole timeout."""

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
    assert finding["stages"]["covering array"] >= 20, finding["stages"]  # every one judged
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
    assert took < 300, took  # 40 hanging Cases x 20 s in the covering stage alone: 800 s
