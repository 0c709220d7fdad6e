"""``diagfuzz gate`` end to end: exit 0 clean, 1 deterministic, 2 only flaky, 4 an impl that
does not import.

Small budgets keep each run to seconds of fuzzing; what costs time is process start-up
(pytest, the executors, fresh processes for each re-run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from diagfuzz.core import corpus
from diagfuzz.core.exits import ExitCode
from diagfuzz.gate import compile_cases, error_parity_cases
from diagfuzz.gate.cli import main
from diagfuzz.gate.stages import OPINFO_STAGE
from diagfuzz.strategies import opinfo
from diagfuzz.strategies.covering import covering_cases
from tests.faulty.cases import square


def _gate(tmp_path: Path, impl: str, *extra: str, env: dict[str, str] | None = None,
          budget: int = 48, opinfo: bool = False) -> tuple[int, str, dict, Path]:
    """Run the gate as a user would (the console entry point, in a subprocess)."""
    out = tmp_path / "out"
    args = [sys.executable, "-c", "import sys; from diagfuzz.gate.cli import main; "
            "sys.exit(main())", "gate", "--impl", impl, "--budget", str(budget), "-n", "0",
            "--timeout", "20", "--repeats", "3", "--corpus", str(tmp_path / "corpus"),
            "--out", str(out), "--report", str(tmp_path / "report.json"),
            "--junit", str(tmp_path / "junit.xml"), "--summary", str(tmp_path / "s.md"),
            *extra]
    if not opinfo:  # only the test of every stage judges the OpInfo and covering Cases
        args += ["--no-opinfo", "--no-sequences", "--no-covering"]
    proc = subprocess.run(args, capture_output=True, text=True, check=False,
                          env=env or dict(os.environ))
    report = json.loads((tmp_path / "report.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, report, out


def test_correct_impl_passes_every_stage(tmp_path: Path) -> None:
    corpus.save(square(1), tmp_path / "corpus")  # replayed first
    code, output, report, _ = _gate(tmp_path, "diagfuzz.impl:triton_aten", budget=24,
                                    opinfo=True)
    assert code == 0, output
    stages = {s["name"]: s for s in report["stages"]}
    assert list(stages) == ["corpus replay", "covering array", "fuzz suite", "error parity",
                            "sequence search", OPINFO_STAGE, "torch.compile parity",
                            "registration audit", "classification"]
    assert stages["sequence search"]["cases"] > 0
    assert stages["registration audit"]["cases"] > 0  # diagfuzz's own registration
    assert stages["covering array"]["cases"] == len(covering_cases())
    assert report["combinations"]["all stages"]["diagonal"]["3"]["share"] == 1.0
    assert stages["corpus replay"]["cases"] == 1
    assert stages["fuzz suite"]["cases"] >= 24
    # One error Case per invalid class of every op, and every op's compile sample.
    assert stages["error parity"]["cases"] == len(error_parity_cases())
    assert stages["torch.compile parity"]["cases"] == len(compile_cases())
    # Every OpInfo sample and error input (judged where op_db imports: the dev extra).
    samples = opinfo.load("cpu")
    assert stages[OPINFO_STAGE]["cases"] == len(samples.cases) or samples.skipped
    assert all(s["failures"] == 0 and not s["error"] for s in stages.values())
    assert report["findings"] == [] and "PASSED" in output
    assert set(report["coverage"]) >= {"group", "dtype", "layout", "invalid"}
    suites = ET.parse(tmp_path / "junit.xml").getroot()
    assert [s.get("name") for s in suites] == list(stages)
    assert all(s.get("failures") == "0" for s in suites)


def test_deterministic_bug_exits_1_with_a_failing_reproducer(tmp_path: Path) -> None:
    code, output, report, out = _gate(tmp_path, "tests.faulty.wrong:impl", "--no-compile")
    assert code == 1, output
    findings = report["findings"]
    assert findings and all(f["classification"]["label"] == "deterministic" for f in findings)
    assert {f["stage"] for f in findings} == {"fuzz suite"}
    assert all(f["classification"]["ratio"] == "3/3" for f in findings)
    summary = (tmp_path / "s.md").read_text()
    for f in findings:
        assert f["reproduce"] in summary and "deterministic 3/3" in summary
    # Each failure went to the corpus, and its reproducer fails while the bug is there.
    assert len(corpus.load(tmp_path / "corpus")) == len(findings)
    script = Path(findings[0]["reproducer"])
    run_dir = Path(report["run_dir"])
    assert script.parent == run_dir / "repro" and run_dir.parent == out
    assert (out / "latest").resolve() == run_dir.resolve()
    assert f"Reproducers of this run: `{run_dir / 'repro'}/`" in output
    assert "new Case(s) to" in output and "--no-save" in output
    broken = subprocess.run([sys.executable, str(script), "--in-process"],
                            capture_output=True, text=True, check=False)
    assert broken.returncode == 1 and "mismatch" in broken.stdout
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert sum(int(s.get("failures")) for s in junit) == len(findings)
    # The same code and seed give the same verdict: the next run replays the corpus first.
    code2, _, report2, _ = _gate(tmp_path, "tests.faulty.wrong:impl", "--no-compile",
                                 "--no-suite", "--repeats", "1")
    assert code2 == 1
    assert {f["case_id"] for f in report2["findings"]} == {f["case_id"] for f in findings}
    assert {f["stage"] for f in report2["findings"]} == {"corpus replay"}


def test_flaky_bug_exits_2_with_k_of_r(tmp_path: Path) -> None:
    # One call in three flips a bit, drawn from the OS: whatever sequence a finding is
    # measured on, its outcome varies. (8 re-runs: one process's all failing by chance,
    # 3**-8, would read deterministic.)
    code, output, report, _ = _gate(tmp_path, "tests.faulty.flaky:impl", "--no-compile",
                                    "--repeats", "8", budget=24)
    assert code == 2, output
    labels = {f["classification"]["label"] for f in report["findings"]}
    assert labels == {"flaky"}
    # Measured on 16 runs of one sequence each (the Case alone in two processes, or the
    # sequence its first failure suggested, replayed 16 times), never a story of history.
    assert {f["classification"]["runs"] for f in report["findings"]} == {16}
    assert all(f["classification"]["failures"] < 16 for f in report["findings"])
    assert all(f["classification"]["history"] in ("", "not reproduced after its history")
               for f in report["findings"])
    assert "FLAKY" in output and "Steps leading up" not in output
    # Each reproducer, run as printed, repeats as often as the label's ratio counts.
    assert all("REPEAT = 16\n" in Path(f["reproducer"]).read_text()
               for f in report["findings"])


def test_an_impl_without_any_op_is_a_usage_error_with_no_stage_rows(tmp_path: Path) -> None:
    """The suite starts before the gate loads the impl; an impl that turns out to provide
    no op stops it, and the summary says the usage error, not a suite that ran nothing."""
    code, output, report, _ = _gate(tmp_path, "tests.faulty.cases")
    assert code == ExitCode.USAGE == 4, output
    assert "provides none of the ops" in report["error"]
    assert report["stages"] == [], report["stages"]
    summary = (tmp_path / "s.md").read_text()
    assert "USAGE ERROR" in summary and "| fuzz suite" not in summary
    assert "**Not run:**" not in summary, summary


def test_an_impl_that_does_not_import_is_a_usage_error(tmp_path: Path, capsys) -> None:
    code = main(["gate", "--impl", "tests.faulty.no_such_module:impl", "--corpus",
                 str(tmp_path / "c"), "--out", str(tmp_path / "o"),
                 "--report", str(tmp_path / "r.json"), "--junit", str(tmp_path / "j.xml")])
    assert code == ExitCode.USAGE == 4
    assert "no_such_module" in capsys.readouterr().out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit_code"] == 4 and "no_such_module" in report["error"]
    assert ET.parse(tmp_path / "j.xml").getroot()[0].get("errors") == "1"
