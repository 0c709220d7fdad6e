"""Classification over fresh processes: crash and hang deterministic, 1-in-3 wrong flaky."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.gate.classification import classify
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
    # Re-runs are calls 4..8 in one fresh process: call 6 is wrong, so they disagree, and
    # a second fresh process runs calls 9..13, of which 9 and 12 are wrong.
    assert (c.label, c.failures, c.runs, c.ratio) == ("flaky", 3, 10, "3/10")
    assert c.kinds == {"mismatch": 3, "pass": 7} and c.processes == 2
    assert c.to_dict()["label"] == "flaky"


def test_classify_rejects_what_cannot_be_rerun() -> None:
    with pytest.raises(ValueError, match="no Case"):
        classify(Verdict("crash"), "diagfuzz.impl:aten")
    with pytest.raises(ValueError, match="pass"):
        classify(Verdict.passed(square(0)), "diagfuzz.impl:aten")
    with pytest.raises(ValueError, match="repeats"):
        classify(Verdict("crash", case=square(0)), "diagfuzz.impl:aten", repeats=0)
