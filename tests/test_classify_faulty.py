"""Classification over fresh processes: crash and hang deterministic, 1-in-3 wrong flaky."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagfuzz import oracles
from diagfuzz.core.case import Case, Layout
from diagfuzz.core.corpus import case_id
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.classification import Classifier, Rerun, classify
from diagfuzz.execution.history import Call
from diagfuzz.execution.messages import WARM_UP_ENV
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import Calibration, KnownFaults
from tests.faulty import three_causes
from tests.faulty.cases import square

TIMEOUT = 3.0


def test_abort_is_a_deterministic_crash(tmp_path: Path) -> None:
    c = classify(Verdict("crash", "executor:died", "", square(1)), "tests.faulty.abort:impl",
                 "cpu", repeats=3, timeout=30, workdir=tmp_path)
    assert (c.label, c.ratio, c.kinds) == ("deterministic", "3/3", {"crash": 3})
    assert c.example is not None and c.example.kind == "crash"
    # Each re-run logged its dying executor's stack in its own directory.
    assert "Aborted" in c.example.details["stderr_tail"]
    assert len(list(tmp_path.glob("*/*/executor.log"))) == 3


def test_hang_is_a_deterministic_hang() -> None:
    c = classify(Verdict("hang", "executor:timeout", "", square(-1)), "tests.faulty.hang:impl",
                 "cpu", repeats=3, timeout=TIMEOUT)
    assert (c.label, c.ratio) == ("deterministic", "3/3")


def test_wrong_one_time_in_three_is_flaky_with_k(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Every third impl call (counted across processes) is wrong: calls 1, 2 pass, 3 fails.
    monkeypatch.setenv("DIAGFUZZ_FAULTY_COUNTER", str(tmp_path / "calls"))
    with ProcessRunner("tests.faulty.flaky:impl", "cpu", timeout=30) as runner:
        verdicts = [runner.run(square(0)) for _ in range(3)]
    assert [v.kind for v in verdicts] == ["pass", "pass", "mismatch"]
    c = classify(verdicts[2], "tests.faulty.flaky:impl", "cpu", repeats=5, timeout=30)
    # Re-runs are calls 4..8 in one fresh process: call 6, its third, is wrong, so the
    # sequence measured is the Case three times in a fresh executor, replayed ten times side
    # by side: which of their calls the counter makes wrong varies from replay to replay.
    assert (c.label, c.runs, c.processes) == ("flaky", 10, 11)
    assert c.sequence == (Call("check", square(0)),) * 2 and 0 <= c.failures < 10
    assert c.kinds.get("pass", 0) > 0
    assert c.to_dict()["label"] == "flaky"


def test_spares_launched_before_classifying_take_the_reruns_and_judge_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The counted 1-in-3 impl: a spare that called the impl while it waited would shift
    # which re-runs are wrong, and so the ratio.
    monkeypatch.setenv("DIAGFUZZ_FAULTY_COUNTER", str(tmp_path / "calls"))
    monkeypatch.setenv(WARM_UP_ENV, "0")  # as the gate launches them
    with ProcessRunner("tests.faulty.flaky:impl", "cpu", timeout=30) as runner:
        verdicts = [runner.run(square(0)) for _ in range(3)]
    classifier = Classifier(Rerun("tests.faulty.flaky:impl", "cpu", 30.0,
                                  workdir=tmp_path / "classify"), repeats=5)
    classifier.prepare(1)
    classifier.prepare(3)  # up to three in all, not four
    spares = list(classifier._spares)
    assert len(spares) == 3 and all(r.pid is not None for r in spares)
    found = classifier.classify_all([(verdicts[2], "check", 30.0)])
    c = found[0]
    assert c is not None
    assert (c.label, c.runs, c.processes) == ("flaky", 10, 11)
    # The first fresh executor was the first spare (the Case's five re-runs), the replays
    # of the sequence it found took the other two, then executors of their own.
    judged = "[diagfuzz-executor: case 4]"
    first = (tmp_path / "classify" / "spare-0" / "executor.log").read_text()
    assert judged in first and f"re-runs of Case {case_id(square(0))}" in first
    for spare in ("spare-1", "spare-2"):
        assert "[diagfuzz-executor: case 2]" in (
            tmp_path / "classify" / spare / "executor.log").read_text()
    assert not list((tmp_path / "classify").glob("*/0"))  # no executor started at the re-run
    assert all(r.pid is None or r._proc.poll() is not None  # type: ignore[union-attr]
               for r in spares)


@pytest.mark.parametrize("spare", [True, False], ids=["spare", "started-for-it"])
def test_an_error_of_an_op_with_a_confirmed_hang_is_no_hang_in_its_cold_reruns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spare: bool) -> None:
    # The run confirmed a hang of diag_embed, and its warm executors' first calls took 20
    # ms: a known hang's Case may stall 0.2 s there. A fresh executor's first diag_embed
    # call loads for 1 s. The finding is the assert's error, which answered in the run:
    # its re-runs say so, from one executor, not "hang 3/3" from three.
    monkeypatch.setenv(WARM_UP_ENV, "0")  # as the gate launches them
    case = Case("diag_embed", (3, 4), 0, 0, 0, "float32", Layout.contiguous((3, 4)),
                invalid="same_dims")
    claimed = oracles.check(case, three_causes.impl, "cpu")
    assert claimed.kind == "error-parity"
    learnt = (Calibration(), KnownFaults())
    learnt[0].observe("check", [case], 0.02, first=True)
    learnt[1].add("diag_embed", "hang")
    classifier = Classifier(Rerun("tests.faulty.cold_first_call:impl", "cpu", 30.0,
                                  learnt=learnt, workdir=tmp_path / "classify"), repeats=3)
    if spare:
        classifier.prepare(1)
    [c] = classifier.classify_all([(claimed, "check", 30.0)])
    assert c is not None
    assert (c.label, c.ratio, c.kinds, c.processes) == (
        "deterministic", "3/3", {"error-parity": 3}, 1)
    assert learnt[1].items() == ["diag_embed hang"]  # the run's own faults, untouched


def test_a_stopped_classifier_launches_no_spare(tmp_path: Path) -> None:
    classifier = Classifier(Rerun("diagfuzz.impl:aten", "cpu", workdir=tmp_path))
    classifier.stop()
    classifier.prepare(2)
    assert classifier._spares == [] and not list(tmp_path.iterdir())


def test_classify_rejects_what_cannot_be_rerun() -> None:
    with pytest.raises(ValueError, match="no Case"):
        classify(Verdict("crash"), "diagfuzz.impl:aten")
    with pytest.raises(ValueError, match="pass"):
        classify(Verdict.passed(square(0)), "diagfuzz.impl:aten")
    with pytest.raises(ValueError, match="repeats"):
        classify(Verdict("crash", case=square(0)), "diagfuzz.impl:aten", repeats=0)
