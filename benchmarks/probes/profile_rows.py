"""Call a few benchmark grid rows' kernels a fixed number of times, for a profiler (ncu).

Why: do_bench gives one number per row; where ours and aten differ by a fraction of a
microsecond (``64x64`` copies at the launch floor) or a kernel stays far from the fill
bandwidth (``16x16x256x256`` copies), hardware counters tell instruction counts, DRAM bytes
and duration apart. Each row's callables (aten, ours, and a fill of the result's bytes) run
in that order, ``--calls`` times each, synchronised, after one warm-up call, with a line on
stderr naming what follows, so the profiler's kernel list reads in the same order.

    ncu --clock-control none --csv --metrics ... \\
        python benchmarks/probes/profile_rows.py --only REGEX
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: bench_diagonal
from bench_diagonal import grid, prepare, same_size_fill


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", required=True, metavar="REGEX", help="grid rows to run")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    _tiling.apply_settings(args.set)
    if ops.INTERPRET:
        print("profile_rows: needs a CUDA GPU", file=sys.stderr)
        return 2
    ops.disable()
    shapes = [s for s in grid(False) if re.search(args.only, s.label())]
    if not shapes:
        parser.error(f"--only {args.only!r} matches no grid row")
    for s in shapes:
        fns, out_bytes, _ = prepare(s)
        calls = {"aten": fns["aten"], "ours": fns["ours"], "fill": same_size_fill(out_bytes)}
        for fn in calls.values():
            fn()
        torch.cuda.synchronize()
        for name, fn in calls.items():
            print(f"# {s.label()} {name} x{args.calls}", file=sys.stderr, flush=True)
            for _ in range(args.calls):
                fn()
            torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
