"""Where a large diagonal_backward loses to aten's fill: ours under several plans, aten's fill
and diagonal_backward, and plain Triton fills of several shapes, in the same rounds.

Why: at 256 MB and more a backward's time is its zero stores, and the stores a thread has
in flight set their speed (BENCHMARKS.md, "What limits each kernel"). aten's fill writes
4 KiB a block (128 threads, two 16-byte stores each); ours writes 4 KiB or 8 KiB a program
of 4 warps (``ops._tiling.Tuning``'s huge_* knobs). Plain Triton fills of each block shape
tell the store pattern's cost apart from ours' diagonal work. Each ``--set`` list is one
more plan of ours (``NAME=VALUE,...`` of ``ops._tiling.Tuning``), checked bitwise against aten
before it is timed, written into 0x5A bytes so that an unwritten word shows. Rows: the
backward grid's rows that take the large-output plans (the knobs swept apply to those
only), and EXTRA_ROWS.

    python benchmarks/probes/fill_floor.py [--rounds 5] [--only REGEX] [--min-bytes N] \\
        [--set HUGE_FILL_BLOCK_BYTES=4096,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.language as tl

import diagfuzz.ops as ops
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.ops import _tiling

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: bench_diagonal
from bench_diagonal import (
    DTYPES,
    Shape,
    grid,
    interleaved_us,
    random_bits,
    same_bits,
    same_size_fill,
    sentinel,
)

#: The module (the package re-exports its function under the same name).
backward_module = importlib.import_module("diagfuzz.ops.diagonal_backward")

KIB = 1024


@triton.jit(do_not_specialize=["total"])
def _plain_fill(out_ptr, total, BLOCK: tl.constexpr):
    """One block of zeros a program, unmasked (only whole blocks are timed)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty))


#: Plain fills timed beside ours: (block bytes, warps). 2 KiB blocks (262,144 more programs
#: at 16384² float32: 319 µs) and grid-stride loops over 16 programs a multiprocessor
#: (247-251 µs) lost to 4 KiB blocks (232) in the first run (BENCHMARKS.md).
PLAIN_FILLS = ((4 * KIB, 4), (8 * KIB, 4), (8 * KIB, 8), (16 * KIB, 4), (16 * KIB, 16))


#: Rows beyond the grid's: outputs of 256 MB and more shaped like the grid's 64 MB batched
#: rows (rows of 512 words, the second diagonal dim not innermost), where a plan for huge
#: outputs must not lose what it wins on the 2-D rows, and batched rows of 4, 8 and 16 KiB
#: on either side of the huge plans' long-row threshold.
EXTRA_ROWS = (
    Shape("backward", (1024, 512, 512), 0, 1, 2, "float32"),
    Shape("backward", (256, 1024, 1024), 0, 1, 2, "float32"),  # rows of 4 KiB
    Shape("backward", (64, 2048, 2048), 0, 1, 2, "float32"),  # 8 KiB
    Shape("backward", (16, 4096, 4096), 0, 1, 2, "float32"),  # 16 KiB: long rows' plan
    Shape("backward", (1024, 512, 512), 0, 1, 2, "int8"),
    Shape("backward", (4096, 64, 512), 0, 0, 2, "float32"),
    Shape("backward", (128, 256, 8, 256), 1, 1, 3, "float32"),
)


def plain_fills(out_bytes: int) -> dict[str, Callable[[], object]]:
    """Triton fills of ``out_bytes`` as int32 words, one block a program, per PLAIN_FILLS
    entry that tiles it."""
    words = torch.empty(out_bytes // 4, dtype=torch.int32, device=ops.DEVICE)
    fns: dict[str, Callable[[], object]] = {}
    for block_bytes, warps in PLAIN_FILLS:
        block = block_bytes // 4
        if words.numel() % block == 0:
            n = words.numel() // block
            fns[f"plain_{block_bytes // KIB}k_w{warps}"] = (
                lambda n=n, block=block, warps=warps: _plain_fill[(n,)](
                    words, words.numel(), BLOCK=block, num_warps=warps))
    return fns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", metavar="REGEX",
                        help="backward grid rows to time (default: all that --min-bytes lets)")
    parser.add_argument("--min-bytes", type=int, default=_tiling.TUNING.small_output_bytes + 1,
                        help="time rows whose result is at least this large (default: "
                             "those that take the large fill plans)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE,...",
                        help="one more plan of ours, timed beside the default")
    parser.add_argument("--json", default=None, help="write the medians here")
    args = parser.parse_args()
    plans = {"ours": {}} | {f"ours[{s}]": _tiling.parse_settings(s.split(",")) for s in args.set}
    if ops.INTERPRET:
        print("fill_floor: needs a CUDA GPU", file=sys.stderr)
        return 2
    ops.disable()
    shapes = [s for s in [*grid(False), *EXTRA_ROWS]
              if s.op == "backward" and re.search(args.only, s.label())
              and math.prod(s.sizes) * DTYPES[s.dtype].itemsize >= args.min_bytes]
    if not shapes:
        parser.error(f"--only {args.only!r} matches no backward grid row")
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} triton "
          f"{triton.__version__}; µs, median of {args.rounds} interleaved rounds", flush=True)
    results, wrong = [], []
    for s in shapes:
        dtype = DTYPES[s.dtype]
        diag = diagonal_of(s.sizes, s.offset, s.dim1, s.dim2)
        grad = random_bits(diag.shape, dtype, s.strided)
        sizes = list(s.sizes)
        diag_args = (s.offset, s.dim1, s.dim2)
        want = torch.ops.aten.diagonal_backward(grad, sizes, *diag_args)
        out_bytes = want.numel() * want.element_size()
        fns: dict[str, Callable[[], object]] = {
            "aten": lambda g=grad, sz=sizes, a=diag_args: torch.ops.aten.diagonal_backward(
                g, sz, *a),
            "aten_fill": same_size_fill(out_bytes),
        }
        for name, settings in plans.items():
            with _tiling.tuned(settings):
                plan = backward_module._plan(tuple(sizes), grad, diag)

            def ours(plan=plan, g=grad, sz=tuple(sizes), dt=dtype) -> torch.Tensor:
                out = torch.empty(sz, dtype=dt, device=ops.DEVICE)
                backward_module._launch(plan, (out, g))
                return out

            check = sentinel(want.shape, dtype)  # every word must be written over
            backward_module._launch(plan, (check, grad))
            if not same_bits(check, want):
                wrong.append(f"{s.label()} {name}")
            del check
            fns[name] = ours
        fns.update(plain_fills(out_bytes))
        for fn in fns.values():  # compile and first-launch outside the timing
            fn()
        torch.cuda.synchronize()
        medians = interleaved_us(fns, quick=False, rounds=args.rounds)
        results.append({"row": s.label(), "out_bytes": out_bytes, "us": medians})
        print(f"{s.label()}  " + "  ".join(
            f"{name} {us:.1f} ({medians['aten'] / us:.3f}x)" for name, us in medians.items()),
            flush=True)
        del fns, want, grad
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "rounds": args.rounds,
                       "plans": plans, "rows": results, "bitwise_mismatches": wrong}, f,
                      indent=1)
    if wrong:
        print("fill_floor: not bitwise equal to aten: " + "; ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
