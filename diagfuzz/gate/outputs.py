"""The gate's outputs: a markdown summary for a review, JSON for tools, JUnit XML for CI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from diagfuzz.core import corpus, rundirs
from diagfuzz.core.covering import Coverage
from diagfuzz.core.exits import ExitCode
from diagfuzz.execution.classification import history_lines
from diagfuzz.gate.run import Result, env_line, reproduce_command
from diagfuzz.gate.stages import NEVER_BEGAN, Finding, Stage, cut_before_running, not_run
from diagfuzz.harness.findings import covers_lines, dtype_tally, evidence_lines, symptom_lines

_HEADLINE: dict[int, str] = {
    ExitCode.CLEAN: "PASSED",
    ExitCode.FAILURE: "FAILED (deterministic failure)",
    ExitCode.FLAKY: "FLAKY (only flaky failures)",
    ExitCode.ERROR: "COULD NOT RUN",
    ExitCode.USAGE: "USAGE ERROR (nothing ran)",
    ExitCode.CUT: "CUT SHORT (--max-seconds; no failure in what ran)",
    ExitCode.STOPPED: "STOPPED (no failure in what finished)",
}


def headline(code: int, stages: list[Stage] | None = None) -> str:
    """The summary's verdict for an exit code; a pass (or cut, or stop) in which a stage
    could not run says which, so a PASS never claims more than ran."""
    text = _HEADLINE.get(code, f"exit {code}")
    unrun = [s.name for s in not_run(stages or [])]
    if unrun and code in (ExitCode.CLEAN, ExitCode.CUT, ExitCode.STOPPED):
        text += f" — NOT RUN: {', '.join(unrun)}"
    return text


def _rows(counters: dict[str, Counter[str]],
          into: dict[str, list[dict[str, str]]]) -> None:
    for op, counts in counters.items():
        into.setdefault(op, []).extend(
            dict(part.split("=", 1) for part in row.split("|")) for row in counts)


def not_applicable(result: Result) -> dict[str, dict[str, set[str]]]:
    """Per op, the factor levels every stage met only in Cases the impl refused as
    unsupported (``diagfuzz.strategies.covering.refused_levels``)."""
    from diagfuzz.strategies.covering import refused_levels

    judged: dict[str, list[dict[str, str]]] = {}
    refused: dict[str, list[dict[str, str]]] = {}
    for s in result.stages:
        _rows(s.levels, judged)
        _rows(s.refused, refused)
    found = {op: refused_levels(judged.get(op, []), rows) for op, rows in refused.items()}
    for op, drop in result.inapplicable.items():  # what the impl declares it cannot take
        for factor, levels in drop.items():
            found.setdefault(op, {}).setdefault(factor, set()).update(levels)
    return {op: levels for op, levels in found.items() if levels}


def t_way(result: Result, stage: str | None = None) -> dict[str, dict[str, Coverage]]:
    """Per op, the t-way coverage of the factor model (``diagfuzz.strategies.covering``)
    that the judged Cases of every stage (or of ``stage`` alone) reach, over the
    combinations that apply to the impl (``not_applicable`` left out)."""
    from diagfuzz.strategies.covering import measure_rows

    if stage in result.t_way_memo:  # the summary and the report read it alike
        return result.t_way_memo[stage]
    rows: dict[str, list[dict[str, str]]] = {}
    for s in result.stages:
        if stage is None or s.name == stage:
            _rows(s.levels, rows)
    measured = measure_rows(rows, excluded=not_applicable(result)) if rows else {}
    result.t_way_memo[stage] = measured
    return measured


def not_applicable_line(result: Result) -> str:
    """Which levels the coverage leaves out because the impl refuses them, per op."""
    found = not_applicable(result)
    if not found:
        return ""
    return ("Not applicable (met only in Cases the impl declares unsupported, left out of "
            "the shares): " + levels_text(found))


def levels_text(found: dict[str, dict[str, set[str]]]) -> str:
    """Factor levels per op, ``op: factor=level, ...; op: ...`` (what a summary or plan
    leaves out of the shares)."""
    return "; ".join(f"{op}: " + ", ".join(f"{factor}={level}" for factor in sorted(levels)
                                           for level in sorted(levels[factor]))
                     for op, levels in found.items())


def t_way_line(measured: dict[str, dict[str, Coverage]]) -> str:
    """One line: each strength's lowest share over the ops (and that op where below
    100 %); the core's strength per op (4, or 3 where the core has three factors)."""
    if not measured:
        return ""
    names = list(dict.fromkeys(t for found in measured.values() for t in found))
    parts = []
    for name in sorted(names, key=lambda t: (t.startswith("core"), t)):
        found = [(c.share, op) for op, cov in measured.items() for t, c in cov.items()
                 if t == name]
        share, op = min(found)
        label = f"core {name.split()[1]}-way" if name.startswith("core") else f"{name}-way"
        ops = "" if not name.startswith("core") or len(found) == len(measured) else (
            " (" + ", ".join(o for _, o in found) + ")")
        parts.append(f"{label}{ops} {share:.1%}" + ("" if share == 1.0 else
                                                    f" (lowest: {op})"))
    return ("**Combinations covered** (every op's factor model, docs/coverage.md): "
            + ", ".join(parts))


