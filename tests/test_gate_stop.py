"""A stopped gate loses nothing: SIGTERM and --max-seconds leave the report, the JUnit and the
summary of what finished, no process behind, and the earlier runs' reproducers in place. A
fuzz run under pytest stopped by SIGTERM writes its report too."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.test_gate_causes import IMPL, gate


def _environment(marker: str) -> dict[str, str]:
    env = dict(os.environ, DIAGFUZZ_TEST_MARK=marker, DIAGFUZZ_PROGRESS_EVERY="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), env.get("PYTHONPATH", "")])
    return env


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"DIAGFUZZ_TEST_MARK={marker}".encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[str], limit: float) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        if path.exists() and re.search(pattern, path.read_text(errors="replace")):
            return
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} never appeared in {path}")


def _no_process_left(marker: str) -> None:
    end = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < end:
        time.sleep(0.2)
    assert _processes_with(marker) == []


def test_sigterm_writes_what_finished_and_keeps_the_last_runs_reproducers(
        tmp_path: Path) -> None:
    # The error-parity stage finds one (the sequence search would find a second).
    code, _, _, first = gate(tmp_path, "--no-suite", "--no-sequences")
    first_repros = sorted(Path(tmp_path, first["run_dir"], "repro").glob("repro_*.py"))
    assert code == 1 and len(first_repros) == 1
    marker = uuid.uuid4().hex
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "diagfuzz", "gate", "--impl", IMPL, "-n", "1",
             "--no-compile", "--no-opinfo",
             "--no-sequences", "--no-covering", "--budget", "20000", "--report",
             "report.json",
             "--junit", "junit.xml", "--summary", "summary.md"],
            cwd=tmp_path, env=_environment(marker), stdout=subprocess.PIPE, stderr=stderr,
            text=True)
        # Once the suite's workers have judged Cases and the fixed stages have ended.
        _wait_for(err, r"error parity: \d+ Cases", proc, 120)
        _wait_for(err, r"running: fuzz suite [1-9]", proc, 180)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out  # the error-parity stage's findings are failures
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stopped"] == "SIGTERM" and report["exit_code"] == 1
    suite = next(s for s in report["stages"] if s["name"] == "fuzz suite")
    assert suite["stopped"] and suite["planned"] == 20000
    # Counts that add up: every Case the progress line showed judged is in the stage's
    # count, the unfinished shards' included, and the note says which part is which.
    shown = [int(n.replace(",", "")) for n in
             re.findall(r"running: fuzz suite ([\d,]+)/", err.read_text())]
    assert shown and suite["cases"] >= max(shown), (suite, shown[-3:])
    assert re.search(r"stopped: [\d,]+ Cases of shards that finished, [\d,]+ of shards "
                     r"that did not", suite["note"]), suite["note"]
    assert all(f["cut"] for f in report["findings"] if f["classification"] is None)
    assert "Stopped by SIGTERM" in (tmp_path / "summary.md").read_text()
    assert "Stopped by SIGTERM" in out
    names = [s.get("name") for s in ET.parse(tmp_path / "junit.xml").getroot()]
    assert names[0] == "gate" and "fuzz suite" in names
    assert all(p.exists() for p in first_repros)  # the first run's evidence is still there
    assert (tmp_path / ".diagfuzz/gate/latest").resolve() == Path(
        tmp_path, report["run_dir"]).resolve()
    _no_process_left(marker)


def test_max_seconds_is_the_gates_wall_time(tmp_path: Path) -> None:
    cap = 40.0
    code, out, err, report = gate(tmp_path, "--max-seconds", str(cap), budget=50000)
    assert code == 1, out + err  # what it found in the time still fails the gate
    assert report["cut"] and report["seconds"] <= 1.05 * cap, report["seconds"]
    assert report["findings"]
    stages = {s["name"]: s for s in report["stages"]}
    assert stages["fuzz suite"]["cut"] or stages["fuzz suite"]["stopped"]


def test_pytest_run_stopped_by_sigterm_writes_its_report(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    root = tmp_path / "root"
    report_path = tmp_path / "report.json"
    err = tmp_path / "out.txt"
    with err.open("w") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
             "-n", "1", f"--impl={IMPL}", "--diagfuzz-budget=50000",
             f"--diagfuzz-root={root}", f"--diagfuzz-report={report_path}",
             "-p", "no:cacheprovider", f"--rootdir={tmp_path}"],
            cwd=tmp_path, env=_environment(marker), stdout=output, stderr=subprocess.STDOUT,
            text=True)
        end = time.monotonic() + 180
        while time.monotonic() < end and proc.poll() is None:  # until a failure is seen
            seen = [json.loads(p.read_text() or "{}") for p in root.glob("run-*/*/progress.json")
                    if p.stat().st_size]
            if any(s.get("findings") for s in seen):
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    text = err.read_text()
    assert proc.returncode == 1, text
    report = json.loads(report_path.read_text())
    assert report["stopped"] == "SIGTERM" and report["findings"], text
    assert report["cases_seen"] > 0
    assert "stopped: SIGTERM" in text
    assert "not ended" not in text, text  # the workers ended their shards at the stop
    _no_process_left(marker)
