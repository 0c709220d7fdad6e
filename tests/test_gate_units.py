"""Gate pieces without subprocesses: exit-code rule, suite report parsing, fixed Case sets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from diagfuzz import gate, gate_report
from diagfuzz.classify import Classification
from diagfuzz.gate import Finding, Result, Stage, exit_code
from diagfuzz.verdict import Verdict
from tests.faulty.cases import square


def _finding(failures: int, runs: int = 5) -> Finding:
    v = Verdict("mismatch", "bitwise:aten", "bits differ", square(1))
    return Finding("fuzz suite", v, classification=Classification(
        square(1), "mismatch", runs, failures, {"mismatch": failures, "pass": runs - failures}))


def test_exit_codes() -> None:
    clean = [Stage("a", ran=3)]
    assert exit_code(clean, []) == gate.EXIT_CLEAN
    assert exit_code(clean, [_finding(2)]) == gate.EXIT_FLAKY
    assert exit_code(clean, [_finding(2), _finding(5)]) == gate.EXIT_FAILURE
    unclassified = Finding("fuzz suite", Verdict("crash", case=square(0)))
    assert exit_code(clean, [unclassified]) == gate.EXIT_FAILURE
    assert exit_code([Stage("a", error="pytest exited 4")], [_finding(5)]) == gate.EXIT_ERROR


def test_suite_findings_reads_the_plugin_report() -> None:
    report = {"cases": 30, "failures": [
        {"test_id": "suite.py::test_diagonal[shard0]", "kind": "mismatch",
         "check": "bitwise:aten", "message": "m", "case": {**_case_dict()}, "details": {}},
        {"test_id": "suite.py::test_invalid[shard1]", "kind": "harness-error", "case": None},
    ]}
    ran, findings, unattributed = gate.suite_findings(report)
    assert ran == 30 and len(findings) == 1 and findings[0].verdict.case == square(1)
    assert findings[0].test_id.endswith("[shard0]")
    assert unattributed == ["harness-error in suite.py::test_invalid[shard1]: "]
    coverage = gate.report_coverage({"diagonal": {"cases": 3, "classes": {"dtype": {
        "float32": 3}}}, "invalid": {"cases": 2, "classes": {"dtype": {"float32": 1}}}})
    assert coverage["group"] == Counter(diagonal=3, invalid=2)
    assert coverage["dtype"] == Counter(float32=4)


def _case_dict() -> dict:
    import json

    return json.loads(square(1).to_json())


def test_suite_command_uses_the_plugin_options(tmp_path) -> None:
    opts = gate.Options(impl="m:a", budget=60, workers="3", timeout=9.0, out_dir=tmp_path)
    command = gate.suite_command(opts, tmp_path / "r.json")
    joined = " ".join(command)
    for part in ("-p diagfuzz", "--pyargs diagfuzz.suite", "--hypothesis-profile gate",
                 "-n 3", "--impl m:a", "--diagfuzz-budget 60", "--diagfuzz-timeout 9.0",
                 f"--diagfuzz-report {tmp_path / 'r.json'}", "--diagfuzz-isolation process"):
        assert part in joined
    assert "--diagfuzz-budget" not in gate.suite_command(
        gate.Options(budget=None, out_dir=tmp_path), tmp_path / "r.json")


def test_suite_environment_drops_the_xdist_worker_identity(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "abc")
    monkeypatch.setenv("DIAGFUZZ_SOMETHING", "kept")
    env = gate.suite_environment(gate.Options(out_dir=tmp_path))
    assert not [k for k in env if k.startswith("PYTEST_XDIST")]
    assert env["DIAGFUZZ_SOMETHING"] == "kept" and str(Path.cwd()) in env["PYTHONPATH"]


def test_fixed_case_sets_cover_every_invalid_class() -> None:
    from diagfuzz.strategies._invalid import INVALID_CLASSES

    cases = gate.error_parity_cases()
    assert {c.invalid for c in cases} == set(INVALID_CLASSES)
    assert all(not c.invalid for c in gate.compile_cases())


def test_markdown_lists_each_failure_with_its_command(tmp_path) -> None:
    finding = _finding(2)
    finding.reproducer = tmp_path / "repro_x.py"
    result = Result(gate.EXIT_FLAKY, [Stage("fuzz suite", ran=10, failures=[finding])],
                    [finding], "m:a", "cpu", 1.5)
    text = gate_report.markdown(result)
    assert "FLAKY" in text and "flaky 2/5" in text and "(re-runs: mismatch 2, pass 3)" in text
    assert f"diagfuzz repro {tmp_path / 'repro_x.py'}" in text
    assert gate_report.to_json(result)["findings"][0]["classification"]["ratio"] == "2/5"
