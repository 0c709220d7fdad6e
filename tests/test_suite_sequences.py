"""The fuzz suite's sequence search (``test_sequences``): a bug that needs an earlier call
is found as users run the suite, and its reproducer replays the calls before it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.suite_runs import ROOT, run_suite


def suite(tmp_path: Path, impl: str, *extra: str) -> tuple[int, str, dict]:
    return run_suite(tmp_path, "--impl", impl, "-k", "sequences", *extra)


def test_a_state_bug_is_found_by_the_suite_and_its_reproducer_replays_what_came_before(
        tmp_path: Path) -> None:
    # Results cached by the address of a staged input: wrong only after another input of
    # the same size, which no single Case shows.
    code, output, report = suite(tmp_path, "tests.faulty.history:address_reuse",
                                 "--diagfuzz-ops=diagonal", "--diagfuzz-sequences=30")
    assert code == 1, output
    [finding] = report["findings"]
    assert "test_sequences" in finding["test_ids"][0], finding
    script = Path(finding["reproducer"])
    assert "SEQUENCE = [\n" in script.read_text()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    replayed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              check=False, env=env, timeout=300)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    alone = subprocess.run([sys.executable, str(script), "--alone"], capture_output=True,
                           text=True, check=False, env=env, timeout=300)
    assert alone.returncode == 0, alone.stdout


def test_the_gate_profile_and_zero_leave_it_out(tmp_path: Path) -> None:
    code, output, report = suite(tmp_path, "tests.faulty.history:address_reuse",
                                 "--diagfuzz-ops=diagonal", "--diagfuzz-sequences=0")
    assert code in (0, 5), output  # nothing collected: test_sequences deselected
    assert report["findings"] == []
