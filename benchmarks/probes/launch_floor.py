"""The floor of a tiny diagonal_copy: ours and aten against minimal Triton kernels.

Why: at ``64x64`` (64 elements) do_bench reads ours 0.1-0.3 µs behind aten's 4.0-4.2 µs,
while ncu times the two kernels alike (2.4-2.6 µs each,
``benchmarks/results/h200-ncu-6478358.csv``). What is left is launch, not the kernel's work.
This times, side by side in interleaved rounds (``bench_diagonal.interleaved_us``: do_bench
medians, L2 flushed): aten; ours; a minimal Triton gather (pointer, stride, count: one
masked load and store); the same with as many runtime arguments as ours takes; and
``torch.empty`` + that minimal kernel as ours calls it. If the minimal kernels sit where
ours does, the gap is a Triton launch's, not this kernel's code.

    python benchmarks/probes/launch_floor.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

import diagfuzz.ops as ops

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: bench_diagonal
from bench_diagonal import interleaved_us  # do_bench medians, rounds taking turns


@triton.jit(do_not_specialize=["n", "stride"])
def _minimal_gather(out_ptr, in_ptr, n, stride, BLOCK: tl.constexpr):
    k = tl.arange(0, BLOCK)
    tl.store(out_ptr + k, tl.load(in_ptr + k * stride, mask=k < n), mask=k < n)


@triton.jit(do_not_specialize=["n", "stride", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7",
                               "a8", "a9", "a10", "a11", "a12", "a13", "a14", "a15", "a16",
                               "a17", "a18", "a19", "a20", "a21", "a22", "a23", "a24", "a25",
                               "a26", "a27", "a28", "a29"])
def _minimal_gather_wide(out_ptr, in_ptr, n, stride, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9,
                         a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23,
                         a24, a25, a26, a27, a28, a29, BLOCK: tl.constexpr):
    k = tl.arange(0, BLOCK)
    tl.store(out_ptr + k, tl.load(in_ptr + k * stride, mask=k < n), mask=k < n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if ops.INTERPRET:
        print("launch_floor: needs a CUDA GPU", file=sys.stderr)
        return 2
    ops.disable()
    for dtype in (torch.float32, torch.bool):
        x = (torch.randn(64, 64, device="cuda") > 0).to(dtype)
        out = torch.empty(64, dtype=dtype, device="cuda")
        fns = {
            "aten": lambda x=x: torch.ops.aten.diagonal_copy(x, 0, 0, 1),
            "ours": lambda x=x: ops.diagonal_copy(x, 0, 0, 1),
            "minimal": lambda x=x, out=out: _minimal_gather[(1,)](out, x, 64, 65, BLOCK=64),
            "minimal_34_args": lambda x=x, out=out: _minimal_gather_wide[(1,)](
                out, x, 64, 65, *range(30), BLOCK=64),
            "empty+minimal": lambda x=x: _minimal_gather[(1,)](
                torch.empty(64, dtype=x.dtype, device="cuda"), x, 64, 65, BLOCK=64),
        }
        want = torch.ops.aten.diagonal_copy(x, 0, 0, 1)
        fns["minimal"]()  # writes into out
        for name, got in (("ours", fns["ours"]()), ("the minimal kernel", out)):
            if not torch.equal(got, want):
                print(f"launch_floor: {name} differs from aten", file=sys.stderr)
                return 1
        medians = interleaved_us(fns, quick=False, rounds=args.rounds)
        print(f"64x64 {str(dtype).removeprefix('torch.')} (µs, median of {args.rounds} rounds; "
              f"triton {triton.__version__}): " + ", ".join(
                  f"{name} {us:.2f} ({medians['aten'] / us:.2f}x aten)"
                  for name, us in medians.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
