"""A gate's findings as a table, each reproducer run in a fresh process: what a maintainer
reads and what a CI sees (``python tools/gate_findings.py NAME REPORT.json [--run]``).

One line per finding: its cause, its classification (label, ratio, the history it needs)
and, with ``--run``, the exit status of its printed reproducer (1 while the bug is there),
run as the summary prints it. Appends to ``walls.txt``'s folder's ``findings.txt`` when
``--table`` names it. Exit status 0: it only reports.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def exit_of(script: str) -> int:
    """The exit status of one reproducer, run in a fresh process."""
    return subprocess.run([sys.executable, script], capture_output=True, text=True,
                          check=False, timeout=600).returncode


def rows(name: str, report: dict, run: bool, jobs: int = 1) -> list[str]:
    findings = report.get("findings", [])
    lines = [f"{name}: exit {report.get('exit_code')}, {len(findings)} "
             f"finding(s), {report.get('seconds', 0):.1f} s"]
    scripts = [f.get("reproducer") for f in findings]
    with ThreadPoolExecutor(max(1, jobs)) as pool:  # each its own process: side by side
        exits = list(pool.map(lambda s: exit_of(s) if run and s else None, scripts))
    for f, code in zip(findings, exits, strict=True):
        c = f.get("classification") or {}
        how = f"{c.get('label', 'unclassified')} {c.get('ratio', '')}".strip()
        story = c.get("story") or ""
        repro = "" if code is None else f"; reproducer exit {code}"
        lines.append(f"  {f.get('describe')} | {how}{' | ' + story if story else ''}{repro}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("report", type=Path)
    parser.add_argument("--run", action="store_true", help="run every reproducer")
    parser.add_argument("--table", type=Path, help="append the lines to this file too")
    parser.add_argument("--jobs", type=int, default=1,
                        help="reproducers run side by side (default 1)")
    args = parser.parse_args()
    try:
        report = json.loads(args.report.read_text())
    except (OSError, ValueError) as exc:
        lines = [f"{args.name}: no report ({exc})"]
    else:
        lines = rows(args.name, report, args.run, args.jobs)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.table is not None:
        with args.table.open("a") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
