"""The ``diagfuzz merge`` subcommand (registered by ``diagfuzz.gate.cli``): a campaign's
partitions' reports (``diagfuzz.gate.merge``), or gate reports (``diagfuzz.gate.merge_gates``),
as one."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from diagfuzz.core.exits import table
from diagfuzz.gate.usage import UsageError, writable_file

#: The one exit-code table (``diagfuzz.core.exits``); merge gives the codes a single run of
#: the whole campaign would (3 also for reports that are not one whole campaign).
MERGE_EXIT_CODES = table()

DESCRIPTION = """\
Merge the reports of a campaign's partitions (pytest -p diagfuzz --diagfuzz-partition=i/N
... --diagfuzz-report=PART.json, and their --junitxml files) into one report and one
verdict, as one run of the whole campaign would give: counts summed, findings merged by
signature, per-worker pace kept apart per partition. Gate reports (diagfuzz gate --report)
of several machines merge too, under the gate's exit rule."""


def add_parser(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """Register ``merge`` on the ``diagfuzz`` command's subparsers."""
    m = sub.add_parser("merge", formatter_class=formatter, epilog=MERGE_EXIT_CODES,
                       help="merge the partitions' reports of a campaign (or gate reports)",
                       description=DESCRIPTION)
    m.add_argument("inputs", type=Path, nargs="+", metavar="FILE",
                   help="JSON reports (every partition's), and optionally the partitions' "
                        "JUnit .xml files")
    m.add_argument("--report", type=Path, help="write the merged JSON report here")
    m.add_argument("--junit", type=Path, help="write merged JUnit XML here")
    m.add_argument("--summary", type=Path, help="also write the printed summary here")
    m.add_argument("--allow-partial", action="store_true",
                   help="merge what is there when partitions are missing (named in the "
                        "report; not an error)")
    m.add_argument("--repro-dir", type=Path,
                   help="write a reproducer per finding here (default: beside --report, "
                        "in its name + -repro/)")
    m.add_argument("--device", choices=("cpu", "cuda"),
                   help="the reproducers' default device (default: this machine's)")
    m.set_defaults(func=run)


def _inputs(args: argparse.Namespace) -> tuple[str, list[tuple[Path, dict[str, Any]]],
                                               list[Path]]:
    from diagfuzz.gate.merge import MergeUsageError, kind_of, read_json

    reports, xml = [], []
    for path in args.inputs:
        if path.suffix.lower() == ".xml":
            if not path.is_file():
                raise MergeUsageError(f"{path}: no such file")
            xml.append(path)
            continue
        data = read_json(path)
        kind = kind_of(data)
        if not kind:
            raise MergeUsageError(f"{path}: neither a fuzz-suite report (--diagfuzz-report) "
                                  "nor a gate report (diagfuzz gate --report)")
        reports.append((path, data, kind))
    kinds = sorted({k for _, _, k in reports})
    if not kinds:
        raise MergeUsageError("no JSON report among the inputs: give every partition's "
                              "--diagfuzz-report file")
    if len(kinds) > 1:
        raise MergeUsageError("fuzz-suite and gate reports do not merge with each other: "
                              + ", ".join(f"{p} ({k})" for p, _, k in reports))
    if kinds == ["gate"] and xml:
        raise MergeUsageError("JUnit inputs merge with fuzz-suite reports; gate reports "
                              "make their own JUnit (--junit)")
    return kinds[0], [(p, d) for p, d, _ in reports], xml


def run(args: argparse.Namespace) -> int:
    """``diagfuzz merge``: check, merge, print, write; return the verdict."""
    from diagfuzz.gate.merge import MergeUsageError
    from diagfuzz.gate.merge_junit import JunitError

    for option, path in (("--report", args.report), ("--junit", args.junit),
                         ("--summary", args.summary)):
        writable_file(option, path)
    try:
        kind, reports, xml = _inputs(args)
        if kind == "gate":
            return _gate(args, reports)
        return _suite(args, reports, xml)
    except (MergeUsageError, JunitError) as exc:
        raise UsageError(str(exc)) from exc


def _suite(args: argparse.Namespace, reports: list[tuple[Path, dict[str, Any]]],
           xml: list[Path]) -> int:
    from diagfuzz.gate import merge_junit as junit
    from diagfuzz.gate.merge import EXIT_ERROR, Part, merge_parts, summary, write_reproducers
    from diagfuzz.harness.report import write_json

    merged = merge_parts([Part(p, d) for p, d in reports], args.allow_partial)
    overlap = junit.duplicates(xml)
    if overlap:
        merged.errors += overlap
        merged.code = merged.data["exit_status"] = EXIT_ERROR
        merged.data["merged"]["errors"] = merged.errors
    repro_dir = args.repro_dir or (args.report.with_name(args.report.stem + "-repro")
                                   if args.report else None)
    problem = write_reproducers(merged, repro_dir, args.device) if repro_dir else ""
    if args.junit is not None:
        junit.write(junit.merged_junit(xml, merged), args.junit)
    if args.report is not None:
        write_json(args.report, merged.data)
    lines = summary(merged, args.report)
    if problem:
        lines.append(f"diagfuzz merge: {problem}")
    text = "\n".join(lines)
    print(text)
    if args.summary is not None:
        args.summary.write_text(text + "\n", encoding="utf-8")
    return merged.code


def _gate(args: argparse.Namespace, reports: list[tuple[Path, dict[str, Any]]]) -> int:
    from diagfuzz.gate import outputs as gate_report
    from diagfuzz.gate.merge_gates import markdown, merge_gates

    result, _ = merge_gates(reports)
    text = markdown(result, len(reports))
    print(text)
    gate_report.write_outputs(result, None, args.junit)
    if args.report is not None:
        data = gate_report.to_json(result)
        data["merged"] = {"sources": [str(p) for p, _ in reports]}
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n",
                               encoding="utf-8")
    if args.summary is not None:
        args.summary.write_text(text + "\n", encoding="utf-8")
    return result.code
