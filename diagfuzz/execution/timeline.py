"""Opt-in start-up timeline of a fuzz run (``DIAGFUZZ_TIMELINE=DIR``).

Why: on a GPU host most of a short run is spent before the first shard and after the last
(the report's ``outside_shards_s``), across three kinds of process (the pytest controller,
its xdist workers, their executors). Only wall-clock marks from every process, on one
clock, show which of them waits for what. With the variable set, each process appends
``{"t", "pid", "role", "event"}`` lines to ``DIR/<pid>.jsonl``, the first of them its own
start time (from ``/proc``); ``benchmarks/startup.py`` runs the suite with it and prints the
breakdown. Unset, ``mark`` is one dictionary lookup.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

TIMELINE_ENV = "DIAGFUZZ_TIMELINE"
_started: set[int] = set()


def role() -> str:
    """``controller`` outside xdist workers, else the worker's id (gw0 ...)."""
    return os.environ.get("PYTEST_XDIST_WORKER", "controller")


def process_start() -> float | None:
    """This process's start as a ``time.time()`` value (Linux /proc; 10 ms steps), or None."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age


def mark(event: str, who: str | None = None) -> None:
    """Record ``event`` of this process (as ``who``, default ``role()``) when asked to."""
    directory = os.environ.get(TIMELINE_ENV)
    if not directory:
        return
    now = time.time()
    who = who or role()
    pid = os.getpid()
    lines = []
    if pid not in _started:
        _started.add(pid)
        start = process_start()
        if start is not None:
            lines.append({"t": start, "pid": pid, "role": who, "event": "process_start"})
    lines.append({"t": now, "pid": pid, "role": who, "event": event})
    path = Path(directory) / f"{pid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.writelines(json.dumps(line) + "\n" for line in lines)


def read(directory: Path) -> list[dict]:
    """Every mark under ``directory``, in time order."""
    marks = [json.loads(line) for path in sorted(directory.glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(marks, key=lambda m: m["t"])
