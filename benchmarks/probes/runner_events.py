"""Where a run's time went between its Cases, from the runners' lines in its executor logs
(a probe, not a test).

Each runner writes ``[diagfuzz runner HH:MM:SS.mmm] ...`` lines into its executor log: hangs
and the allowance each ran past, hangs an executor stopped itself, failed batches, kills
and how long each killed process took to exit, replacements and how long each took to be
ready. This reads every ``executor*.log`` under the given directories (a gate's run
directory: its pool, its suite's workers, classification) and prints, per log and in all,
how many of each there were and the seconds they took, then the longest waits.

    python benchmarks/probes/runner_events.py .diagfuzz/gate/latest
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

LINE = re.compile(r"^\[diagfuzz runner (\d\d:\d\d:\d\d\.\d{3})\] (.*)$")
#: (event kind, pattern whose first group is its seconds).
KINDS = (
    ("hang to confirm", re.compile(r"hang after ([\d.]+) s .*to be confirmed")),
    ("confirmation", re.compile(r"hang after ([\d.]+) s .*a confirmation")),
    ("known hang (runner's deadline)", re.compile(r"hang after ([\d.]+) s .*is confirmed\)")),
    ("known hang (executor's stop)", re.compile(r"hang stopped by the executor after ([\d.]+)")),
    ("failed batch", re.compile(r"a batch failed after ([\d.]+) s")),
    ("kill: process exit", re.compile(r"killed executor \d+: exited in ([\d.]+) s")),
    ("kill: still running after 10 s", re.compile(r"killed executor \d+: still running()")),
    ("replacement: wait for ready", re.compile(r"replacement ready, waited ([\d.]+) s")),
    ("unhealthy after a Case", re.compile(r": unhealthy after its Case()")),
)


def events(log: Path) -> list[tuple[str, str, float, str]]:
    """(time of day, kind, seconds, text) of each runner line of ``log``."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = LINE.match(line)
        if match is None:
            continue
        stamp, text = match.groups()
        for kind, pattern in KINDS:
            hit = pattern.search(text)
            if hit is not None:
                seconds = float(hit.group(1)) if hit.group(1) else 10.0
                found.append((stamp, kind, seconds, text))
                break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="run directories to read")
    parser.add_argument("--longest", type=int, default=10, help="longest waits listed")
    args = parser.parse_args()
    logs = sorted({log for d in args.dirs for log in d.rglob("executor*.log")})
    total: Counter[str] = Counter()
    seconds: defaultdict[str, float] = defaultdict(float)
    everything = []
    for log in logs:
        mine = events(log)
        if not mine:
            continue
        where = log.parent if log.name == "executor.log" else log
        counts = Counter(kind for _, kind, _, _ in mine)
        spent = sum(s for _, kind, s, _ in mine if not kind.startswith("kill: still"))
        print(f"{where}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
              + f"; {spent:.1f} s")
        for stamp, kind, s, text in mine:
            total[kind] += 1
            seconds[kind] += s
            everything.append((s, stamp, str(where), text))
    print("\nin all:")
    for kind, _ in KINDS:
        if total[kind]:
            print(f"  {kind:<32} {total[kind]:>5}  {seconds[kind]:8.1f} s")
    print(f"\nthe {args.longest} longest:")
    for s, stamp, where, text in sorted(everything, reverse=True)[:args.longest]:
        print(f"  {s:7.2f} s  {stamp}  {where}: {text}")


if __name__ == "__main__":
    main()
