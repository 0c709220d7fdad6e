"""``diagfuzz merge`` on made-up reports: the checks, the sums and the verdict of each
kind of input (fuzz-suite partitions, their JUnit files, gate reports)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from diagfuzz import gate
from diagfuzz.core.case import Case, Layout
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.classification import Classification
from diagfuzz.gate import outputs as gate_report
from diagfuzz.harness.findings import Finding, merge_findings
from diagfuzz.harness.report import Pace, Tally, report_data
from diagfuzz.harness.sharding import RunPlan
from tests.campaign_runs import merge


def _case(offset: int = 1, dtype: str = "float32", sizes: tuple[int, ...] = (2, 3)) -> Case:
    return Case("diagonal", sizes, offset, 0, 1, dtype, Layout.contiguous(sizes))


def _finding(dtype: str = "float32", test: str = "test_diagonal[shard0]",
             shrunk: bool = True) -> Finding:
    found = Finding.of(Verdict("mismatch", "bitwise:aten", "1 of 2 elements differ",
                               _case(dtype=dtype)), f"diagfuzz/suite.py::{test}")
    found.shrunk = shrunk
    return found


def _report(index: int, count: int = 2, *, findings: tuple[Finding, ...] = (),
            cut: bool = False, exit_status: int | None = None, seed: int = 4,
            cases: int = 10, **header: Any) -> dict[str, Any]:
    plan = RunPlan(seed, "m:a", "ci", 2, 10, 256, "inprocess", None,
                   f"/runs/run-{seed}-part{index}of{count}", 1, partition=index,
                   partitions=count)
    tally = Tally()
    for n in range(cases):
        tally.add(_case(offset=n % 3), failed=n < sum(f.count for f in findings))
    tally.on_gpu("0")  # each partition's worker on its host's GPU 0
    pace = Pace()
    pace.add("main", cases, 2.0, "0")
    status = exit_status if exit_status is not None else 1 if findings else 6 if cut else 0
    return report_data({**plan.to_dict(), "exit_status": status, "duration_s": 3.0 + index,
                        "cut": cut, "shrink_checks": 5, "pace": pace.to_dict(3.0),
                        "database": None, **header}, tally, list(findings))


def _write(tmp_path: Path, *reports: dict[str, Any]) -> list[str]:
    paths = []
    for n, data in enumerate(reports):
        path = tmp_path / f"part{n}.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    return paths


def test_clean_partitions_sum_up_and_exit_0(tmp_path: Path) -> None:
    out_json = tmp_path / "merged.json"
    code, out = merge(*_write(tmp_path, _report(1), _report(2, cases=7)),
                      f"--report={out_json}")
    assert code == 0, out
    merged = json.loads(out_json.read_text())
    assert merged["cases"] == 17 and merged["exit_status"] == 0
    assert merged["partition"] is None and merged["partitions"] == 2
    assert merged["counts"]["diagonal"]["cases"] == 17
    assert set(merged["pace"]["workers"]) == {"p1/main", "p2/main"}
    # Each partition's GPU 0 is another machine's: kept apart, each with its share.
    assert merged["pace"]["gpus"] == {"p1/0": {"workers": 1, "cases": 10, "cases_per_s": 5.0},
                                      "p2/0": {"workers": 1, "cases": 7, "cases_per_s": 3.5}}
    assert "per GPU: p1/0 10 Cases at 5/s (1 worker), p2/0 7 Cases at 4/s (1 worker)" in out
    assert merged["coverage"]["gpu"] == {"p1/0": 10, "p2/0": 7}
    assert merged["duration_s"] == 5.0 and merged["shrink_checks"] == 10
    assert merged["merged"]["missing"] == [] and not merged["merged"]["partial"]
    assert "diagfuzz: 0 findings (0 failing Cases of 17; seed 4, impl m:a)" in out
    assert "verdict: exit 0 (clean)" in out


def test_findings_merge_by_signature_and_exit_1(tmp_path: Path) -> None:
    one, two = _finding(test="test_diagonal[shard0]"), _finding(test="test_diagonal[shard1]")
    two.count = 3
    code, out = merge(*_write(tmp_path, _report(1, findings=(one,)),
                              _report(2, findings=(two,))),
                      f"--report={tmp_path / 'm.json'}")
    assert code == 1, out
    (merged,) = json.loads((tmp_path / "m.json").read_text())["findings"]
    assert merged["count"] == 4 and len(merged["test_ids"]) == 2
    assert "[1/1] diagonal · mismatch · bitwise" in out
    assert Path(merged["reproducer"]).parent == tmp_path / "m-repro"


def test_partitions_findings_of_one_cause_merge_into_one(tmp_path: Path) -> None:
    # One cause over dtypes: float32 in one partition, int32 and float16 in the other.
    a = [_finding("float32")]
    b = [_finding("int32"), _finding("float16", test="test_diagonal[shard1]")]
    parts = merge_findings(merge_findings(a) + merge_findings(b))
    assert len(parts) == 1 and parts[0].count == 3
    assert parts[0].dtypes == {"float32": 1, "int32": 1, "float16": 1}
    one, two = _report(1, findings=tuple(merge_findings(a))), _report(
        2, findings=tuple(merge_findings(b)))
    one["shard_findings"] = [f.to_dict() for f in a]
    two["shard_findings"] = [f.to_dict() for f in b]
    code, out = merge(*_write(tmp_path, one, two), f"--report={tmp_path / 'm.json'}")
    assert code == 1, out
    merged = json.loads((tmp_path / "m.json").read_text())
    assert "shard_findings" not in merged
    whole = merge_findings(a + b)
    assert [f["case"] for f in merged["findings"]] == [whole[0].to_dict()["case"]]


def test_cut_with_nothing_found_exits_6_a_finding_still_1(tmp_path: Path) -> None:
    code, out = merge(*_write(tmp_path, _report(1, cut=True), _report(2)))
    assert code == 6 and "cut: --diagfuzz-max-seconds ended partition(s) 1" in out, out
    code, out = merge(*_write(tmp_path, _report(1, cut=True),
                              _report(2, findings=(_finding(),))))
    assert code == 1, out


def test_reports_of_another_campaign_or_unfinished_exit_3(tmp_path: Path) -> None:
    code, out = merge(*_write(tmp_path, _report(1), _report(2, seed=5)))
    assert code == 3 and "differ in seed" in out, out
    code, out = merge(*_write(tmp_path, _report(1), _report(2, dtypes={"diagonal": ["int8"]})))
    assert code == 3 and "differ in dtypes" in out, out
    code, out = merge(*_write(tmp_path, _report(1, count=3), _report(2)))
    assert code == 3 and "differ in partitions" in out, out
    code, out = merge(*_write(tmp_path, _report(1), _report(2, exit_status=3)))
    assert code == 3 and "partition 2/2" in out and "did not finish" in out, out
    code, out = merge(*_write(tmp_path, _report(1, count=3), _report(3, count=3)))
    assert code == 3 and "partition(s) 2/3 missing" in out, out


def test_inputs_that_are_no_reports_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[1, 2]")
    (tmp_path / "y.json").write_text("{not json")
    (tmp_path / "z.json").write_text('{"cases": 1}')
    for name, says in (("x.json", "not a diagfuzz report"), ("y.json", "not JSON"),
                       ("z.json", "neither a fuzz-suite report"),
                       ("missing.json", "cannot read it")):
        code, out = merge(str(tmp_path / name))
        assert code == 4 and says in out, (name, out)
    suite_report = _write(tmp_path, _report(1, count=1))[0]
    gate_path = tmp_path / "gate.json"
    gate_path.write_text(json.dumps(gate_report.to_json(_gate_result())))
    code, out = merge(suite_report, str(gate_path))
    assert code == 4 and "do not merge with each other" in out, out
    code, out = merge(suite_report, f"--report={tmp_path}")  # a directory
    assert code == 4 and "is a directory" in out, out


def _junit(path: Path, *names: str, failed: str = "") -> str:
    suite = ET.Element("testsuite", name="pytest", tests=str(len(names)),
                       failures=str(int(bool(failed))), errors="0", skipped="0", time="1.5")
    for name in names:
        case = ET.SubElement(suite, "testcase", classname="diagfuzz.suite", name=name)
        if name == failed:
            ET.SubElement(case, "failure", message="1 finding(s)")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path)
    return str(path)


def test_junit_files_join_and_an_overlap_exits_3(tmp_path: Path) -> None:
    reports = _write(tmp_path, _report(1), _report(2, findings=(_finding(),)))
    one = _junit(tmp_path / "p1.xml", "test_diagonal[shard0]", "test_invalid[shard1]")
    two = _junit(tmp_path / "p2.xml", "test_diagonal[shard1]", failed="test_diagonal[shard1]")
    code, out = merge(*reports, one, two, f"--junit={tmp_path / 'm.xml'}")
    assert code == 1, out
    root = ET.parse(tmp_path / "m.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "0")
    assert [s.get("name") for s in root.iter("testsuite")] == [
        "pytest [p1.xml]", "pytest [p2.xml]", "diagfuzz merge"]
    three = _junit(tmp_path / "p3.xml", "test_diagonal[shard0]")
    code, out = merge(*reports, one, three, f"--junit={tmp_path / 'm.xml'}")
    assert code == 3 and "test_diagonal[shard0] in" in out, out
    root = ET.parse(tmp_path / "m.xml").getroot()
    assert root.get("errors") == "1"
    # Without input files, the findings are the testcases.
    code, _ = merge(*reports, f"--junit={tmp_path / 'f.xml'}")
    root = ET.parse(tmp_path / "f.xml").getroot()
    assert code == 1 and root.get("failures") == "1" and root.get("tests") == "2"


def test_database_fallbacks_are_kept_per_partition(tmp_path: Path) -> None:
    database = {"url": "redis://h:6379/0", "known_replayed": 2, "known_failing": 1,
                "fell_back": True, "fallbacks": [
                    {"worker": "gw1", "op": "save", "error": "ConnectionError: gone",
                     "after_s": 3.5, "local": "/x", "remote_ops": 7}]}
    quiet = {**database, "fell_back": False, "fallbacks": []}
    code, out = merge(*_write(tmp_path, _report(1, database=database),
                              _report(2, database=quiet)), f"--report={tmp_path / 'm.json'}")
    assert code == 0, out
    merged = json.loads((tmp_path / "m.json").read_text())["database"]
    assert merged["known_replayed"] == 4 and merged["fell_back"]
    assert merged["fallbacks"][0]["partition"] == 1
    assert "database: partition 1 gw1 fell back to its local database 3.5 s" in out


# --- gate reports ------------------------------------------------------------------------

def _gate_finding(runs: int | None, failures: int = 0, dtype: str = "float32") -> gate.Finding:
    verdict = Verdict("mismatch", "bitwise:aten", "differs", _case(dtype=dtype))
    found = gate.Finding("fuzz suite", verdict)
    if runs is not None:
        assert verdict.case is not None
        found.classification = Classification(verdict.case, "mismatch", runs, failures,
                                               {"mismatch": failures})
    return found


def _gate_result(*findings: gate.Finding, error: str = "", cut: bool = False) -> gate.Result:
    stages = [gate.Stage("corpus replay", ran=6), gate.Stage(
        "fuzz suite", ran=100, failures=list(findings), cut=cut, error=error)]
    return gate.Result(gate.exit_code(stages, list(findings)), stages, list(findings),
                       "m:a", "cuda", 12.0, cut=cut)


def _gates(tmp_path: Path, *results: gate.Result) -> list[str]:
    paths = []
    for n, result in enumerate(results):
        path = tmp_path / f"gate{n}.json"
        path.write_text(json.dumps(gate_report.to_json(result)))
        paths.append(str(path))
    return paths


def test_gate_reports_merge_under_the_gates_exit_rule(tmp_path: Path) -> None:
    clean = _gate_result()
    flaky, deterministic = _gate_finding(5, 2), _gate_finding(5, 5)
    assert merge(*_gates(tmp_path, clean, clean))[0] == 0
    code, out = merge(*_gates(tmp_path, clean, _gate_result(flaky)),
                      f"--report={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}")
    assert code == 2 and "FLAKY" in out and "merged from 2 gate reports" in out, out
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["exit_code"] == 2 and data["stages"][1]["cases"] == 200
    assert ET.parse(tmp_path / "g.xml").getroot().tag == "testsuites"
    # Deterministic on one machine, flaky on another: deterministic.
    assert merge(*_gates(tmp_path, _gate_result(_gate_finding(5, 1)),
                         _gate_result(deterministic)))[0] == 1
    # Flaky on both: the re-runs add up.
    merge(*_gates(tmp_path, _gate_result(flaky), _gate_result(_gate_finding(5, 1))),
          f"--report={tmp_path / 'g.json'}")
    (finding,) = json.loads((tmp_path / "g.json").read_text())["findings"]
    assert finding["classification"]["ratio"] == "3/10" and finding["count"] == 2
    assert merge(*_gates(tmp_path, clean, _gate_result(_gate_finding(None))))[0] == 1
    assert merge(*_gates(tmp_path, clean, _gate_result(error="pytest exited 3")))[0] == 3
    assert merge(*_gates(tmp_path, clean, _gate_result(cut=True)))[0] == 6
