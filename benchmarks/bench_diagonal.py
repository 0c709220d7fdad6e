"""Side-by-side benchmark of diagfuzz's diagonal_backward and diagonal_copy on a CUDA GPU.

Each grid row times, in one run and with CUDA events (``triton.testing.do_bench`` medians):
aten eager (registration off), a two-launch baseline (``torch.zeros`` + a copy into the
diagonal view for backward, as FlagGems ships; ``torch.empty`` + a copy out of the view for
copy), and our single Triton launch; the floor is the minimum bytes moved over the fill/copy
bandwidth measured at the start of the same run; backward rows also time a fill alone of
the same bytes (``fill_same_*``: the floor at that size). Small shapes also get host wall
time per call. It then counts compiled kernel variants over random shapes (checked bitwise against
aten on the way) and over the grid.

    python benchmarks/bench_diagonal.py [--out DIR] [--quick] [--random N] [--only REGEX]
    python benchmarks/bench_diagonal.py --random 0 --set NAME=VALUE    # a tuning knob's sweep
    tools/dev bench [ARGS]                                             # the same, installed

``--against DIR`` adds a column for the kernels at another revision (``ops_at.py``),
``--flaggems`` one for FlagGems' shipped kernel (``flaggems_column.py``). Needs a CUDA GPU.

Writes ``bench.csv`` and ``bench.json`` (host times in their ``host_*`` columns) under
``--out`` (default ``$OUT`` or ``bench-out``) and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gc
import importlib
import json
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

import flaggems_column
import ops_at
import torch
import triton
from triton.testing import do_bench

import diagfuzz.ops as ops
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.core.words import as_words
from diagfuzz.ops import _tiling

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "int8": torch.int8, "bool": torch.bool}
MB = 1 << 20
#: Rows writing less than this are timed in --small-rounds rounds: near the launch floor
#: (~4 us) the rows' differences are tenths of a microsecond, about the floor's own spread
#: (benchmarks/probes/launch_floor.py: minimal Triton kernels read 4.06-4.51 us), while more
#: rounds of a 4 us kernel cost well under a second.
SMALL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Shape:
    """One grid row's geometry: the full tensor's sizes, the diagonal, the dtype and layout."""

    op: str  # "backward" or "copy"
    sizes: tuple[int, ...]
    offset: int
    dim1: int
    dim2: int
    dtype: str
    strided: bool = False  # grad_output (backward) / input (copy) read with inner stride 2

    def label(self) -> str:
        size = "x".join(map(str, self.sizes))
        return (f"{self.op:8s} {size:>17s} o={self.offset:<5d} d=({self.dim1},{self.dim2}) "
                f"{self.dtype:8s} {'strided' if self.strided else 'contig'}")


@dataclass
class Row:
    """Timings (µs) and ratios for one Shape."""

    shape: Shape
    out_bytes: int
    read_bytes: int
    aten_us: float
    two_launch_us: float
    ours_us: float
    floor_us: float
    extra: dict = field(default_factory=dict)

    def flat(self) -> dict:
        d = {k: v for k, v in asdict(self.shape).items()}
        d["sizes"] = "x".join(map(str, self.shape.sizes))
        d.update(out_bytes=self.out_bytes, read_bytes=self.read_bytes, aten_us=self.aten_us,
                 two_launch_us=self.two_launch_us, ours_us=self.ours_us,
                 floor_us=self.floor_us, vs_aten=self.aten_us / self.ours_us,
                 vs_two_launch=self.two_launch_us / self.ours_us,
                 floor_frac=self.floor_us / self.ours_us, **self.extra)
        return d


def random_bits(shape: tuple[int, ...], dtype: torch.dtype, strided: bool) -> torch.Tensor:
    """Random bit patterns (never zeros: zeros hide unwritten output), optionally strided."""
    alloc = list(shape)
    if strided and alloc:
        alloc[-1] *= 2
    if dtype == torch.bool:
        base = torch.randint(0, 2, alloc, device=ops.DEVICE, dtype=torch.bool)
    else:
        base = torch.empty(alloc, dtype=dtype, device=ops.DEVICE)
        words = as_words(base)
        info = torch.iinfo(words.dtype)
        words.copy_(torch.randint(info.min, info.max, words.shape, device=ops.DEVICE,
                                  dtype=words.dtype))
    return base[..., ::2] if strided and alloc else base


def grid(quick: bool) -> list[Shape]:
    """The grid: 2-D 64²..16384², batched 3-D/4-D, offsets 0/±1/large, 5 dtypes."""
    shapes: list[Shape] = []
    sides = [64, 1024, 8192] if quick else [64, 256, 1024, 2048, 4096, 8192, 16384]
    for op in ("backward", "copy"):
        for dtype in DTYPES:
            for n in sides:
                shapes.append(Shape(op, (n, n), 0, 0, 1, dtype))
        for n in ([1024] if quick else [1024, 8192]):
            for off in (1, -1, n // 2):
                shapes.append(Shape(op, (n, n), off, 0, 1, "float32"))
            shapes.append(Shape(op, (n, n), 0, 0, 1, "float32", strided=True))
            shapes.append(Shape(op, (n, n), 0, 0, 1, "bfloat16", strided=True))
        batched = [
            ((64, 512, 512), 0, 1, 2), ((512, 512, 64), 0, 0, 1), ((512, 64, 512), 0, 0, 2),
            ((512, 64, 512), 3, 2, 0), ((8, 256, 8, 256), 1, 1, 3),
            ((16, 16, 256, 256), 0, 0, 1), ((32, 128, 128, 4), -2, 1, 2),
            ((4096, 8, 8), 0, 1, 2),
        ]
        if quick:
            batched = batched[:3]
        for sizes, off, d1, d2 in batched:
            for dtype in ("float32", "bfloat16", "int8"):
                shapes.append(Shape(op, sizes, off, d1, d2, dtype))
            shapes.append(Shape(op, sizes, off, d1, d2, "float32", strided=True))
    return shapes


def prepare(s: Shape, gems: dict[str, Callable] | None = None,
            against: ModuleType | None = None
            ) -> tuple[dict[str, Callable[[], object]], int, int]:
    """The callables for a shape (aten, two_launch, ours, flaggems where ``gems`` has the op,
    and ``against``: our kernels at another revision, ``ops_at``), with the bytes its result
    writes and its read needs."""
    gems = gems or {}
    dtype = DTYPES[s.dtype]
    diag = diagonal_of(s.sizes, s.offset, s.dim1, s.dim2)
    if s.op == "backward":
        g = random_bits(diag.shape, dtype, s.strided)
        sizes = list(s.sizes)
        args = (s.offset, s.dim1, s.dim2)

        def two_launch() -> torch.Tensor:
            z = torch.zeros(sizes, dtype=dtype, device=ops.DEVICE)
            z.diagonal(*args).copy_(g)
            return z

        fns = {
            "aten": lambda: torch.ops.aten.diagonal_backward(g, sizes, *args),
            "two_launch": two_launch,
            "ours": lambda: ops.diagonal_backward(g, sizes, *args),
        }
        if "backward" in gems:
            fns["flaggems"] = lambda: gems["backward"](g, sizes, *args)
        if against is not None:
            fns["against"] = lambda: against.diagonal_backward(g, sizes, *args)
        out_bytes = _numel(s.sizes) * dtype.itemsize
        read_bytes = g.numel() * dtype.itemsize
    else:
        x = random_bits(s.sizes, dtype, s.strided)
        args = (s.offset, s.dim1, s.dim2)

        def two_launch() -> torch.Tensor:
            view = x.diagonal(*args)
            out = torch.empty(view.shape, dtype=dtype, device=ops.DEVICE)
            out.copy_(view)
            return out

        fns = {
            "aten": lambda: torch.ops.aten.diagonal_copy(x, *args),
            "two_launch": two_launch,
            "ours": lambda: ops.diagonal_copy(x, *args),
        }
        if against is not None:
            fns["against"] = lambda: against.diagonal_copy(x, *args)
        out_bytes = _numel(diag.shape) * dtype.itemsize
        read_bytes = out_bytes
    return fns, out_bytes, read_bytes


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality: shape, strides and raw bits."""
    if a.shape != b.shape or a.stride() != b.stride() or a.dtype != b.dtype:
        return False
    return bool(torch.equal(as_words(a), as_words(b)))


