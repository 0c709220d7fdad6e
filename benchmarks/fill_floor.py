"""Where a large diagonal_backward loses to aten's fill: ours under several plans, aten's fill
and diagonal_backward, and plain Triton fills of several shapes, in the same rounds.

Why: at ``16384²`` float32 ours took 237-239 µs in the kernel against aten's fill 229-231
(ncu: DRAM 91% of peak against 94%), with 27 registers, full occupancy and its instruction
slots about 20% busy (BENCHMARKS.md). aten's fill writes 4 KiB a block (128 threads, two
16-byte stores each, 262,144 blocks); ours 16 KiB a program (65,536 programs, about 31
waves of the 2,112 resident programs, so the last wave's idle share is up to 1/31 of the
time). If a plain Triton fill of 16 KiB blocks reads like ours and one of 4 KiB blocks, or a
grid-stride loop, like aten's, the blocking is what is left, not ours' diagonal work. Each
``--set`` list is one more plan of ours (``NAME=VALUE,...`` of ``ops._tiling``), checked
bitwise against aten before it is timed.

    python benchmarks/fill_floor.py [--rounds 5] [--only REGEX] [--set FILL_BLOCK_BYTES=4096]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterator

import torch
import triton
import triton.language as tl
from bench_diagonal import DTYPES, grid, interleaved_us, random_bits, same_bits

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling
from diagfuzz.ops import diagonal_backward as backward_module
from diagfuzz.ops._geometry import diagonal_of

#: The rows timed by default: the backward rows of 64 MB and more that the goals judge, and
#: one of the largest of each element size.
DEFAULT_ONLY = (r"backward +(16384x16384|8192x8192|4096x4096|64x512x512|16x16x256x256)"
                r" o=0 .*(float32|int8|bfloat16) +contig")
KIB = 1024


@triton.jit(do_not_specialize=["total"])
def _plain_fill(out_ptr, total, BLOCK: tl.constexpr):
    """One block of zeros a program, unmasked (the benchmark's sizes are whole blocks)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["n_blocks"])
def _strided_fill(out_ptr, n_blocks, BLOCK: tl.constexpr):
    """Grid-stride: program p fills blocks p, p + grid, ...: every program ends together."""
    for b in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        offs = b.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty))


def plain_fills(out_bytes: int) -> dict[str, Callable[[], object]]:
    """Triton fills of ``out_bytes`` (int32 words): one block a program at 2 to 16 KiB, and
    grid-stride loops of 4 and 16 KiB blocks over 16 programs per multiprocessor."""
    words = torch.empty(out_bytes // 4, dtype=torch.int32, device=ops.DEVICE)
    sms = torch.cuda.get_device_properties(ops.DEVICE).multi_processor_count
    fns: dict[str, Callable[[], object]] = {}
    for block_bytes in (2 * KIB, 4 * KIB, 8 * KIB, 16 * KIB):
        block = block_bytes // 4
        if words.numel() % block == 0:
            n = words.numel() // block
            fns[f"plain_{block_bytes // KIB}k"] = (
                lambda n=n, block=block: _plain_fill[(n,)](words, words.numel(), BLOCK=block))
    for block_bytes in (4 * KIB, 16 * KIB):
        block = block_bytes // 4
        if words.numel() % block == 0:
            n = words.numel() // block
            fns[f"stride_{block_bytes // KIB}k"] = (
                lambda n=n, block=block: _strided_fill[(min(n, 16 * sms),)](
                    words, n, BLOCK=block))
    return fns


@contextlib.contextmanager
def planning(settings: dict[str, int]) -> Iterator[None]:
    """``ops._tiling``'s planning constants set to ``settings`` for the block, then restored."""
    before = {name: getattr(_tiling, name) for name in settings}
    for name, value in settings.items():
        setattr(_tiling, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(_tiling, name, value)


def parse_settings(text: str) -> dict[str, int]:
    """``NAME=VALUE,...`` into a dict, each NAME an integer constant of ``ops._tiling``."""
    settings: dict[str, int] = {}
    for pair in filter(None, text.split(",")):
        name, _, value = pair.partition("=")
        if type(getattr(_tiling, name, None)) is not int:
            raise SystemExit(f"--set {text}: no integer constant {name!r} in ops._tiling")
        settings[name] = int(value)
    return settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=DEFAULT_ONLY, metavar="REGEX")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE,...",
                        help="one more plan of ours, timed beside the default")
    parser.add_argument("--json", default=None, help="write the medians here")
    args = parser.parse_args()
    plans = {"ours": {}} | {f"ours[{s}]": parse_settings(s) for s in args.set}
    if ops.INTERPRET:
        print("fill_floor: needs a CUDA GPU", file=sys.stderr)
        return 2
    ops.disable()
    shapes = [s for s in grid(False) if s.op == "backward" and re.search(args.only, s.label())]
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
        args_ = (s.offset, s.dim1, s.dim2)
        want = torch.ops.aten.diagonal_backward(grad, sizes, *args_)
        out_bytes = want.numel() * want.element_size()
        fill_buf = torch.empty(out_bytes // 4, dtype=torch.int32, device=ops.DEVICE)
        fns: dict[str, Callable[[], object]] = {
            "aten": lambda g=grad, sz=sizes, a=args_: torch.ops.aten.diagonal_backward(
                g, sz, *a),
            "aten_fill": fill_buf.zero_,
        }
        for name, settings in plans.items():
            with planning(settings):
                plan = backward_module._plan(tuple(sizes), grad, diag)

            def ours(plan=plan, g=grad, sz=tuple(sizes), dt=dtype) -> torch.Tensor:
                out = torch.empty(sz, dtype=dt, device=ops.DEVICE)
                backward_module._launch(plan, (out, g))
                return out

            if not same_bits(ours(), want):
                wrong.append(f"{s.label()} {name}")
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
        del fns, fill_buf, want, grad
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