def coverage(result: Result) -> dict[str, Counter[str]]:
    """Cases by class (op, dtype, rank, layout, validity) over every stage."""
    total: dict[str, Counter[str]] = {}
    for stage in result.stages:
        for cls, counts in stage.coverage.items():
            total.setdefault(cls, Counter()).update(counts)
    return total


def _seen(f: Finding) -> str:
    dtypes = dtype_tally(f.dtypes)
    return f"{f.count} failing Case{'' if f.count == 1 else 's'} drawn" + (
        f" ({dtypes})" if dtypes else "")


def _how(f: Finding) -> str:
    c = f.classification
    if c is not None:
        return f"{c.label} {c.ratio}"
    return "not classified (stopped first)" if f.cut else "not classified"


def disk_lines(disk: dict[str, Any]) -> list[str]:
    """The gate's directory's size: bounded by the runs kept, the Triton cache aside."""
    if not disk:
        return []
    mb = 1 << 20
    return [f"Disk: `{disk['path']}/` holds {disk['bytes'] / mb:,.1f} MB: the newest "
            f"{disk['runs_kept']} run(s) (older ones beyond {disk['keep']} are removed; "
            f"`DIAGFUZZ_KEEP_RUNS=N`) and the Triton cache, "
            f"{disk['triton_cache_bytes'] / mb:,.1f} MB (compiled kernels, kept so that "
            "later runs do not compile again; delete it at will)."]


def _failing_cases(stage: Any) -> int:
    """The failing Cases a stage judged (its findings count them per stage)."""
    return sum(f.stages.get(stage.name, f.count) for f in stage.failures)


def _causes(stage: Any) -> int:
    """The causes a stage's failing Cases are (its findings merged by signature)."""
    return len({f.key for f in stage.failures})


def _finding_lines(n: int, f: Finding) -> list[str]:
    v, c = f.verdict, f.classification
    assert v.case is not None and f.signature is not None
    extra = ""
    if c and set(c.kinds) - {f.verdict.kind}:
        extra = " (re-runs: " + ", ".join(f"{k} {n}" for k, n in c.kinds.items()) + ")"
    where = f" [{v.check}]" if v.check else ""
    stages = ", ".join(f"{name} {count}" for name, count in f.stages.items())
    lines = [f"{n}. **{f.signature.describe()}** — {_how(f)}{extra} — {_seen(f)}",
             "   ```text"]
    lines += [f"   {'shrunk' if f.shrunk else 'case':<8} {line}" if i == 0
              else f"   {'':8} {line}" for i, line in enumerate(v.case.describe_full())]
    lines.append(f"   found    {v.kind}{where}: {v.message}")
    lines += ["   " + line for line in history_lines(c)]
    lines.append(f"   stages   {stages}")
    lines += ["   " + line[2:] for line in covers_lines(f.classes)]
    lines += ["   " + line[2:] for line in symptom_lines(f.classes, f.examples)]
    lines += ["   " + line[2:] for line in evidence_lines(v.details)]
    lines += ["   ```", f"   reproduce: `{reproduce_command(f)}`"]
    return lines