def sentinel(shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous tensor whose every byte is 0x5A: written through ``out=``, a word the
    kernel leaves unwritten shows. (A fresh ``torch.empty`` may hold a freed buffer's zeros,
    or even the right answer from the call before.)"""
    out = torch.empty(tuple(shape), dtype=dtype, device=ops.DEVICE)
    out.view(torch.uint8).fill_(0x5A)
    return out


def sentinel_check(s: Shape) -> bool:
    """Ours through ``out=`` into a sentinel, bitwise against aten, on fresh random inputs.
    The contiguous ``out=`` takes the same plan and launch as the functional call."""
    dtype = DTYPES[s.dtype]
    args = (s.offset, s.dim1, s.dim2)
    if s.op == "backward":
        g = random_bits(diagonal_of(s.sizes, *args).shape, dtype, s.strided)
        want = torch.ops.aten.diagonal_backward(g, list(s.sizes), *args)
        got = ops.diagonal_backward_out(g, list(s.sizes), *args, out=sentinel(want.shape, dtype))
    else:
        x = random_bits(s.sizes, dtype, s.strided)
        want = torch.ops.aten.diagonal_copy(x, *args)
        got = ops.diagonal_copy_out(x, *args, out=sentinel(want.shape, dtype))
    return same_bits(got, want)


def median_us(fn: Callable[[], object], quick: bool, rounds: int = 1,
              spin_us: float = 0.0) -> float:
    """do_bench's median in µs (it flushes L2 before each timed call); with ``rounds`` > 1,
    one round's share of the time (``interleaved_us`` takes the median over rounds); with
    ``spin_us``, ``spun_median_us``."""
    rep = max((20 if quick else 40) // rounds, 5)
    warmup = 5 if quick else 10
    if spin_us:
        return spun_median_us(fn, warmup, rep, spin_us)
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median") * 1e3


def spun_median_us(fn: Callable[[], object], warmup_ms: float, rep_ms: float,
                   spin_us: float) -> float:
    """do_bench's median in µs, each timed call after a GPU spin of ``spin_us`` as well as
    the L2 flush: a call whose host side (Python, the dispatcher) takes longer than the
    flush (about 55 µs on an H200) starts its kernel late and reads that delay as kernel
    time; the spin gives the host ``spin_us`` more, so the events time the GPU's work."""
    cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    cycles = int(spin_us * 2000)  # at most 2 GHz (H200: 1.98): at least spin_us
    fn()
    torch.cuda.synchronize()
    first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first.record()
    for _ in range(5):
        torch.cuda._sleep(cycles)
        cache.zero_()
        fn()
    last.record()
    torch.cuda.synchronize()
    each_ms = first.elapsed_time(last) / 5
    for _ in range(max(1, int(warmup_ms / each_ms))):
        fn()
    n = max(5, int(rep_ms / each_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for start, end in zip(starts, ends, strict=True):
        torch.cuda._sleep(cycles)
        cache.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3


def interleaved_us(fns: dict[str, Callable[[], object]], quick: bool,
                   rounds: int, spin_us: float = 0.0) -> dict[str, float]:
    """Each callable's median over ``rounds`` rounds, the callables taking turns (aten,
    two-launch, ours, aten, ...): a burst of noise on this shared machine then spoils one
    round of one callable, not its whole measurement (a 5 us kernel has read 4.3 us in
    one run and 8.5 us in the next with nothing changed)."""
    settle(fns)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside a timed call is the host's noise
    try:
        for _ in range(rounds):
            for name, fn in fns.items():
                samples[name].append(median_us(fn, quick, rounds, spin_us))
    finally:
        if collecting:
            gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}


def settle(fns: dict[str, Callable[[], object]], seconds: float = 0.02) -> None:
    """Call a row's callables in turn, synchronised, for about ``seconds`` before it is
    timed, so its first timed calls follow calls of the same kernels, not whatever ran
    before (another row's shapes, a FlagGems column's compiles): rows right after other
    work have read 1.5-3x slow for every callable (family grid, 64x64 float32 scatter:
    aten 9.1, ours 22.0 us; 6.4 and 5.3 us in other runs)."""
    end = time.perf_counter() + seconds
    while True:
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        if time.perf_counter() >= end:
            return


def with_fill(s: Shape, fns: dict[str, Callable[[], object]],
              out_bytes: int) -> dict[str, Callable[[], object]]:
    """What a row times: its callables, and for backward a fill alone of the same bytes
    (the floor at this size)."""
    if s.op != "backward":
        return dict(fns)
    return {**fns, "fill_same": same_size_fill(out_bytes)}


def warm_up(shapes: list, seconds: float,
            fns_of: Callable[[Any], dict[str, Callable[[], object]]] | None = None) -> float:
    """Call the first 16 rows' callables (``fns_of(row)``; default: this grid's), untimed,
    about ``seconds`` in all; the time taken.

    Why: a copy-only grid started on a fresh machine with no random pass before it
    (``--random 0``, as the sweeps run) read ours 1.3-3.4x slow on its first ~15 rows and
    normal later (H200, 88c5775, h200-copy-only-cold-88c5775.csv); the cause is not known
    (clocks, host caches, first launches of each variant), so the timing starts warm. Each
    row's first calls (compiles, with --set new variants) are not counted in its share.
    """
    if fns_of is None:
        def fns_of(s: Shape) -> dict[str, Callable[[], object]]:
            return with_fill(s, *prepare(s)[:2])
    t0 = time.perf_counter()
    rows = shapes[:16]
    for s in rows:
        fns = fns_of(s)
        for fn in fns.values():  # compiles and first launches, outside the row's share
            fn()
        torch.cuda.synchronize()
        settle(fns, seconds / len(rows))  # synchronised: no backlog of large kernels
        del fns
    return round(time.perf_counter() - t0, 2)


def host_us(fn: Callable[[], object], calls: int = 2000) -> float:
    """Host wall time per call, back to back, synchronised once at the end."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def bandwidths() -> tuple[float, float]:
    """Fill (bytes written; the faster of float32 ``fill_`` and ``zero_``, as a uint8 fill
    runs slower) and copy (bytes read + written) bandwidth, bytes/s, on 2 GiB."""
    buf = torch.empty(1 << 29, dtype=torch.float32, device=ops.DEVICE)
    fill_s = min(
        do_bench(lambda: buf.fill_(7.0), warmup=20, rep=200, return_mode="median"),
        do_bench(lambda: buf.zero_(), warmup=20, rep=200, return_mode="median"),
    ) / 1e3
    src = torch.empty(1 << 30, dtype=torch.uint8, device=ops.DEVICE).fill_(3)
    dst = torch.empty_like(src)
    copy_s = do_bench(lambda: dst.copy_(src), warmup=20, rep=200, return_mode="median") / 1e3
    return (2 << 30) / fill_s, 2 * (1 << 30) / copy_s


def same_size_fill(out_bytes: int) -> Callable[[], object]:
    """A fill alone of ``out_bytes`` (float32 ``zero_``, or uint8 for odd sizes): the time
    below which no diagonal_backward of that output can go. Below a few hundred MB a
    fill does not reach the 2 GiB fill's bandwidth (launch, ramp-up and tail are a larger
    share), so this is the fair floor for "90% of fill" at 64-128 MB. Timed in the row's
    interleaved rounds, like the callables it is compared with."""
    dtype = torch.float32 if out_bytes % 4 == 0 else torch.uint8
    buf = torch.empty(out_bytes // dtype.itemsize, dtype=dtype, device=ops.DEVICE)
    return buf.zero_


def variants(kernel) -> int:
    """Compiled variants in a @triton.jit kernel's cache, over all devices (3.6 and 3.9)."""
    caches = getattr(kernel, "device_caches", None) or getattr(kernel, "cache", {})
    total = 0
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        total += len(cache)
    return total


#: The kernels whose compiled variants are counted (the package re-exports the launchers
#: under the modules' names, so the modules are imported by path).
KERNELS = {
    "diagonal_backward":
        importlib.import_module("diagfuzz.ops.diagonal_backward")._diagonal_backward_kernel,
    "diagonal_copy": importlib.import_module("diagfuzz.ops.diagonal_copy")._diagonal_copy_kernel,
}


def ptx_stores() -> dict:
    """Per compiled variant on the direct-launch path: global stores by vector width (PTX),
    to see that diagonal_backward's zero fill got 16-byte vector stores."""
    report = {}
    for name in KERNELS:
        module = importlib.import_module(f"diagfuzz.ops.{name}")
        rows = []
        for key, compiled in module._launch.compiled.items():
            ptx = compiled.asm.get("ptx", "")
            rows.append({"key": repr(key),
                         "v4": ptx.count("st.global.v4"), "v2": ptx.count("st.global.v2"),
                         "all": ptx.count("st.global")})
        report[name] = rows
    return report


def random_shapes(count: int, seed: int) -> dict:
    """Random ranks 2-5, sizes, dims, offsets and layouts, per element size: the new variants
    each element size compiles, and every result checked bitwise against aten. Then the
    same shapes again with the large-output plans forced (``small_output_bytes=0``, and
    ``copy_transpose_min_bytes=0`` for diagonal_copy's tiles), and once more with the huge
    outputs' plans (``huge_output_bytes=0`` too): these shapes are all under 1 MB, and no
    other random shapes reach those plans."""
    report = _random_pass(count, seed)
    large_plans = {"small_output_bytes": 0, "copy_transpose_min_bytes": 0}
    for tier, forced in (("large", large_plans), ("huge", {**large_plans,
                                                           "huge_output_bytes": 0})):
        with _tiling.tuned(forced):  # plans made meanwhile are forgotten on the way out
            forced_pass = _random_pass(count, seed)
        report[f"{tier}_plans_mismatch_count"] = forced_pass["mismatch_count"]
        report[f"{tier}_plans_mismatches"] = forced_pass["mismatches"]
    return report


def _random_pass(count: int, seed: int) -> dict:
    rng = random.Random(seed)
    report: dict = {}
    mismatches = []
    for dtype in (torch.int8, torch.float16, torch.float32, torch.float64):
        before = {name: variants(k) for name, k in KERNELS.items()}
        t0 = time.perf_counter()
        for _ in range(count):
            rank = rng.randint(2, 5)
            sizes = tuple(rng.randint(1, 40 if rank < 4 else 9) for _ in range(rank))
            d1, d2 = rng.sample(range(-rank, rank), 2)
            while (d1 % rank) == (d2 % rank):
                d1, d2 = rng.sample(range(-rank, rank), 2)
            offset = rng.randint(-5, 5)
            strided = rng.random() < 0.4
            shape = Shape("copy", sizes, offset, d1, d2, "float32", strided)
            x = random_bits(sizes, dtype, strided)
            diag = diagonal_of(sizes, offset, d1, d2)
            g = random_bits(diag.shape, dtype, rng.random() < 0.4)
            ours_c = ops.diagonal_copy(x, offset, d1, d2)
            ours_b = ops.diagonal_backward(g, list(sizes), offset, d1, d2)
            ref_c = torch.ops.aten.diagonal_copy(x, offset, d1, d2)
            ref_b = torch.ops.aten.diagonal_backward(g, list(sizes), offset, d1, d2)
            out_c = ops.diagonal_copy_out(x, offset, d1, d2, out=sentinel(ref_c.shape, dtype))
            out_b = ops.diagonal_backward_out(g, list(sizes), offset, d1, d2,
                                              out=sentinel(ref_b.shape, dtype))
            if not all(same_bits(a, b) for a, b in ((ours_c, ref_c), (ours_b, ref_b),
                                                    (out_c, ref_c), (out_b, ref_b))):
                mismatches.append(shape.label() + f" {dtype}")
        torch.cuda.synchronize()
        report[str(dtype)] = {
            name: variants(k) - before[name] for name, k in KERNELS.items()
        } | {"cases_per_s": round(count / (time.perf_counter() - t0), 1)}
    report["mismatches"] = mismatches[:20]
    report["mismatch_count"] = len(mismatches)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "bench-out")
    parser.add_argument("--quick", action="store_true", help="a small grid, for a smoke run")
    parser.add_argument("--random", type=int, default=1000,
                        help="random shapes per element size for the variant count")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a tuning sweep: set a knob of diagfuzz.ops._tiling.Tuning "
                             "(e.g. FILL_WORDS_PER_LANE=8, COPY_TRANSPOSE=false) for this run")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved timing rounds per row (median over rounds)")
    parser.add_argument("--small-rounds", type=int, default=9,
                        help=f"rounds for rows whose result is under {SMALL_BYTES // 1024} "
                             "KB: near the ~4 us launch floor")
    parser.add_argument("--warmup-s", type=float, default=3.0,
                        help="seconds of untimed calls of the first rows before timing "
                             "(0: none)")
    parser.add_argument("--only", default=None, metavar="REGEX",
                        help="time only the grid rows whose label matches (a focused sweep)")
    parser.add_argument("--against", metavar="DIR",
                        help="a column for our kernels at another revision: the package "
                             "benchmarks/ops_at.py extracted into DIR")
    parser.add_argument("--flaggems", action="store_true",
                        help="a column for FlagGems' shipped diagonal_backward "
                             "(benchmarks/flaggems_column.py)")
    args = parser.parse_args()
    if args.rounds < 1 or args.small_rounds < 1:
        parser.error(f"--rounds and --small-rounds must be at least 1, got {args.rounds} "
                     f"and {args.small_rounds}")
    overrides = _tiling.apply_settings(args.set)
    if ops.INTERPRET:
        print("bench_diagonal: needs a CUDA GPU (kernels run interpreted here)", file=sys.stderr)
        return 2
    ops.disable()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    meta = {
        "date": datetime.date.today().isoformat(),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__, "triton": triton.__version__,
        "python": platform.python_version(), "command": " ".join(sys.argv),
        "overrides": overrides,
    }
    gems = {}
    if args.flaggems:
        gems = flaggems_column.load()
        meta["flag_gems"] = flaggems_column.version()
    against = ops_at.load(args.against) if args.against else None
    if against is not None:
        meta["against"] = against.__name__
    fill_bw, copy_bw = bandwidths()
    meta.update(fill_TBps=fill_bw / 1e12, copy_TBps=copy_bw / 1e12)
    print(f"# {meta['gpu']} torch {meta['torch']} triton {meta['triton']}: "
          f"fill {fill_bw / 1e12:.2f} TB/s, copy {copy_bw / 1e12:.2f} TB/s", flush=True)

    rand = random_shapes(args.random, seed=1)
    meta["random_shapes"] = rand
    print(f"# random shapes: {json.dumps(rand)}", flush=True)

    rows: list[Row] = []
    wrong: list[str] = []
    shapes = grid(args.quick)
    if args.only:
        shapes = [s for s in shapes if re.search(args.only, s.label())]
        meta["only"] = args.only
    meta["warm_up_s"] = warm_up(shapes, args.warmup_s) if args.warmup_s > 0 else 0.0
    for s in shapes:
        fns, out_bytes, read_bytes = prepare(s, gems, against)
        if not same_bits(fns["ours"](), fns["aten"]()) or not sentinel_check(s):
            wrong.append(s.label())
        if against is not None and not same_bits(fns["against"](), fns["aten"]()):
            wrong.append(f"{s.label()} (against)")
        gems_error = flaggems_column.drop_if_raises(fns, ops.use_triton) if gems else ""
        gems_bitwise = same_bits(fns["flaggems"](), fns["aten"]()) if "flaggems" in fns else None
        timed = with_fill(s, fns, out_bytes)
        rounds = args.small_rounds if out_bytes < SMALL_BYTES else args.rounds
        times = interleaved_us(timed, args.quick, rounds)
        if s.op == "backward":
            floor = (out_bytes / fill_bw + 2 * read_bytes / copy_bw) * 1e6
        else:
            floor = 2 * (out_bytes + read_bytes) / copy_bw * 1e6
        row = Row(s, out_bytes, read_bytes, times["aten"], times["two_launch"],
                  times["ours"], floor)
        row.extra["rounds"] = rounds
        row.extra["ours_TBps"] = (out_bytes + read_bytes) / (row.ours_us * 1e-6) / 1e12
        row.extra["fill_frac"] = out_bytes / (row.ours_us * 1e-6) / fill_bw
        if gems_error:
            row.extra["flaggems_error"] = gems_error
        if "flaggems" in times:
            row.extra.update(flaggems_us=times["flaggems"],
                             vs_flaggems=times["flaggems"] / row.ours_us,
                             flaggems_bitwise=gems_bitwise)
        if "against" in times:
            row.extra.update(ops_at.column(times["against"], row.ours_us))
        if s.op == "backward":
            row.extra["fill_same_us"] = times["fill_same"]
            row.extra["fill_same_frac"] = times["fill_same"] / row.ours_us
        if out_bytes <= MB and s.dtype == "float32" and not s.strided:
            for name, fn in fns.items():
                row.extra[f"host_{name}_us"] = host_us(fn)
        rows.append(row)
        gems_note = (f" flaggems {row.extra['flaggems_us']:8.1f} x{row.extra['vs_flaggems']:5.2f}"
                     if "flaggems_us" in row.extra else gems_error and f" flaggems {gems_error}")
        print(f"{s.label()} aten {row.aten_us:8.1f} two {row.two_launch_us:8.1f} "
              f"ours {row.ours_us:8.1f} x{row.aten_us / row.ours_us:5.2f}{gems_note}"
              f"{ops_at.row_note(row.extra)}", flush=True)
        del fns, timed
    meta["grid_variants"] = {name: variants(k) for name, k in KERNELS.items()}
    meta["ptx_stores"] = ptx_stores()
    meta["grid_bitwise_mismatches"] = wrong
    if against is not None:
        meta["against_summary"] = ops_at.summary([(r.shape.label(), r.extra) for r in rows])

    flat = [r.flat() for r in rows]
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "rows": flat}, f, indent=1)
    keys = sorted({k for d in flat for k in d}, key=lambda k: list(flat[0]).index(k)
                  if k in flat[0] else 99)
    with open(os.path.join(args.out, "bench.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(flat)
    print_table(rows, meta)
    if against is not None:
        ops_at.print_summary(meta["against_summary"])
    return 1 if (wrong or rand["mismatch_count"] or rand["large_plans_mismatch_count"]
                 or rand["huge_plans_mismatch_count"]) else 0


def print_table(rows: list[Row], meta: dict) -> None:
    """The short table: µs medians, ratios to aten and to two-launch, floor fraction."""
    print(f"\n## {meta['gpu']} torch {meta['torch']} triton {meta['triton']} {meta['date']}; "
          f"fill {meta['fill_TBps']:.2f} TB/s copy {meta['copy_TBps']:.2f} TB/s")
    print(f"{'shape':66s} {'MB':>7s} {'aten':>8s} {'2-launch':>8s} {'ours':>8s} "
          f"{'x aten':>6s} {'x 2L':>5s} {'fill%':>5s} {'same%':>5s} {'host ours/aten':>14s}")
    for r in rows:
        host = ""
        same = f"{100 * r.extra['fill_same_frac']:5.1f}" if "fill_same_frac" in r.extra else ""
        if "host_ours_us" in r.extra:
            host = f"{r.extra['host_ours_us']:.1f}/{r.extra['host_aten_us']:.1f}"
        print(f"{r.shape.label():66s} {r.out_bytes / MB:7.2f} {r.aten_us:8.1f} "
              f"{r.two_launch_us:8.1f} {r.ours_us:8.1f} {r.aten_us / r.ours_us:6.2f} "
              f"{r.two_launch_us / r.ours_us:5.2f} {100 * r.extra['fill_frac']:5.1f} {same:>5s} "
              f"{host:>14s}")
    print(f"variants after random shapes + grid: {meta['grid_variants']}; "
          f"random: {json.dumps(meta['random_shapes'])}")
    print(f"grid bitwise mismatches: {meta['grid_bitwise_mismatches'] or 'none'}")
    gems = [r.extra["vs_flaggems"] for r in rows if "vs_flaggems" in r.extra]
    if gems:
        print(f"flaggems/ours over {len(gems)} rows: geomean "
              f"{statistics.geometric_mean(gems):.2f}, worst {min(gems):.2f}")


if __name__ == "__main__":
    sys.exit(main())
