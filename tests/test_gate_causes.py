"""The gate on a library with exactly three causes gives three findings: one per raise site
or bit symptom, whatever dtypes, invalid classes and stages reach it; it says what it is
doing while it runs, saves one corpus Case per cause and says where its time went."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from diagfuzz.core import corpus
from diagfuzz.core.case import Case, Layout, Values

IMPL = "tests.faulty.three_causes:impl"
SIGNED_ZERO = Case("diagonal", (2, 2), 0, 0, 1, "float32", Layout.contiguous((2, 2)),
                   Values(0, "normal", ((0, 0x80000000),)))


def gate(tmp_path: Path, *extra: str, budget: int = 280,
         env: dict[str, str] | None = None) -> tuple[int, str, str, dict]:
    """The gate as a user runs it (a subprocess), on ``IMPL``, from ``tmp_path``."""
    args = [sys.executable, "-m", "diagfuzz", "gate", "--impl", IMPL, "--budget", str(budget),
            "-n", "0", "--timeout", "30", "--repeats", "2", "--no-compile",
            "--no-opinfo", "--no-sequences", "--no-covering",
            "--report", "report.json", "--junit", "junit.xml", *extra]
    environ = dict(env or os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), environ.get("PYTHONPATH", "")])
    environ.setdefault("DIAGFUZZ_PROGRESS_EVERY", "2")
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=False,
                          env=environ, timeout=600)
    report = json.loads((tmp_path / "report.json").read_text())
    return proc.returncode, proc.stdout, proc.stderr, report


def test_one_finding_per_cause_over_dtypes_classes_and_stages(tmp_path: Path) -> None:
    corpus.save(SIGNED_ZERO, tmp_path / "corpus")  # a cause the corpus replay meets too
    code, out, err, report = gate(tmp_path)
    assert code == 1, out + err
    # A raise site is keyed without its op (one fix, whichever op reached it): its ops are
    # counted inside the finding.
    found = {(f["signature"]["op"] or "+".join(sorted(f["classes"]["op"])),
              f["signature"]["trigger"]): f for f in report["findings"]}
    assert sorted(found) == [("diag_embed", "raised AssertionError"),
                             ("diagonal", "wrong values"),
                             ("diagonal_backward", "raised NotImplementedError")], out
    # Two raise sites of one file: two findings, each keyed on its own line.
    embed = found["diag_embed", "raised AssertionError"]
    backward = found["diagonal_backward", "raised NotImplementedError"]
    assert embed["signature"]["origin"].startswith("tests/faulty/three_causes.py:")
    assert embed["signature"]["origin"].endswith(" in diag_embed")
    assert backward["signature"]["origin"].endswith(" in diagonal_backward")
    # The assert, met by the suite and by the error-parity stage, in several invalid
    # classes, where aten raises two exception types: one finding that lists them all.
    assert set(embed["stages"]) == {"fuzz suite", "error parity"}
    assert len(embed["classes"]["invalid class"]) >= 3
    assert set(embed["classes"]["aten raises"]) == {"IndexError", "RuntimeError"}
    assert len(embed["dtypes"]) >= 3
    zero = found["diagonal", "wrong values"]
    assert set(zero["classes"]["symptom"]) == {"signed-zero"}
    assert "corpus replay" in zero["stages"]
    # Each cause classified once, in one fresh process (they agreed: no second one).
    for f in report["findings"]:
        assert f["classification"]["label"] == "deterministic"
        assert f["classification"]["processes"] == 1
    # Never silent: stage lines, and the ticker's counts of Cases and findings.
    for line in ("fuzz suite: started", "error parity: started", "fuzz suite: ",
                 "classification: 3 of 3 findings"):
        assert line in err, err
    assert " Cases · " in err and "so far" in err
    # One corpus Case per cause, named by the cause; the corpus's own Case is not saved
    # again (that cause is in the corpus already).
    saved = sorted(p.name for p in (tmp_path / "corpus").glob("*.json"))
    assert len(saved) == 3 and len(report["saved_to_corpus"]) == 2, saved
    # Where the time went, per group of stages.
    timing = report["timing"]
    assert timing["executors"]["fuzz suite"]["first_calls"] >= 1
    assert timing["stages_s"]["fuzz suite"] > 0
    assert "Where the time went" in out
    # A second run saves nothing new: every cause is in the corpus.
    code2, _, _, report2 = gate(tmp_path, "--no-suite")
    assert code2 == 1 and report2["saved_to_corpus"] == []
    assert len(list((tmp_path / "corpus").glob("*.json"))) == 3