def markdown(result: Result) -> str:
    """A short summary ready to paste into a review."""
    title = headline(result.code, result.stages)
    if result.code == ExitCode.FAILURE and not any(
            f.classification and f.classification.deterministic for f in result.findings):
        title = "FAILED (unclassified failure)"
    lines = [f"## diagfuzz gate: {title} (exit {result.code})", "",
             f"impl `{result.impl}`{f' on {result.device}' if result.device else ''} · "
             f"{env_line()} · "
             f"{result.seconds:.1f} s", ""]
    if result.error:
        lines += [f"**The gate could not run:** {result.error}", ""]
    if result.stopped:
        lines += [f"**Stopped by {result.stopped}** after {result.seconds:.1f} s: what "
                  "finished is below; stages and findings it cut short say so.", ""]
    unrun = [f"{s.name} ({s.skipped})" for s in not_run(result.stages)]
    for s in cut_before_running(result.stages):
        why = NEVER_BEGAN if s.note == NEVER_BEGAN else "ended before it reported a Case"
        unrun.append(f"{s.name} ({why})")
    if unrun:
        lines += ["**Not run:** " + "; ".join(unrun), ""]
    lines += registration_lines(result.registrations)
    measured = t_way(result)
    if measured:
        lines += [t_way_line(measured), ""]
        excluded = not_applicable_line(result)
        lines += [excluded, ""] if excluded else []
    if result.stages:
        # Cases judged, the failing ones among them, and the causes (findings) they are.
        lines += ["| stage | Cases | failing Cases | causes | unsupported | time | note |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for s in result.stages:
            note = f"ERROR: {s.error.splitlines()[0]}" if s.error else s.skipped or s.note
            note = note.replace("|", "\\|")
            if s.name == "classification":  # it judges findings, not Cases: its note says
                counts = "— | — | — | —"
            else:
                counts = f"{s.ran} | {_failing_cases(s)} | {_causes(s)} | {s.unsupported}"
            lines.append(f"| {s.name} | {counts} | {s.seconds:.1f} s | {note} |")
        lines.append("")
    errors = [s for s in result.stages if s.error]
    for s in errors:
        lines += [f"**{s.name} error**", "```", s.error.strip(), "```", ""]
    if result.findings:
        det = sum(1 for f in result.findings
                  if f.classification and f.classification.deterministic)
        causes = "cause" if len(result.findings) == 1 else "causes"
        lines.append(f"**Findings** ({len(result.findings)} {causes}: {det} deterministic, "
                     f"{len(result.findings) - det} flaky or not classified)")
        for n, f in enumerate(result.findings, 1):
            lines += _finding_lines(n, f)
        lines.append("")
    if result.repro_dir is not None and result.findings:
        lines.append(f"Reproducers of this run: `{result.repro_dir}/` (a directory of this "
                     f"run's own, kept until {rundirs.keep()} newer runs follow: "
                     f"`{rundirs.KEEP_ENV}=N`; the corpus keeps each cause's Case).")
    if result.corpus_dir is not None and result.saved:
        lines.append(f"Saved {len(result.saved)} new Case(s) to `{result.corpus_dir}/`, one "
                     "per cause, which every gate replays first (`--no-save` turns saving "
                     "off).")
    lines += disk_lines(result.disk)
    lines += time_lines(result.timing)
    lines += t_way_details(measured, t_way(result, "fuzz suite"))
    cov = coverage(result)
    if cov:
        lines += ["", "<details><summary>Coverage by class</summary>", ""]
        for cls in sorted(cov):
            parts = ", ".join(f"{k} {n}" for k, n in sorted(cov[cls].items()))
            lines.append(f"- {cls}: {parts}")
        lines += ["", "</details>"]
    return "\n".join(lines)


def registration_lines(data: dict[str, Any]) -> list[str]:
    """What the impl registered into aten, and the registration audit's table."""
    if not data or not (data.get("lines") or data.get("audit")):
        return []
    lines = [f"- {line}" for line in data.get("lines", [])]
    rows = [r for r in data.get("audit", []) if r["keys"]]
    if rows:
        lines += ["", f"**Registration audit** of `{data.get('package')}` (the audit "
                  "stage's findings, below, say whether autograd and torch.compile reach "
                  "each kernel)", "",
                  "| op | registered (overload@key) | derivative | Meta kernel |",
                  "|---|---|---|---|"]
        lines += [f"| {r['op']} | {', '.join(r['keys'])} | {r['derivative']} | {r['meta']} |"
                  for r in rows]
    return [*lines, ""]


def t_way_details(measured: dict[str, dict[str, Coverage]],
                  suite: dict[str, dict[str, Coverage]]) -> list[str]:
    """Per op: the t-way coverage of every stage's Cases, and the combinations never
    reached; then what the fuzz suite's random draws alone reach."""
    from diagfuzz.strategies.covering import coverage_lines

    if not measured:
        return []
    lines = ["", "<details><summary>Combinations covered, per op</summary>", "",
             "All stages:", "", "```text", *coverage_lines(measured), "```"]
    if suite:
        lines += ["", "The fuzz suite's random draws alone:", "", "```text",
                  *coverage_lines(suite), "```"]
    return [*lines, "", "</details>"]


def _t_way_dict(measured: dict[str, dict[str, Coverage]]) -> dict[str, Any]:
    return {op: {t: c.to_dict() for t, c in found.items()} for op, found in measured.items()}


def time_lines(data: dict[str, Any]) -> list[str]:
    """Where the time went: the gate's start-up, each stage's wall time, and per group of
    stages the executors' seconds (summed over processes running side by side)."""
    if not data:
        return []
    lines = ["", "<details><summary>Where the time went</summary>", ""]
    if data.get("gate_startup_s") is not None:
        lines.append(f"- gate start-up (interpreter, imports): {data['gate_startup_s']:.1f} s")
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in data.get("stages_s", {}).items())
    if stages:
        lines.append(f"- stages (wall; the fuzz suite runs beside the others): {stages}")
    limits = data.get("timeouts")
    if limits:
        ops = ", ".join(
            f"{op} {v['warm_s'] if v['warm_s'] is not None else '-'} s (first call "
            f"{v['first_call_s'] if v['first_call_s'] is not None else '-'} s)"
            for op, v in limits.get("ops", {}).items())
        lines.append(f"- timeouts: {limits['rule']}" + (f"; used by the fixed stages: {ops}"
                                                         if ops else ""))
        if limits.get("confirmed_faults"):
            lines.append("- confirmed hangs and crashes (each later Case of the op judged "
                         "alone, not confirmed again): "
                         + ", ".join(limits["confirmed_faults"]))
        if limits.get("blocked_by_fault_shape"):
            lines.append("- not run, the shape of their op's confirmed hang or crash (counted "
                         "as its Cases): " + ", ".join(
                             f"{op} {v['cases']} ({v['fault']}: {v['shape']})"
                             for op, v in limits["blocked_by_fault_shape"].items()))
    for group, t in data.get("executors", {}).items():
        total = sum(float(t.get(k, 0.0)) for k in ("startup_s", "import_s", "warmup_s",
                                                   "first_calls_s", "judging_s"))
        share = (100.0 * float(t.get("first_calls_s", 0.0)) / total) if total else 0.0
        lines.append(
            f"- {group}: {t.get('executors', 0)} executor(s), {total:.1f} executor-s: "
            f"start-up {t.get('startup_s', 0):.1f} s, impl import {t.get('import_s', 0):.1f} s, "
            f"warm-up {t.get('warmup_s', 0):.1f} s, first call per op and dtype "
            f"{t.get('first_calls_s', 0):.1f} s ({t.get('first_calls', 0)} "
            f"call{'' if t.get('first_calls', 0) == 1 else 's'}, "
            f"{share:.0f} %), judging {t.get('judging_s', 0):.1f} s "
            f"({t.get('judged', 0)} Cases)" + _compiles(t, total))
    return [*lines, "", "</details>"]


