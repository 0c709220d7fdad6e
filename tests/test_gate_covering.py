"""The gate's covering stage and t-way coverage in its outputs, without subprocesses.

The summary, JSON report and --plan give each op's 2-way, 3-way and core 4-way coverage of
the judged Cases and name combinations never reached; a PASS in which a stage could not
run names it in its headline and in the JUnit file.
"""

from __future__ import annotations

import re
from collections import Counter

from diagfuzz.core.exits import ExitCode
from diagfuzz.gate import Result, Stage
from diagfuzz.gate import outputs as gate_report
from diagfuzz.gate.options import Options
from diagfuzz.gate.plan import plan_lines
from diagfuzz.gate.stages import COVERING_STAGE, covering_for, report_levels
from diagfuzz.harness.report import Tally, levels_row
from diagfuzz.strategies.covering import covering_set


def _levels(cases) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for case in cases:
        out.setdefault(case.op, Counter())[levels_row(case)] += 1
    return out


def _result(stages: list[Stage], code: int = ExitCode.CLEAN) -> Result:
    return Result(code, stages, [], "m:a", "cpu", 3.0)


def test_summary_and_json_give_full_coverage_of_the_covering_cases() -> None:
    cases = covering_set("diag").cases
    stages = [Stage(COVERING_STAGE, ran=len(cases), levels=_levels(cases))]
    text = gate_report.markdown(_result(stages))
    assert ("**Combinations covered** (every op's factor model, docs/coverage.md): 2-way "
            "100.0%, 3-way 100.0%, core 3-way 100.0%") in text
    assert "diag: 2-way 100.0% (532/532), 3-way 100.0%" in text
    data = gate_report.to_json(_result(stages))
    found = data["combinations"]["all stages"]["diag"]
    assert found["2"]["share"] == found["3"]["share"] == 1.0 and found["3"]["missing"] == []
    assert data["combinations"]["fuzz suite"] == {}


def test_fewer_cases_name_the_lowest_op_and_what_was_never_reached() -> None:
    cases = covering_set("diag").cases[:40]
    stages = [Stage("fuzz suite", ran=40, levels=_levels(cases))]
    text = gate_report.markdown(_result(stages))
    assert "(lowest: diag)" in text and "never reached:" in text
    data = gate_report.to_json(_result(stages))
    three = data["combinations"]["fuzz suite"]["diag"]["3"]
    assert three["share"] < 1.0 and len(three["missing"]) == 3
    assert all(len(combo) == 3 for combo in three["missing"])


def test_suite_report_levels_round_trip_through_the_tally() -> None:
    tally = Tally()
    for case in covering_set("diag_1d").cases[:5]:
        tally.add(case, failed=False)
    other = Tally.from_dict(tally.to_dict())
    assert other.levels == tally.levels
    counts = other.to_dict()
    assert sum(report_levels(counts)["diag_1d"].values()) == 5


def test_a_pass_that_ran_less_says_so_in_its_headline_and_junit() -> None:
    stages = [Stage("corpus replay", ran=4),
              Stage("opinfo samples", skipped="torch.testing._internal does not import"),
              Stage("torch.compile parity", skipped="--no-compile")]
    result = _result(stages)
    text = gate_report.markdown(result)
    assert text.splitlines()[0] == ("## diagfuzz gate: PASSED — NOT RUN: opinfo samples "
                                    "(exit 0)")
    assert gate_report.to_json(result)["not_run"] == {
        "opinfo samples": "torch.testing._internal does not import"}
    root = gate_report.junit(result).getroot()
    gate_suite = [s for s in root if s.get("name") == "gate"]
    assert gate_suite and gate_suite[0].get("skipped") == "1"
    skipped = gate_suite[0].find("testcase/skipped")
    assert skipped is not None and "opinfo samples" in skipped.get("message", "")
    # Only options left out: a plain PASSED, no gate testsuite.
    asked = _result([Stage("corpus replay", ran=4), Stage("b", skipped="--no-opinfo")])
    assert gate_report.markdown(asked).startswith("## diagfuzz gate: PASSED (exit 0)")
    assert not [s for s in gate_report.junit(asked).getroot() if s.get("name") == "gate"]


def test_covering_stage_cases_follow_ops_and_dtypes() -> None:
    opts = Options(ops="diag", dtypes="float32,int64")
    cases = covering_for(opts, ("diag", "diagonal"))
    assert cases and {c.op for c in cases} == {"diag"}
    assert {c.dtype for c in cases} <= {"float32", "int64"}
    assert covering_for(Options(covering=False), None)  # the plan/stage decide, not this
    # The covering lines of the plan (its OpInfo line, which loads PyTorch's samples, off).
    lines = plan_lines(Options(impl="diagfuzz.impl:aten_with_out", ops="diag", opinfo=False))
    assert any(line.startswith(f"  {COVERING_STAGE}") and "296 Cases (diag 296)" in line
               for line in lines), lines
    assert any("diag: 2-way 100%, 3-way 100%, core 3-way 100%" in line for line in lines)
    off = plan_lines(Options(impl="diagfuzz.impl:aten_with_out", ops="diag",
                             covering=False, opinfo=False))
    assert f"  {COVERING_STAGE}       skipped (--no-covering)" in off


def test_the_plans_coverage_is_measured_on_the_model_the_impl_can_take() -> None:
    """``--plan`` and the run's summary measure one narrowed model: an adapter without
    ``.out`` methods reaches every combination that applies to it, and the plan names
    ``call=out`` as not applicable instead of showing shares below 100 %."""
    lines = plan_lines(Options(impl="diagfuzz.impl:aten", suite=False, opinfo=False,
                               compile_sample=False))
    covering = "\n".join(line for line in lines if line.startswith("   ")
                         and ("-way" in line or "not applicable" in line))
    assert "-way" in covering and "%" in covering, lines
    assert all(share == "100%" for share in re.findall(r"\d+%", covering)), covering
    assert "diag_embed: call=out" in covering, covering
