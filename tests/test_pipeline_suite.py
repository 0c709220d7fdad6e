"""Pipelined shards end to end: found while pipelining, replayed and shrunk synchronously.

With process isolation a shard first draws and submits families without waiting (phase 1),
then replays the first failing family through Hypothesis' database and shrinks it (phase 2).
These runs check that nothing is lost on the way: the shrunk Case is what the synchronous
mode reports, a crash is its Case's, and a failure that does not come back is still reported.

The flaky impl lives here (``tests.test_pipeline_suite:first_call_wrong``), so the suite's
subprocess imports it as ``--impl``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from diagfuzz.core.case import Case
from diagfuzz.execution import journal
from tests.faulty._base import Faulty, flip_first_bit
from tests.shared_runs import fuzz_once
from tests.test_suite_run import SMALL, fuzz

ONE_SHARD = ("--diagfuzz-shards", "1", "-k", "test_diagonal and not backward")
#: tests.faulty.wrong in one shard of test_diagonal, pipelined: the run the synchronous mode
#: (here) and two executors (test_fanout_suite.py) are compared with. Two dtypes, not all:
#: every dtype group is one more symptom to shrink in each of these runs (all dtypes: 4
#: symptoms, 611 shrink checks); float32 and int32 still give two symptoms (nan-payload,
#: values: 386 checks), so phase 2 still picks each symptom's own first family.
WRONG_ONE_SHARD = ("--impl", "tests.faulty.wrong:impl", "--diagfuzz-seed", "2",
                   "--diagfuzz-budget", "300", "--diagfuzz-dtypes=float32,int32", *ONE_SHARD,
                   *SMALL)


def pipelined_wrong_run(tmp_path_factory: pytest.TempPathFactory
                        ) -> tuple[int, str, dict[str, Any]]:
    """WRONG_ONE_SHARD pipelined to one executor, run once a session: this module and
    test_fanout_suite.py assert different things about the same run."""
    return fuzz_once(tmp_path_factory, "wrong-one-shard-pipelined", *WRONG_ONE_SHARD)


class FirstCallWrong(Faulty):
    """aten, but the first non-empty result (over all processes) has one bit flipped: a
    failure that never comes back (DIAGFUZZ_FIRST_CALL_MARK names the marker file)."""

    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        mark = Path(os.environ["DIAGFUZZ_FIRST_CALL_MARK"])
        if result.numel() == 0 or mark.exists():
            return result
        mark.touch()
        return flip_first_bit(result)


first_call_wrong = FirstCallWrong()


def journal_records(report: dict[str, Any]) -> list[dict[str, Any]]:
    return journal.read(journal.journal_path(Path(report["run_dir"]) / "journal", "main"))


def test_phase_one_finds_phase_two_shrinks_as_the_synchronous_mode(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    code, out, piped = pipelined_wrong_run(tmp_path_factory)
    assert code == 1, out
    assert "pipelined" in out  # the run header says how it ran
    code, out, sync = fuzz(tmp_path, *WRONG_ONE_SHARD, "--diagfuzz-pipeline=off", root="sync")
    assert code == 1, out
    assert piped["findings"] and len(piped["findings"]) == len(sync["findings"])
    # The same seed draws the same families, so phase 1 finds each signature in the family
    # the synchronous run finds it in first, and phase 2 shrinks it to the same Case.
    assert [f["case"] for f in piped["findings"]] == [f["case"] for f in sync["findings"]]
    assert piped["counts"] == sync["counts"]
    failure = piped["findings"][0]
    assert failure["kind"] == "mismatch" and failure["shrunk"]
    records = journal_records(piped)
    cases = {r["seq"]: r["case"] for r in records if r["type"] == "case"}
    failing = [cases[r["seq"]] for r in records if r["type"] == "verdict" and r["kind"] != "pass"]
    first = failing[0]
    # Phase 2 replays the failing family: its failing member runs (and fails) again.
    assert failing.count(first) >= 2, "the first failure was never replayed"
    # The reported, shrunk Case was checked and failed; every Case checked is journaled.
    assert any(Case.from_json(c) == Case.from_json(failure["case"]) for c in failing)
    assert piped["cases"] + piped["shrink_checks"] == len(cases)
    assert all(r["type"] != "abandoned" for r in records)
    assert journal.last_unfinished(journal.journal_path(
        Path(piped["run_dir"]) / "journal", "main")) is None


def test_crash_while_pipelining_is_its_cases_and_nothing_is_lost(tmp_path: Path) -> None:
    code, out, report = fuzz(tmp_path, "--impl", "tests.faulty.abort:impl",
                             "--diagfuzz-seed", "1", "--diagfuzz-budget", "50",
                             "--diagfuzz-dtypes=float32", *ONE_SHARD, *SMALL)
    assert code == 1, out
    assert report["findings"]
    for crash in report["findings"]:
        assert crash["kind"] == "crash" and crash["verdict"]["check"] == "executor:died"
        assert Case.from_json(crash["case"]).offset == 1  # abort.py dies on offset == 1
    records = journal_records(report)
    verdicts = {r["seq"]: r for r in records if r["type"] == "verdict"}
    cases = [r for r in records if r["type"] == "case"]
    # Every Case got its verdict: explored and shrink checks alike.
    assert len(verdicts) == len(cases) == report["cases"] + report["shrink_checks"]
    for record in cases:  # and each crash verdict is its own Case's
        verdict = verdicts[record["seq"]]
        assert verdict["verdict"]["case"] == record["case"]
        assert (verdict["kind"] == "crash") == (Case.from_json(record["case"]).offset == 1)
    # Cases queued behind a crash were run in the replacement executor: passes follow it.
    kinds = [verdicts[r["seq"]]["kind"] for r in cases]
    first_crash = kinds.index("crash")
    assert "pass" in kinds[first_crash + 1:]


def test_a_failure_that_does_not_come_back_is_still_reported(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    monkeypatch.setenv("DIAGFUZZ_FIRST_CALL_MARK", str(tmp_path / "called"))
    code, out, report = fuzz(tmp_path, "--impl", "tests.test_pipeline_suite:first_call_wrong",
                             "--diagfuzz-seed", "1", "--diagfuzz-budget", "120", *ONE_SHARD,
                             *SMALL)
    assert code == 1, out
    (failure,) = report["findings"]
    assert failure["kind"] == "mismatch" and failure["flaky"] and not failure["shrunk"]
    assert "flaky: passed when replayed" in out
    records = journal_records(report)
    cases = {r["seq"]: r["case"] for r in records if r["type"] == "case"}
    (wrong,) = [r for r in records if r["type"] == "verdict" and r["kind"] != "pass"]
    assert failure["case"] == cases[wrong["seq"]]  # the unshrunk Case phase 1 saw fail
