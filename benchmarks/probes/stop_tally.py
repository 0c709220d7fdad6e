"""How a stopped gate ends: SIGTERM at seeded random moments, each stop timed and checked
(a probe, not a test).

Runs the command N times; each run gets ``--report``, ``--junit`` and ``--summary`` paths of
its own, and SIGTERM (to the command's process, as a CI runner sends it) after a seeded
random delay. Records the seconds from the signal to the exit, the exit code, whether the
report and the JUnit file were written, and the processes of the run's session still alive
a second after it exited (then killed). Prints a table and writes it as JSON.

    python benchmarks/probes/stop_tally.py --stops 20 --json stops.json -- \\
        diagfuzz gate --impl=examples.flaggems:impl -n auto --no-save
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path


def _session(sid: int) -> list[str]:
    """``pid command`` of every live process of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{entry.name} {command[:80]}")
        except (OSError, IndexError, ValueError):
            continue
    return found


def one_stop(command: list[str], delay: float, where: Path, bound: float) -> dict[str, object]:
    where.mkdir(parents=True, exist_ok=True)
    report, junit = where / "report.json", where / "junit.xml"
    full = [*command, "--report", str(report), "--junit", str(junit),
            "--summary", str(where / "summary.md")]
    with open(where / "log.txt", "w") as log:
        started = time.monotonic()
        process = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            process.wait(timeout=delay)
            finished_first = True
        except subprocess.TimeoutExpired:
            finished_first = False
        signalled = time.monotonic()
        if not finished_first:
            process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=bound + 30)
        except subprocess.TimeoutExpired:
            code = None
        ended = time.monotonic()
        time.sleep(1.0)
        left = _session(process.pid)
        if code is None or left:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return {"delay_s": round(delay, 1), "finished_before_stop": finished_first,
            "exit": code, "signal_to_exit_s": round(ended - signalled, 1),
            "run_s": round(ended - started, 1), "report": report.is_file(),
            "junit": junit.is_file(), "left": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=20)
    parser.add_argument("--min", type=float, default=2.0, help="earliest stop (s)")
    parser.add_argument("--max", type=float, default=40.0, help="latest stop (s)")
    parser.add_argument("--bound", type=float, default=10.0,
                        help="the documented seconds from a stop to the exit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=Path(".diagfuzz/stop-tally"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    rng = random.Random(args.seed)
    rows = []
    for i in range(args.stops):
        delay = rng.uniform(args.min, args.max)
        row = one_stop(command, delay, args.dir / f"stop-{i:02d}", args.bound)
        rows.append(row)
        print(f"{i:2d} stop at {row['delay_s']:5.1f} s: exit {row['exit']}, "
              f"{row['signal_to_exit_s']:4.1f} s to exit, report {row['report']}, "
              f"junit {row['junit']}, left {len(row['left'])}"
              + (" (finished before the stop)" if row["finished_before_stop"] else ""),
              flush=True)
    stopped = [r for r in rows if not r["finished_before_stop"]]
    within = [r for r in stopped if r["exit"] is not None
              and float(r["signal_to_exit_s"]) <= args.bound]  # type: ignore[arg-type]
    whole = [r for r in stopped if r["report"] and r["junit"] and not r["left"]]
    print(f"{len(stopped)} stopped: {len(within)} exited within {args.bound:g} s, "
          f"{len(whole)} with report and JUnit and no process left; slowest "
          f"{max((float(r['signal_to_exit_s']) for r in stopped), default=0):.1f} s")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps({"command": command, "bound_s": args.bound,
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
