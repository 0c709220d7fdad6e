"""Where a fuzz run's wall time goes before the first shard and after the last (a benchmark).

Runs the suite (or ``diagfuzz gate``) as a user would, ``--runs`` times, with
``DIAGFUZZ_TIMELINE`` set (``diagfuzz.execution.timeline``): every process of the run (the
pytest controller, each xdist worker, each executor) marks its steps on one clock. Prints,
per run, the wall time from the command to its exit and the timeline: for each step, the
median and the latest over the processes that took it, in seconds from the command. The
first run fills the Triton caches under ``--root``; take the later runs.

    python benchmarks/startup.py --runs 3                       # dev profile, -n auto
    python benchmarks/startup.py --runs 3 --workers 4 -- --diagfuzz-budget=60000
    python benchmarks/startup.py --runs 2 --gate                # diagfuzz gate --no-save

``--json PATH`` writes every run's marks and summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from diagfuzz.execution.timeline import TIMELINE_ENV, read

#: Steps in the order a run takes them: (role kind, event).
STEPS = [
    ("controller", "process_start"), ("controller", "plugin_imported"),
    ("controller", "plugin_configure"), ("controller", "torch_imported_before_configure"),
    ("controller", "planned"), ("controller", "session_start"),
    ("worker", "process_start"), ("worker", "plugin_imported"), ("worker", "plugin_configure"),
    ("worker", "torch_imported_before_configure"), ("worker", "planned"), ("worker", "collected"),
    ("worker", "executors_launched"),
    ("forkserver", "process_start"), ("forkserver", "preloaded"),
    ("executor", "process_start"), ("executor", "start"), ("executor", "torch_imported"),
    ("executor", "cuda_context"), ("executor", "impl_loaded"), ("executor", "health_checked"),
    ("executor", "ready"),
    ("worker", "executors_ready"), ("worker", "shard_start"), ("worker", "shard_end"),
    ("worker", "session_finish"), ("worker", "runner_closed"),
    ("controller", "session_finish"), ("controller", "report_written"),
    ("controller", "summary_written"),
]


def kind(role: str) -> str:
    """controller, worker (gw0 ...), forkserver or executor."""
    return role if role in ("controller", "executor", "forkserver") else "worker"


def summarise(marks: list[dict], t0: float, t_end: float) -> dict[str, Any]:
    """Per step: the median and latest time from the command over the processes that took
    it (a process's first mark of a step; shard_end its last), and the key spans."""
    per_process: dict[tuple[str, int, str], float] = {}
    for m in marks:
        key = (kind(m["role"]), m["pid"], m["event"])
        if m["event"] == "shard_end" or key not in per_process:
            per_process[key] = m["t"] - t0
    steps = []
    for role_kind, event in STEPS:
        times = [t for (k, _, e), t in per_process.items() if (k, e) == (role_kind, event)]
        if times:
            steps.append({"role": role_kind, "event": event, "processes": len(times),
                          "median_s": round(statistics.median(times), 3),
                          "first_s": round(min(times), 3), "last_s": round(max(times), 3)})
    starts = [t for (k, _, e), t in per_process.items() if e == "shard_start"]
    ends = [t for (k, _, e), t in per_process.items() if e == "shard_end"]
    wall = t_end - t0
    spans = {"wall_s": round(wall, 3)}
    if starts and ends:
        spans["before_first_shard_s"] = round(min(starts), 3)
        spans["shards_s"] = round(max(ends) - min(starts), 3)
        spans["after_last_shard_s"] = round(wall - max(ends), 3)
    return {"steps": steps, "spans": spans}


def print_summary(index: int, summary: dict[str, Any], pace: dict | None) -> None:
    spans = summary["spans"]
    print(f"\nrun {index}: " + ", ".join(f"{k} {v:.2f}" for k, v in spans.items()))
    if pace:
        print(f"  report pace: {pace.get('cases_per_s_per_worker')} Cases/s per worker inside "
              f"shards, outside_shards_s {pace.get('outside_shards_s')}")
    print(f"  {'process':<11}{'step':<20}{'n':>3}{'first':>8}{'median':>8}{'last':>8}")
    for s in summary["steps"]:
        print(f"  {s['role']:<11}{s['event']:<20}{s['processes']:>3}{s['first_s']:>8.2f}"
              f"{s['median_s']:>8.2f}{s['last_s']:>8.2f}")


def command(args: argparse.Namespace, report: Path) -> list[str]:
    if args.gate:
        return [sys.executable, "-m", "diagfuzz", "gate", "--no-save",
                f"--report={report}", *args.extra]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
            str(args.workers), "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
            f"--hypothesis-profile={args.profile}", f"--diagfuzz-root={args.root}",
            f"--diagfuzz-report={report}", *args.extra]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", default="auto", help="pytest -n (default auto)")
    parser.add_argument("--profile", default="dev", help="Hypothesis profile (default dev)")
    parser.add_argument("--gate", action="store_true", help="time `diagfuzz gate --no-save`")
    parser.add_argument("--root", type=Path, default=Path(".diagfuzz/startup-root"),
                        help="--diagfuzz-root: Triton caches kept across the runs")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("extra", nargs="*", help="after --: more arguments for the command")
    args = parser.parse_args()
    results = []
    for index in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="diagfuzz-startup-") as tmp:
            marks_dir, report = Path(tmp) / "marks", Path(tmp) / "report.json"
            env = {**os.environ, TIMELINE_ENV: str(marks_dir)}
            argv = command(args, report)
            t0 = time.time()
            proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            t_end = time.time()
            marks = read(marks_dir) if marks_dir.exists() else []
            data = json.loads(report.read_text()) if report.exists() else {}
        summary = summarise(marks, t0, t_end)
        pace = data.get("pace") or next(
            (s.get("pace") for s in data.get("stages", []) if s.get("pace")), None)
        print_summary(index, summary, pace)
        tail = proc.stdout.strip().splitlines()[-3:]
        print(f"  exit {proc.returncode}: " + " | ".join(tail))
        kept: dict[str, Any] = {}
        if proc.returncode != 0:  # a finding or an error is evidence: keep all of it
            print(proc.stdout)
            kept = {"output": proc.stdout, "findings": data.get("findings")}
        results.append({"run": index, "argv": argv, "exit": proc.returncode, **summary,
                        "pace": pace, "gate_stages": data.get("stages"), "marks": marks,
                        "t0": t0, **kept})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
