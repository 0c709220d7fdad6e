"""Evidence that works from anywhere: a gate run in a user's project, with the library
importable only from there, prints absolute reproducer paths that run from any directory,
and saves corpus files that ``diagfuzz repro`` and ``diagfuzz replay`` run from any
directory (the file records where the impl was imported from)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(REPO)  # tests.faulty; the project's module is not on it
    return subprocess.run([sys.executable, "-m", "diagfuzz", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_reproducers_and_corpus_files_run_from_another_directory(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "mylib_impl.py").write_text(
        "from tests.faulty.three_causes import impl  # noqa: F401\n")
    # The error-parity stage alone: it meets diag_embed's assert (no valid Case, the
    # covering array's, does), and what this checks is where its evidence runs from.
    gate = _run(["gate", "--impl", "mylib_impl:impl", "-n", "0", "--no-suite",
                 "--no-opinfo", "--no-covering",
                 "--no-sequences", "--no-compile", "--ops", "diag_embed", "--repeats", "1",
                 "--report", "report.json"], project)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    commands = re.findall(r"reproduce: `python ([^`]+)`", gate.stdout)
    assert commands and all(Path(c).is_absolute() for c in commands), gate.stdout
    report = json.loads((project / "report.json").read_text())
    assert all(Path(f["reproducer"]).is_absolute() for f in report["findings"])
    # The summary says what the gate's directory holds on disk, after pruning.
    assert report["disk"]["runs_kept"] == 1 and report["disk"]["bytes"] > 0
    assert "Disk: `.diagfuzz/gate/` holds " in gate.stdout
    saved = sorted((project / "corpus").glob("*.json"))
    assert saved
    assert json.loads(saved[0].read_text())["found"]["impl_path"] == [str(project.resolve())]
    script = subprocess.run([sys.executable, commands[0]], cwd=elsewhere, capture_output=True,
                            text=True, timeout=300, check=False,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert script.returncode == 1, script.stdout + script.stderr
    repro = _run(["repro", str(saved[0])], elsewhere)
    assert repro.returncode == 1, repro.stdout + repro.stderr  # the bug, not exit 4
    replay = _run(["replay", str(project / "corpus")], elsewhere)
    assert replay.returncode == 1, replay.stdout + replay.stderr
