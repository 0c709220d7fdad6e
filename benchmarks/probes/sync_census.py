"""Count the oracle's host-device synchronisations per Case, by source line (CUDA only).

Why: without MPS, processes sharing a GPU are time-sliced; a process that waits on the GPU
(a synchronising copy, ``.item()``, ``bool(t)``) may wait for another process's slice, so
each synchronisation per Case costs more the more executors share the GPU. The oracle is
meant to synchronise once per Case (``oracles.transfer``); this counts what it really does
with ``torch.cuda.set_sync_debug_mode("warn")``, which warns at every synchronising op, plus
every explicit ``torch.cuda.Event.synchronize``, and
times each stream's Cases in process alongside (a second pass over the same Cases, so
no compilation is timed).

    python benchmarks/probes/sync_census.py [--cases 300] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

import diagfuzz.ops as ops
from diagfuzz.execution.runner import InProcessRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: bench_throughput
from bench_throughput import STREAMS, draw


def _count_event_waits(lines: Counter[str]) -> Callable[[], None]:
    """Count ``torch.cuda.Event.synchronize`` calls (by caller line) into ``lines``, which
    the sync debug mode does not report; returns the undo."""
    real = torch.cuda.Event.synchronize

    def counted(self: torch.cuda.Event) -> None:
        caller = sys._getframe(1)
        lines[f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}"] += 1
        real(self)

    torch.cuda.Event.synchronize = counted

    def undo() -> None:
        torch.cuda.Event.synchronize = real

    return undo


def census(cases: int, seed: int, impl: str) -> dict:
    """Per stream: Cases, synchronisations per Case, the lines that synchronise, µs a Case."""
    runner = InProcessRunner(impl, ops.DEVICE)
    out: dict = {}
    for stream in STREAMS:
        drawn, _ = draw(stream, cases, seed, 4096, families=True)
        for case in drawn:  # warm: compilations and first-use synchronisations apart
            runner.run(case)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for case in drawn:
            runner.run(case)
        torch.cuda.synchronize()
        per_case_us = (time.perf_counter() - t0) / len(drawn) * 1e6
        lines: Counter[str] = Counter()
        waits = _count_event_waits(lines)  # explicit waits (transfer.download) too
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for case in drawn:
                    runner.run(case)
        finally:
            torch.cuda.set_sync_debug_mode("default")
            waits()
        for w in caught:
            if "synchroniz" in str(w.message):
                lines[f"{Path(w.filename).name}:{w.lineno}"] += 1
        out[stream] = {
            "cases": len(drawn), "us_per_case": round(per_case_us, 1),
            "syncs_per_case": round(sum(lines.values()) / len(drawn), 2),
            "by_line": dict(lines.most_common(12)),
        }
        print(stream, json.dumps(out[stream]), flush=True)
    runner.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--impl", default="diagfuzz.impl:triton_aten")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if ops.INTERPRET:
        print("sync_census: needs a CUDA GPU", file=sys.stderr)
        return 2
    result = census(args.cases, args.seed, args.impl)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