def _compiles(t: dict[str, Any], total: float) -> str:
    """The share of executor time torch.compile's compiles took, where there were any (the
    impl's, and the torch.compile parity stage's): a compiled impl's gate time is mostly
    inductor's."""
    seconds = float(t.get("compile_s", 0.0))
    if seconds <= 0.0:
        return ""
    share = 100.0 * seconds / total if total else 0.0
    return (f"; of all that, torch.compile's compiles (the impl's and the parity stage's) "
            f"{seconds:.1f} s ({share:.0f} %)")


def _finding_dict(f: Finding) -> dict[str, Any]:
    assert f.verdict.case is not None and f.signature is not None
    return {"stage": f.stage, "oracle": f.oracle, "test_id": f.test_id,
            "signature": f.signature.to_dict(), "describe": f.signature.describe(),
            "count": f.count, "dtypes": dict(sorted(f.dtypes.items())),
            "classes": {axis: dict(sorted(v.items())) for axis, v in sorted(f.classes.items())},
            "stages": dict(f.stages), "cut": f.cut, "examples": dict(f.examples),
            "shrunk": f.shrunk, "flaky_in_suite": f.flaky,
            "case_id": corpus.case_id(f.verdict.case),
            "verdict": json.loads(f.verdict.to_json()),
            "classification": f.classification.to_dict() if f.classification else None,
            "reproducer": str(f.reproducer) if f.reproducer else None,
            "reproduce": reproduce_command(f)}


