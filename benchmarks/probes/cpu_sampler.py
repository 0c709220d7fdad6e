"""Where a command's CPU goes, by process role, and how busy the machine and GPU were.

Why: on an H200 host the suite's pace per worker was 1,258 Cases/s with one worker and 767
with four workers (and their eight executors) sharing one GPU. Whether the processes then
wait on the CPU (too few cores, SMT siblings) or on the GPU (contexts time-sliced) decides
what to fix; this wraps any command, samples ``/proc`` (and ``nvidia-smi`` where there is
one) and says.

    python benchmarks/probes/cpu_sampler.py --json out.json -- \\
        python benchmarks/bench_throughput.py suite ...

Roles: ``executor`` (diagfuzz's spawned executors), ``worker`` (xdist workers), ``main``
(everything else in the tree, e.g. the pytest controller). Whole-run shares mix start-up
(imports, CUDA, warm-up: CPU-bound) with the fuzzing, so ``series`` also gives, per sample,
each role's processes and CPUs busy since the previous sample ([processes, CPUs]): the
shards are the stretch before the end where the executors are up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _children_map() -> dict[int, list[int]]:
    """pid -> child pids, from /proc/*/stat."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(root: int) -> list[int]:
    kids = _children_map()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(kids.get(pid, []))
    return found


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def _role(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return "main"
    if b"_child_main" in cmd:
        return "executor"
    if b"execnet" in cmd or b"exec(eval(sys.stdin.readline()))" in cmd:
        return "worker"
    return "main"


def _machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _gpu_sampler(interval_ms: int) -> subprocess.Popen[str] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    return subprocess.Popen(
        ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
         f"-lms={interval_ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def sample(command: list[str], interval_s: float) -> dict:
    """Run ``command``; per role: CPU seconds, peak processes, mean share of one CPU each."""
    busy0, total0 = _machine_busy()
    gpu = _gpu_sampler(int(interval_s * 1000))
    start = time.perf_counter()
    proc = subprocess.Popen(command)
    last: dict[int, tuple[str, float, float, float]] = {}  # pid -> role, cpu, first, last seen
    peak: dict[str, int] = {}
    series: list[dict] = []  # per sample: each role's CPUs busy since the previous sample
    while proc.poll() is None:
        now = time.perf_counter()
        alive: dict[str, int] = {}
        busy: dict[str, float] = {}
        for pid in _descendants(proc.pid):
            cpu = _cpu_s(pid)
            if cpu is None:
                continue
            role, before, first, seen = last.get(pid, ("main", cpu, now, now))
            if role == "main":  # caught between fork and exec: look again
                role = _role(pid)
            last[pid] = (role, cpu, first, now)
            alive[role] = alive.get(role, 0) + 1
            if now > seen:  # over this process's own interval (it may have missed a sample)
                busy[role] = busy.get(role, 0.0) + (cpu - before) / (now - seen)
        for role, n in alive.items():
            peak[role] = max(peak.get(role, 0), n)
        series.append({"t": round(now - start, 2), **{
            role: [alive[role], round(busy.get(role, 0.0), 2)] for role in alive}})
        time.sleep(interval_s)
    wall = time.perf_counter() - start
    busy1, total1 = _machine_busy()
    gpu_util: list[int] = []
    if gpu is not None:
        gpu.terminate()
        out, _ = gpu.communicate()
        gpu_util = [int(v) for v in out.split() if v.strip().isdigit()]
    roles: dict[str, dict] = {}
    for role, cpu, first, seen in last.values():
        r = roles.setdefault(role, {"processes": 0, "cpu_s": 0.0, "alive_s": 0.0})
        r["processes"] += 1
        r["cpu_s"] += cpu
        r["alive_s"] += seen - first
    for role, r in roles.items():
        r["peak_processes"] = peak.get(role, 0)
        r["share_of_a_cpu"] = round(r["cpu_s"] / r["alive_s"], 3) if r["alive_s"] else None
        r["cpu_s"] = round(r["cpu_s"], 2)
        r["alive_s"] = round(r["alive_s"], 2)
    busy_gpu = [v for v in gpu_util if v > 0]
    return {
        "command": command, "exit": proc.returncode, "wall_s": round(wall, 2),
        "cpus": os.cpu_count(),
        "machine_busy": round((busy1 - busy0) / max(1, total1 - total0), 3),
        "roles": roles,
        "gpu_util_mean": round(sum(gpu_util) / len(gpu_util), 1) if gpu_util else None,
        "gpu_util_mean_when_used": round(sum(busy_gpu) / len(busy_gpu), 1) if busy_gpu else None,
        "series": series,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    result = sample(command, args.interval)
    text = json.dumps(result, indent=1)
    print(text, file=sys.stderr)
    if args.json:
        args.json.write_text(text)
    return result["exit"]


if __name__ == "__main__":
    sys.exit(main())
