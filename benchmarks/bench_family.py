"""Side-by-side benchmark of diagfuzz's diag_embed, diagonal_scatter and diag against aten,
in bench_diagonal.py's grid format.

Each row times, in interleaved rounds with CUDA events (``triton.testing.do_bench``
medians, L2 flushed): aten eager (registration off), a two-launch baseline, and our single
launch. Baselines: ``embed`` zeros + a copy into the diagonal view (aten's own algorithm);
``scatter`` aten's clone of the input's storage + a copy into its diagonal view (what
``clone_preserve_strides`` + ``copy_`` do); ``diag`` the same as embed (1-D) or an empty +
copy out of the view (2-D). diag rows call ``torch.diag`` with the registration on (ours:
aten's decomposition reaching our kernels) and off. Every row is first checked bitwise
against aten, storage and all, written into 0x5A bytes through ``out=`` where the op has
one (a word the kernel leaves unwritten shows). The floor is the minimum bytes moved over
the fill/copy bandwidth of the same run.

    python benchmarks/bench_family.py [--out DIR] [--quick] [--only REGEX] [--set NAME=VALUE]
    python benchmarks/bench_family.py --spin-us 200  # GPU side: BENCHMARKS.md's family table
    python benchmarks/bench_family.py --smoke      # any machine: a tiny grid, checked, timed
                                                   # with a wall clock (CPU: interpreted)

Writes ``family.csv`` and ``family.json`` under ``--out`` (default ``$OUT`` or
``bench-out``) and prints each row, then the geomean and the worst of aten/ours over the
rows whose result is 1 MB or more (the goals: >= 1.2x and >= 1.0x).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import ModuleType

# isort: off
# diagfuzz.ops first: on a machine without a GPU it selects Triton's interpreter, which
# must happen before triton is imported (bench_diagonal imports it) for --smoke to run.
import diagfuzz.ops as ops
import torch
import triton
import flaggems_column
import ops_at
from bench_diagonal import (DTYPES, bandwidths, interleaved_us, random_bits, variants,
                            warm_up)
# isort: on
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.ops import _tiling

MB = 1 << 20
#: Rows writing less than this are timed in --small-rounds rounds (bench_diagonal's reason).
SMALL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Shape:
    """One row. ``sizes``: the result's sizes for ``embed`` (its input is the diagonal
    ``(offset, dim1, dim2)`` of that shape) and the input's sizes for ``scatter`` (src is
    that diagonal's shape) and ``diag`` (1-D or 2-D). ``strided``: the input is read with
    inner stride 2 (scatter: a view of every other element, so the storage it clones is
    twice the view). ``src_diag_major``: scatter's src is laid out diagonal dim outermost
    (a permuted contiguous tensor), so a diagonal of runs reads src's runs contiguously."""

    op: str  # "embed", "scatter" or "diag"
    sizes: tuple[int, ...]
    offset: int
    dim1: int
    dim2: int
    dtype: str
    strided: bool = False
    src_diag_major: bool = False

    def label(self) -> str:
        size = "x".join(map(str, self.sizes))
        layout = "strided" if self.strided else "contig"
        if self.src_diag_major:
            layout += " src-diag-major"
        return (f"{self.op:7s} {size:>17s} o={self.offset:<5d} d=({self.dim1},{self.dim2}) "
                f"{self.dtype:8s} {layout}")


@dataclass
class Row:
    """Timings (µs) and ratios for one Shape."""

    shape: Shape
    out_bytes: int
    moved_bytes: int
    aten_us: float
    two_launch_us: float
    ours_us: float
    floor_us: float
    extra: dict = field(default_factory=dict)

    def flat(self) -> dict:
        d = dict(asdict(self.shape))
        d["sizes"] = "x".join(map(str, self.shape.sizes))
        d.update(out_bytes=self.out_bytes, moved_bytes=self.moved_bytes, aten_us=self.aten_us,
                 two_launch_us=self.two_launch_us, ours_us=self.ours_us,
                 floor_us=self.floor_us, vs_aten=self.aten_us / self.ours_us,
                 vs_two_launch=self.two_launch_us / self.ours_us,
                 floor_frac=self.floor_us / self.ours_us, **self.extra)
        return d