def to_json(result: Result) -> dict[str, Any]:
    """The machine-readable report (``--report PATH``)."""
    return {
        "exit_code": int(result.code), "outcome": headline(result.code, result.stages),
        "impl": result.impl,
        "not_run": {s.name: s.skipped for s in not_run(result.stages)},
        "combinations": {"all stages": _t_way_dict(t_way(result)),
                         "fuzz suite": _t_way_dict(t_way(result, "fuzz suite")),
                         "not_applicable": {op: {f: sorted(v) for f, v in levels.items()}
                                            for op, levels in
                                            not_applicable(result).items()}},
        "device": result.device, "seconds": round(result.seconds, 3), "error": result.error,
        "stages": [{"name": s.name, "cases": s.ran, "failures": _causes(s),
                    "failing_cases": _failing_cases(s),
                    "unsupported": s.unsupported, "error": s.error, "skipped": s.skipped,
                    "note": s.note, "cut": s.cut, "stopped": s.stopped,
                    "planned": s.planned, "seconds": round(s.seconds, 3)}
                   for s in result.stages],
        "cut": result.cut, "stopped": result.stopped,
        "run_dir": str(result.run_dir) if result.run_dir else None,
        "timing": result.timing, "disk": dict(result.disk),
        "repro_dir": str(result.repro_dir) if result.repro_dir else None,
        "saved_to_corpus": [str(p) for p in result.saved],
        "coverage": {k: dict(sorted(v.items())) for k, v in sorted(coverage(result).items())},
        "findings": [_finding_dict(f) for f in result.findings],
        "unclassified": result.unclassified,
        "registrations": result.registrations,
    }


def junit(result: Result) -> ET.ElementTree:
    """JUnit XML: one testsuite per stage; a testcase per failure plus one per stage."""
    root = ET.Element("testsuites", name="diagfuzz gate")
    if result.error:
        suite = ET.SubElement(root, "testsuite", name="gate", tests="1", failures="0",
                              errors="1")
        case = ET.SubElement(suite, "testcase", classname="gate", name="setup")
        ET.SubElement(case, "error", message=result.error[:500]).text = result.error
    if result.stopped:
        suite = ET.SubElement(root, "testsuite", name="gate", tests="1", failures="0",
                              errors="1")
        case = ET.SubElement(suite, "testcase", classname="gate", name="stopped")
        ET.SubElement(case, "error", message=f"stopped by {result.stopped}").text = (
            "the gate was stopped; the stages below hold what finished")
    unrun = not_run(result.stages)
    if unrun:  # a pass that ran less says so at the top, not only in its stage's suite
        suite = ET.SubElement(root, "testsuite", name="gate", tests="1", failures="0",
                              errors="0", skipped="1")
        case = ET.SubElement(suite, "testcase", classname="gate", name="stages not run")
        ET.SubElement(case, "skipped", message="not run: " + "; ".join(
            f"{s.name} ({s.skipped})" for s in unrun))
    by_stage: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_stage.setdefault(f.stage, []).append(f)
    for s in result.stages:
        found = by_stage.get(s.name, [])
        suite = ET.SubElement(root, "testsuite", name=s.name, tests=str(1 + len(found)),
                              failures=str(len(found)), errors=str(int(bool(s.error))),
                              skipped=str(int(bool(s.skipped))), time=f"{s.seconds:.3f}")
        case = ET.SubElement(suite, "testcase", classname=s.name, name="stage",
                             time=f"{s.seconds:.3f}")
        if s.error:
            ET.SubElement(case, "error", message=s.error.splitlines()[0][:500]).text = s.error
        elif s.skipped:
            ET.SubElement(case, "skipped", message=s.skipped)
        if s.note:
            ET.SubElement(case, "system-out").text = s.note
        for f in found:
            assert f.verdict.case is not None and f.signature is not None
            name = f.signature.describe()
            tc = ET.SubElement(suite, "testcase", classname=s.name, name=name)
            how = f.classification.label + " " + f.classification.ratio \
                if f.classification else "unclassified"
            ET.SubElement(tc, "failure", type=f.verdict.kind,
                          message=f"{f.verdict.kind} ({how}): {f.verdict.message}"[:500]
                          ).text = f"{f.verdict}\nreproduce: {reproduce_command(f)}"
    return ET.ElementTree(root)


def write_outputs(result: Result, report: Path | None, junit_path: Path | None) -> None:
    """Write ``--report`` JSON and ``--junit`` XML where asked."""
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(to_json(result), indent=2, sort_keys=True) + "\n",
                          encoding="utf-8")
    if junit_path is not None:
        junit_path.parent.mkdir(parents=True, exist_ok=True)
        junit(result).write(junit_path, encoding="utf-8", xml_declaration=True)
