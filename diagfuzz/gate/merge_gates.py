"""``diagfuzz merge`` of gate reports: several machines' gates as one gate verdict.

The gate's ``--report`` JSON carries its stages and its distinct findings, each classified
by re-runs (deterministic R/R, flaky k/R). Merged, they are one gate result decided by the
gate's own rule (``gate.exit_code``, codes of ``diagfuzz.core.exits``), and written
with the gate's own outputs (``gate_report``).

Stages of one name add up their Cases; a stage that erred anywhere errs. Findings merge by
signature, counts added; a signature deterministic on any machine is deterministic (a
machine where it reproduces every time is enough), else an unclassified one stays
unclassified, else the flaky re-runs add up (k/R over every machine). Gate reports carry no
seed or partition: the merge checks only that they judge one impl.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from diagfuzz.core.exits import ExitCode


def _classification(data: dict[str, Any] | None, case: Any) -> Any:
    from diagfuzz.execution.classification import Classification

    if not data:
        return None
    return Classification(case, str(data["kind"]), int(data["runs"]), int(data["failures"]),
                          dict(data.get("kinds", {})))


def _finding(data: dict[str, Any]) -> Any:
    from diagfuzz.core.signature import Signature
    from diagfuzz.core.verdict import Verdict
    from diagfuzz.gate import Finding

    verdict = Verdict.from_json(data["verdict"])
    return Finding(str(data.get("stage", "")), verdict, str(data.get("oracle", "check")),
                   str(data.get("test_id", "")),
                   _classification(data.get("classification"), verdict.case),
                   Path(data["reproducer"]) if data.get("reproducer") else None,
                   int(data.get("count", 1)), dict(data.get("dtypes", {})),
                   bool(data.get("shrunk")), bool(data.get("flaky_in_suite")),
                   Signature.from_dict(data["signature"]),
                   {str(a): dict(v) for a, v in dict(data.get("classes", {})).items()},
                   dict(data.get("stages", {})), bool(data.get("cut")),
                   {str(k): dict(v) for k, v in dict(data.get("examples") or {}).items()})


def _combine(kept: Any, other: Any) -> None:
    """Add ``other`` (same signature) to ``kept``: counts, and the classification rule."""
    from diagfuzz.execution.classification import Classification

    kept.absorb(other)
    mine, theirs = kept.classification, other.classification
    if mine is None or mine.deterministic:
        return
    if theirs is None or theirs.deterministic:
        kept.classification = theirs
        return
    kept.classification = Classification(
        mine.case, mine.kind, mine.runs + theirs.runs, mine.failures + theirs.failures,
        dict(Counter(mine.kinds) + Counter(theirs.kinds)))


def merge_gates(reports: Sequence[tuple[Path, dict[str, Any]]]) -> tuple[Any, list[str]]:
    """(the merged ``gate.Result``, problems that make it exit 3)."""
    from diagfuzz import gate

    errors: list[str] = []
    impls = list(dict.fromkeys(str(d.get("impl")) for _, d in reports))
    if len(impls) > 1:
        errors.append("not one gate: the reports judge different impls "
                      f"({', '.join(impls)})")
    for path, data in reports:
        if data.get("error"):
            errors.append(f"{path}: the gate could not run: {data['error']}")
    stages: dict[str, gate.Stage] = {}
    skipped: Counter[str] = Counter()
    for path, data in reports:
        for entry in data.get("stages", []):
            stage = stages.setdefault(entry["name"], gate.Stage(entry["name"]))
            stage.ran += int(entry.get("cases", 0))
            stage.unsupported += int(entry.get("unsupported", 0))
            stage.seconds = max(stage.seconds, float(entry.get("seconds", 0.0)))
            stage.cut = stage.cut or bool(entry.get("cut"))
            if entry.get("error"):
                stage.error = "\n".join(filter(None, [stage.error,
                                                      f"{path}: {entry['error']}"]))
            if entry.get("skipped"):
                skipped[entry["name"]] += 1
                stage.skipped = stage.skipped or str(entry["skipped"])
            if entry.get("note") and entry["note"] not in stage.note:
                stage.note = "; ".join(filter(None, [stage.note, str(entry["note"])]))
    for name, stage in stages.items():
        if skipped[name] < sum(any(e["name"] == name for e in d.get("stages", []))
                               for _, d in reports):
            stage.skipped = ""  # it ran somewhere
    merged: dict[Any, Any] = {}
    for _, data in reports:
        for entry in data.get("findings", []):
            finding = _finding(entry)
            if finding.key in merged:
                _combine(merged[finding.key], finding)
            else:
                merged[finding.key] = finding
    findings = list(merged.values())
    for stage in stages.values():
        stage.failures = [f for f in findings if f.stage == stage.name]
    if stages:  # coverage lives on stages; the reports' totals go on the first
        first = next(iter(stages.values()))
        for _, data in reports:
            for axis, counts in (data.get("coverage") or {}).items():
                first.coverage.setdefault(axis, Counter()).update(counts)
    stage_list = list(stages.values())
    code = ExitCode.ERROR if errors else gate.exit_code(stage_list, findings)
    devices = ", ".join(dict.fromkeys(str(d.get("device")) for _, d in reports))
    result = gate.Result(code, stage_list, findings, impls[0], devices,
                         max(float(d.get("seconds", 0.0)) for _, d in reports),
                         error="\n".join(errors),
                         unclassified=sum(f.classification is None for f in findings),
                         cut=any(s.cut for s in stage_list))
    return result, errors


def markdown(result: Any, count: int) -> str:
    """The gate's markdown summary, its environment line naming the merge instead (the
    merging machine's torch is not the gates')."""
    from diagfuzz.gate import outputs as gate_report

    lines = gate_report.markdown(result).split("\n")
    lines[2] = (f"impl `{result.impl}` on {result.device} · merged from {count} gate "
                f"reports · {result.seconds:.1f} s (the longest)")
    return "\n".join(lines)
