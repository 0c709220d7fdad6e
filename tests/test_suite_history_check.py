"""The fuzz suite's history check: a finding of the plain op streams that passes alone in a
fresh process gets the earlier calls it needs, shrunk, and its reproducer replays them, so
it exits 1 while the bug is there instead of saying "fixed?"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from diagfuzz.core.case import Case, Layout
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution import history
from diagfuzz.execution.classification import AFTER_CALLS, Classification, related_parts
from diagfuzz.execution.history import Call
from diagfuzz.harness import history_check
from diagfuzz.harness.findings import Finding
from diagfuzz.harness.history_check import sequence_arguments
from tests.suite_runs import ROOT, run_suite

#: Results cached per layout and dims, not the offset (nor the values): a call after another
#: of the same layout gets the earlier one's diagonal. Every Case passes alone.
IMPL = "tests.faulty.history:offset_blind"


def suite(tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    return run_suite(tmp_path, "--impl", IMPL, "-k", "test_diagonal", "--diagfuzz-ops=diagonal",
                     "--diagfuzz-sequences=0", "--diagfuzz-shards=1", "--diagfuzz-budget=150",
                     "--diagfuzz-seed=1", *extra)


def reproduce(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True,
                          text=True, check=False, env=env, timeout=300)


def test_a_finding_that_passes_alone_gets_a_reproducer_that_replays_its_polluter(
        tmp_path: Path) -> None:
    code, output, report = suite(tmp_path)
    assert code == 1, output
    assert report["findings"], output
    for finding in report["findings"]:
        found = finding["classification"]
        assert found["history"] == "after earlier calls", found
        assert found["label"] == "deterministic" and len(found["sequence"]) == 1, found
        script = Path(finding["reproducer"])
        replayed = reproduce(script)
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        alone = reproduce(script, "--alone")
        assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "passes alone; fails after 1 earlier call" in output
    assert "  after    1. diagonal(" in output


def test_with_the_check_off_the_reproducer_runs_the_case_alone(tmp_path: Path) -> None:
    code, output, report = suite(tmp_path, "--diagfuzz-history-check", "off")
    assert code == 1, output
    assert report["findings"], output
    for finding in report["findings"]:
        assert "classification" not in finding
        assert "SEQUENCE = []" in Path(finding["reproducer"]).read_text()
        assert reproduce(Path(finding["reproducer"])).returncode == 0  # "fixed?": it is not


def _call(sizes: tuple[int, ...], op: str = "diagonal", offset: int = 0) -> Call:
    return Call("check", Case(op, sizes, offset, 0, 1, "float32", Layout.contiguous(sizes)))


def test_the_last_call_then_the_same_op_and_sizes_are_replayed_first() -> None:
    target = _call((3, 4))
    same_sizes = [_call((3, 4), offset=1), _call((3, 4), offset=2)]
    same_op = [_call((5, 5)), *same_sizes]
    past = [_call((3, 4), op="diag_embed"), *same_op]
    assert related_parts(past, target) == [same_sizes[-1:], same_sizes, same_op]
    # A part that is the whole history, or the part before it, is not replayed twice.
    assert related_parts(same_op, target) == [same_sizes[-1:], same_sizes]
    assert related_parts(same_sizes[-1:], target) == []
    other = [_call((2, 2), op="diag_embed"), _call((2, 3), op="diag_embed")]
    assert related_parts(other, target) == [other[-1:]]


def _classified(case: Case, polluter: Call) -> Classification:
    return Classification(case, "mismatch", 2, 2, {"mismatch": 2}, history=AFTER_CALLS,
                          sequence=(polluter,), searched=9)


def test_a_findings_sequence_follows_its_representative_through_merges_and_reports() -> None:
    polluter = _call((3, 4), offset=1)
    simple, larger = _call((3, 4)).case, _call((6, 6)).case
    kept = Finding.of(Verdict("mismatch", "bitwise:aten", "differ", larger), "::test_x[0]")
    better = Finding.of(Verdict("mismatch", "bitwise:aten", "differ", simple), "::test_x[1]")
    better.shrunk = True
    better.classification = _classified(simple, polluter)
    kept.merge(better)  # the shrunk one represents the cause, with its sequence
    assert kept.case == simple and kept.classification == better.classification
    again = Finding.from_dict(json.loads(json.dumps(kept.to_dict())))
    assert again.classification is not None
    assert again.classification.sequence == (polluter,)
    arguments = sequence_arguments(again)
    assert arguments["sequence"] == [polluter]
    assert arguments["story"] == ("passes alone; fails after 1 earlier call (shrunk from the 9 "
                                  "its executor made before it)")
    assert sequence_arguments(Finding.of(Verdict("mismatch", "b", "m", simple))) == {}


def test_a_hang_the_call_before_left_gets_that_call_in_its_reproducer(tmp_path: Path) -> None:
    # A diagonal_backward with offset 2 leaves work the next call waits on forever: the
    # suite's hang finding passes alone. Its run confirmed the op's hang (the workers'
    # known-faults file), so the check's re-runs wait a known hang's allowance.
    polluter = Case("diagonal_backward", (3, 3), 2, 0, 1, "float32", Layout.contiguous((3, 3)))
    past = history.History(tmp_path / "gw0")
    past.record("check", polluter)
    hang = Verdict("hang", "executor:timeout", "no progress", _call((3, 3)).case,
                   {"history": past.reference(1)})
    finding = Finding.of(hang, "::test_diagonal[shard0]")
    (tmp_path / "known-faults").write_text("diagonal hang\n")
    checker = history_check.checker(history_check.rerun_of(
        "tests.faulty.history:left_running", "cpu", 20.0, False, str(tmp_path)))
    history_check.check_history([finding], checker)
    found = finding.classification
    assert found is not None and found.history == AFTER_CALLS and found.deterministic
    assert sequence_arguments(finding)["sequence"] == [Call("check", polluter)]
