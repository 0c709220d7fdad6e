"""The gate's fuzz suite as a process: its pytest command line, its environment, its start.

Why a module of its own, without torch: the suite's pytest controller is the gate's
critical path, so ``diagfuzz gate`` starts it as soon as its options are checked
(``start_early``), before the gate's own imports (torch, the impl, the stages), and
``diagfuzz.gate.stages.suite_stage`` waits for the process it started.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagfuzz.execution.messages import WARM_UP_ENV
from diagfuzz.execution.timeouts import KNOWN_FAULTS_ENV
from diagfuzz.gate.options import Options
from diagfuzz.harness.workers import TRITON_CACHE_ENV

#: Of the time left under --max-seconds, the share the fuzz suite's drawing gets (its
#: shrinking, the fixed stages and classification share the rest).
SUITE_SHARE = 0.5
#: The most workers per GPU the gate's suite takes for ``-n auto``.
GATE_MAX_WORKERS_PER_GPU = 8


def suite_root(opts: Options) -> Path:
    """The suite's ``--diagfuzz-root``: inside this gate run's directory."""
    return opts.run_dir / "suite"


def suite_command(opts: Options, report: Path, max_seconds: float | None = None) -> list[str]:
    """The pytest command line of the fuzz-suite stage (the one place that knows it)."""
    command = [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
               "--hypothesis-profile", "gate", "-n", str(opts.workers), "--impl", opts.impl,
               "--diagfuzz-isolation", "process", "--diagfuzz-timeout", str(opts.timeout),
               f"--diagfuzz-report={report}", f"--rootdir={Path.cwd()}",
               f"--diagfuzz-root={suite_root(opts)}", "-q", "-p", "no:cacheprovider"]
    if opts.budget is not None:
        command += ["--diagfuzz-budget", str(opts.budget)]
    # The gate profile is derandomized, so its workers judge each Case as they draw it
    # (no pipelining): one executor a worker serves it, and on a GPU host twice the
    # pipelined runs' workers keep the GPU fed (H200, FlagGems: 4 workers of 3 executors
    # each, 12 imports and warm-ups, for 4 Cases in flight at a time).
    command += ["--diagfuzz-executors", "1"]
    # The gate classifies every finding itself (its history included): no check twice.
    command += ["--diagfuzz-history-check", "off"]
    # No --diagfuzz-covering: the gate judges the covering Cases in a stage of its own.
    if opts.workers == "auto":
        command += ["--diagfuzz-workers-per-gpu", str(gate_workers_per_gpu())]
    for flag, value in (("ops", opts.ops), ("dtypes", opts.dtypes), ("ranks", opts.ranks),
                        ("layouts", opts.layouts), ("max-elements", opts.max_elements),
                        ("max-seconds", max_seconds)):
        if value is not None:
            command.append(f"--diagfuzz-{flag}={value}")
    if opts.strict:
        command.append("--diagfuzz-strict")
    return command


def gate_gpus() -> int:
    """The GPUs the suite's ``-n auto`` shares out (at least 1): counted from their device
    nodes where those tell (no torch import), else by torch."""
    from diagfuzz.core.preselect import visible_gpu_nodes

    gpus = visible_gpu_nodes()
    if gpus is None:
        try:
            import torch

            gpus = torch.cuda.device_count()
        except Exception:  # no torch build with CUDA: the option is unused without a GPU
            gpus = 1
    return max(1, gpus)


def gate_workers_per_gpu() -> int:
    """Workers per GPU for the gate's ``-n auto``: one per two CPUs of the GPU's share
    (a worker and its executor), 2 to ``GATE_MAX_WORKERS_PER_GPU``."""
    from diagfuzz.harness.workers import cpu_count

    return max(2, min(GATE_MAX_WORKERS_PER_GPU, cpu_count() // gate_gpus() // 2))


def suite_environment(opts: Options) -> dict[str, str]:
    """The suite's environment: the current directory importable (for ``--impl``), the
    gate's one Triton cache, no executor warm-up, and no xdist worker identity inherited (a
    gate run from inside an xdist worker, as the tests do, would name its run directories
    after that worker)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()),
                                                      env.get("PYTHONPATH", "")]))
    env.setdefault(TRITON_CACHE_ENV, str(opts.triton_cache.resolve()))
    # No executor warm-up: it readies the suite's pace figure, which the gate does not
    # report, and it sits on every worker's start-up.
    env.setdefault(WARM_UP_ENV, "0")
    # Its workers and the gate's executors learn each other's confirmed hangs and crashes.
    env[KNOWN_FAULTS_ENV] = str(opts.known_faults.resolve())
    return env


@dataclass
class Started:
    """The suite's pytest, started: its process, its time cap, where it writes."""

    proc: subprocess.Popen[Any]
    cap: float | None
    report: Path
    output: Path


def start(opts: Options, cap: float | None) -> Started:
    """Start the suite's pytest in ``opts.run_dir``, in its own process group (the gate
    stops it, its workers and their executors at once)."""
    report, output = opts.run_dir / "suite-report.json", opts.run_dir / "suite-output.txt"
    with output.open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(suite_command(opts, report, cap), stdout=log,
                                stderr=subprocess.STDOUT, text=True,
                                env=suite_environment(opts), start_new_session=True)
    return Started(proc, cap, report, output)


_early: dict[Path, Started] = {}


def start_early(opts: Options) -> Started:
    """Start the suite for the run directory ``opts.run_dir`` now, before the gate's
    imports; ``early`` hands it to the suite stage. Under --max-seconds its cap is its
    share of the whole cap (the gate's clock starts a moment later)."""
    cap = (None if opts.max_seconds is None
           else max(1.0, round(SUITE_SHARE * opts.max_seconds, 1)))
    started = _early[opts.run_dir] = start(opts, cap)
    return started


def early(opts: Options) -> Started | None:
    """The suite ``start_early`` started for this run directory, if any."""
    return _early.get(opts.run_dir)