def grid(quick: bool) -> list[Shape]:
    """The grid of diag_embed, diagonal_scatter and diag: 2-D 64²..16384², batched 3-D/4-D,
    offsets 0/±1/large, float32/bfloat16/float16/int8/bool, contiguous and strided."""
    shapes: list[Shape] = []
    sides = [64, 1024, 8192] if quick else [64, 256, 1024, 2048, 4096, 8192, 16384]
    for op in ("embed", "scatter"):
        for dtype in DTYPES:
            shapes += [Shape(op, (n, n), 0, 0, 1, dtype) for n in sides]
        for n in ([1024] if quick else [1024, 8192]):
            shapes += [Shape(op, (n, n), off, 0, 1, "float32") for off in (1, -1, n // 2)]
            shapes.append(Shape(op, (n, n), 0, 0, 1, "float32", strided=True))
            shapes.append(Shape(op, (n, n), 0, 0, 1, "bfloat16", strided=True))
        batched = [((64, 512, 512), 0, 1, 2), ((512, 512, 64), 0, 0, 1),
                   ((512, 64, 512), 3, 2, 0), ((8, 256, 8, 256), 1, 1, 3),
                   ((16, 16, 256, 256), 0, 0, 1), ((32, 128, 128, 4), -2, 1, 2),
                   ((4096, 8, 8), 0, 1, 2)]
        if quick:
            batched = batched[:3]
        for sizes, off, d1, d2 in batched:
            if op == "embed" and sizes[d1] != sizes[d2]:
                continue  # diag_embed's two dims have one size
            for dtype in ("float32", "bfloat16", "int8"):
                shapes.append(Shape(op, sizes, off, d1, d2, dtype))
            shapes.append(Shape(op, sizes, off, d1, d2, "float32", strided=True))
    if not quick:  # runs read from a src whose runs are contiguous too
        shapes += [Shape("scatter", (16, 16, 256, 256), 0, 0, 1, dtype, src_diag_major=True)
                   for dtype in ("float32", "bfloat16", "int8")]
    for n in ([1024] if quick else [1024, 8192]):
        for dtype in ("float32", "bfloat16"):
            shapes.append(Shape("diag", (n,), 1, 0, 0, dtype))
            shapes.append(Shape("diag", (n, n), -1, 0, 0, dtype))
    return shapes


def smoke_grid() -> list[Shape]:
    """A few tiny rows of every op and path (CPU: each call runs interpreted)."""
    return [Shape("embed", (8, 8), 1, 0, 1, "float32"),
            Shape("embed", (2, 4, 4), -1, 1, 2, "bool"),
            Shape("scatter", (8, 8), 0, 0, 1, "float32"),
            Shape("scatter", (8, 8), 2, 1, 0, "bfloat16", strided=True),
            Shape("scatter", (3, 4, 4), -1, 1, 2, "int8"),
            Shape("diag", (8,), 1, 0, 0, "float16"),
            Shape("diag", (8, 8), -1, 0, 0, "float32")]


def prepare(s: Shape, gems: dict[str, Callable] | None = None,
            against: ModuleType | None = None
            ) -> tuple[dict[str, Callable[[], torch.Tensor]], dict[str, Callable], int, int]:
    """The callables (aten, two_launch, ours, flaggems where ``gems`` has the op, and
    ``against``: our kernels at another revision, ``ops_at``, for embed and scatter), the
    checks (name -> () -> bool), the bytes the result writes and the fewest bytes a kernel
    moves (reads + writes)."""
    gems = gems or {}
    dtype = DTYPES[s.dtype]
    args = (s.offset, s.dim1, s.dim2)
    if s.op == "embed":
        diag = diagonal_of(s.sizes, *args)
        x = random_bits(diag.shape, dtype, s.strided)
        sizes = list(s.sizes)

        def two_launch() -> torch.Tensor:
            z = torch.zeros(sizes, dtype=dtype, device=ops.DEVICE)
            z.diagonal(*args).copy_(x)
            return z

        fns = {"aten": lambda: torch.ops.aten.diag_embed(x, *args),
               "two_launch": two_launch, "ours": lambda: ops.diag_embed(x, *args)}
        if "embed" in gems:
            fns["flaggems"] = lambda: gems["embed"](x, *args)
        if against is not None:
            fns["against"] = lambda: against.diag_embed(x, *args)
        checks = {"out": lambda: _out_check(ops.diag_embed_out, fns["aten"], x, *args)}
        out_bytes = math.prod(s.sizes) * dtype.itemsize
        return fns, checks, out_bytes, out_bytes + x.numel() * dtype.itemsize
    if s.op == "scatter":
        x = random_bits(s.sizes, dtype, s.strided)
        src_shape = diagonal_of(s.sizes, *args).shape
        if s.src_diag_major:  # the diagonal dim outermost in memory
            src = random_bits((src_shape[-1], *src_shape[:-1]), dtype, False).movedim(0, -1)
        else:
            src = random_bits(src_shape, dtype, False)

        def two_launch() -> torch.Tensor:
            storage = x.as_strided((x.untyped_storage().nbytes() // dtype.itemsize,), (1,), 0)
            out = storage.clone().as_strided(x.shape, x.stride(), x.storage_offset())
            out.diagonal(*args).copy_(src)
            return out

        fns = {"aten": lambda: torch.ops.aten.diagonal_scatter(x, src, *args),
               "two_launch": two_launch, "ours": lambda: ops.diagonal_scatter(x, src, *args)}
        if against is not None:
            fns["against"] = lambda: against.diagonal_scatter(x, src, *args)
        checks = {"storage": lambda: _storage_equal(fns["ours"](), fns["aten"]()),
                  "out": lambda: _out_check(ops.diagonal_scatter_out, fns["aten"], x, src,
                                            *args)}
        storage_bytes = x.untyped_storage().nbytes()
        return fns, checks, storage_bytes, 2 * storage_bytes + 2 * src.numel() * dtype.itemsize
    x = random_bits(s.sizes, dtype, s.strided)
    if x.dim() == 1:
        def two_launch() -> torch.Tensor:
            n = x.shape[0] + abs(s.offset)
            z = torch.zeros(n, n, dtype=dtype, device=ops.DEVICE)
            z.diagonal(s.offset).copy_(x)
            return z
    else:
        def two_launch() -> torch.Tensor:
            view = x.diagonal(s.offset)
            return torch.empty(view.shape, dtype=dtype, device=ops.DEVICE).copy_(view)

    # "ours" is torch.diag itself, called with the registration on (``time_row``).
    fns = {"aten": lambda: torch.diag(x, s.offset), "two_launch": two_launch,
           "ours": lambda: torch.diag(x, s.offset)}
    if "diag" in gems:
        fns["flaggems"] = lambda: gems["diag"](x, s.offset)
    result = torch.diag(x, s.offset)
    out_bytes = result.numel() * dtype.itemsize
    read = (x.numel() if x.dim() == 1 else result.numel()) * dtype.itemsize
    return fns, {}, out_bytes, out_bytes + read


def _sentinel_like(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    out.view(torch.uint8).fill_(0x5A)
    return out


def _out_check(overload: Callable, aten: Callable[[], torch.Tensor], *args) -> bool:
    """Ours through ``out=`` into 0x5A bytes (the one-launch path), bitwise against aten."""
    want = aten().contiguous()
    got = overload(*args, out=_sentinel_like(want))
    return _same_bits(got, want)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if (a.shape, a.stride(), a.dtype) != (b.shape, b.stride(), b.dtype):
        return False
    return bool(torch.equal(_storage_bytes(a.contiguous()), _storage_bytes(b.contiguous())))


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _storage_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same metadata and every byte of the storage (a scatter result clones its input's)."""
    return ((a.shape, a.stride(), a.storage_offset(), a.dtype)
            == (b.shape, b.stride(), b.storage_offset(), b.dtype)
            and bool(torch.equal(_storage_bytes(a), _storage_bytes(b))))


def check(s: Shape, fns: dict, checks: dict) -> list[str]:
    """What of the row differs from aten (empty: nothing)."""
    with ops.use_triton(s.op == "diag"):
        ours = fns["ours"]()
    with ops.use_triton(False):
        wrong = [] if _same_bits(ours, fns["aten"]()) else ["functional"]
        wrong += [name for name, ok in checks.items() if not ok()]
        if "against" in fns and not _same_bits(fns["against"](), fns["aten"]()):
            wrong.append("against")
    return wrong


def time_row(s: Shape, fns: dict, timer: Callable[[dict], dict[str, float]]) -> dict:
    """Each callable's time. diag's "ours" is timed apart with the registration on: a
    switch per call re-registers every kernel (~0.5 ms of host time on an H200 host)."""
    if s.op != "diag":
        with ops.use_triton(False):
            return timer(fns)
    with ops.use_triton(False):
        times = timer({k: v for k, v in fns.items() if k != "ours"})
    with ops.use_triton():
        times.update(timer({"ours": fns["ours"]}))
    return times


def warm_fns(s: Shape, gems: dict, against: ModuleType | None) -> dict[str, Callable]:
    """A row's callables as bench_diagonal's ``warm_up`` calls them (the registration off,
    as ``main`` leaves it; diag's "ours" with it on, as ``time_row`` times it)."""
    fns = prepare(s, gems, against)[0]
    flaggems_column.drop_if_raises(fns, ops.use_triton)
    if s.op == "diag":
        unregistered = fns["ours"]

        def registered() -> torch.Tensor:
            with ops.use_triton():
                return unregistered()

        fns["ours"] = registered
    return fns


def wall_us(fns: dict[str, Callable], rounds: int) -> dict[str, float]:
    """Wall-clock medians per call (the smoke mode's timer: no CUDA events needed)."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - t0) * 1e6)
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "bench-out")
    parser.add_argument("--quick", action="store_true", help="a small grid")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny grid, wall-clock timed: runs on CPU (interpreted) too")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="set a knob of diagfuzz.ops._tiling.Tuning "
                             "(e.g. SCATTER_BLOCK_BYTES=8192) for this run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-rounds", type=int, default=9)
    parser.add_argument("--spin-us", type=float, default=0.0, metavar="US",
                        help="a GPU spin of US µs before each timed call, with the L2 flush "
                             "(bench_diagonal.spun_median_us): host time up to about US + "
                             "55 µs a call stays out of the kernel times")
    parser.add_argument("--only", default=None, metavar="REGEX")
    parser.add_argument("--against", metavar="DIR",
                        help="a column for our kernels at another revision: the package "
                             "benchmarks/ops_at.py extracted into DIR")
    parser.add_argument("--flaggems", action="store_true",
                        help="a column for FlagGems' shipped kernel (embed, diag; "
                             "benchmarks/flaggems_column.py)")
    args = parser.parse_args()
    gems = flaggems_column.load() if args.flaggems else {}
    overrides = _tiling.apply_settings(args.set)
    if not args.smoke and ops.INTERPRET:
        print("bench_family: needs a CUDA GPU (kernels run interpreted here); --smoke runs "
              "a tiny grid anywhere", file=sys.stderr)
        return 2
    ops.disable()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (interpreted)"
    meta = {"date": datetime.date.today().isoformat(), "gpu": gpu,
            "torch": torch.__version__, "triton": triton.__version__,
            "python": platform.python_version(), "command": " ".join(sys.argv),
            "overrides": overrides, "spin_us": args.spin_us}
    if gems:
        meta["flag_gems"] = flaggems_column.version()
    against = ops_at.load(args.against) if args.against else None
    if against is not None:
        meta["against"] = against.__name__
    fill_bw = copy_bw = float("nan")
    if not args.smoke:
        fill_bw, copy_bw = bandwidths()
        meta.update(fill_TBps=fill_bw / 1e12, copy_TBps=copy_bw / 1e12)
    shapes = smoke_grid() if args.smoke else grid(args.quick)
    if args.only:
        shapes = [s for s in shapes if re.search(args.only, s.label())]
    rows: list[Row] = []
    wrong: list[str] = []
    if not args.smoke:
        # A cold start read the grid's first rows 1.3-1.6x slow for aten and ours alike.
        meta["warm_up_s"] = warm_up(shapes, 4.0, lambda s: warm_fns(s, gems, against))
    for s in shapes:
        fns, checks, out_bytes, moved = prepare(s, gems, against)
        gems_error = flaggems_column.drop_if_raises(fns, ops.use_triton)
        failed = check(s, fns, checks)
        if failed:
            wrong.append(f"{s.label()}: {failed}")
        rounds = args.small_rounds if out_bytes < SMALL_BYTES else args.rounds
        times = time_row(s, fns, (lambda f: wall_us(f, 3)) if args.smoke
                         else (lambda f, r=rounds: interleaved_us(f, args.quick, r,
                                                                  args.spin_us)))
        floor = moved / copy_bw * 1e6 if not args.smoke else float("nan")
        row = Row(s, out_bytes, moved, times["aten"], times["two_launch"], times["ours"],
                  floor)
        gems_note = f" flaggems raised {gems_error}" if gems_error else ""
        if gems_error:
            row.extra["flaggems_error"] = gems_error
        if "flaggems" in times:
            row.extra.update(flaggems_us=times["flaggems"],
                             vs_flaggems=times["flaggems"] / row.ours_us,
                             flaggems_bitwise=gems_equal(fns))
            gems_note = (f" flaggems {times['flaggems']:9.1f} x{row.extra['vs_flaggems']:5.2f}"
                         + ("" if row.extra["flaggems_bitwise"] else " (flaggems differs)"))
        if "against" in times:
            row.extra.update(ops_at.column(times["against"], row.ours_us))
        rows.append(row)
        print(f"{s.label()} aten {row.aten_us:9.1f} two {row.two_launch_us:9.1f} "
              f"ours {row.ours_us:9.1f} x{row.aten_us / row.ours_us:5.2f}{gems_note}"
              f"{ops_at.row_note(row.extra)}"
              + (f"  WRONG {failed}" if failed else ""), flush=True)
    meta["variants"] = {name: variants(kernel) for name, kernel in _kernels().items()}
    meta["bitwise_mismatches"] = wrong
    big = [r.aten_us / r.ours_us for r in rows if r.out_bytes >= MB]
    meta["geomean_vs_aten_1MB_plus"] = geomean(big)
    meta["worst_vs_aten_1MB_plus"] = min(big) if big else None
    meta["geomean_vs_aten_all"] = geomean([r.aten_us / r.ours_us for r in rows])
    meta["geomean_vs_two_launch_all"] = geomean([r.two_launch_us / r.ours_us for r in rows])
    vs_gems = [r.extra["vs_flaggems"] for r in rows if "vs_flaggems" in r.extra]
    meta["geomean_vs_flaggems"] = geomean(vs_gems)
    slowest = sorted(rows, key=lambda r: r.aten_us / r.ours_us)[:8]
    meta["slowest_vs_aten"] = [(r.shape.label(), r.out_bytes, r.aten_us / r.ours_us)
                               for r in slowest]
    if against is not None:
        meta["against_summary"] = ops_at.summary([(r.shape.label(), r.extra) for r in rows])
    flat = [r.flat() for r in rows]
    with open(os.path.join(args.out, "family.json"), "w") as f:
        json.dump({"meta": meta, "rows": flat}, f, indent=1)
    if flat:
        with open(os.path.join(args.out, "family.csv"), "w", newline="") as f:
            names = list(dict.fromkeys(k for d in flat for k in d))
            w = csv.DictWriter(f, fieldnames=names)
            w.writeheader()
            w.writerows(flat)
    print(f"\n## {gpu} torch {meta['torch']} triton {meta['triton']} {meta['date']}")
    print(f"rows of 1 MB and more: geomean aten/ours {meta['geomean_vs_aten_1MB_plus']}, "
          f"worst {meta['worst_vs_aten_1MB_plus']}; variants {meta['variants']}")
    print(f"all rows: geomean aten/ours {meta['geomean_vs_aten_all']}, two-launch/ours "
          f"{meta['geomean_vs_two_launch_all']}, flaggems/ours {meta['geomean_vs_flaggems']}")
    print("slowest rows against aten:")
    for label, out_bytes, ratio in meta["slowest_vs_aten"]:
        print(f"  {label} {out_bytes / MB:9.2f} MB  x{ratio:.2f}")
    if against is not None:
        ops_at.print_summary(meta["against_summary"])
    print(f"bitwise mismatches: {wrong or 'none'}")
    return 1 if wrong else 0


def geomean(ratios: list[float]) -> float | None:
    return math.exp(statistics.fmean(map(math.log, ratios))) if ratios else None


def gems_equal(fns: dict) -> bool:
    """FlagGems' result bitwise equal to aten's (registration off: both are theirs)."""
    with ops.use_triton(False):
        return _same_bits(fns["flaggems"](), fns["aten"]())


def _kernels() -> dict:
    import importlib

    return {name: getattr(importlib.import_module(f"diagfuzz.ops.{name}"), f"_{name}_kernel")
            for name in ("diagonal_backward", "diagonal_copy", "diagonal_scatter")}


if __name__ == "__main__":
    sys.exit(main())
