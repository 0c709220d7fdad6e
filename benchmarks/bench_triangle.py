"""Side-by-side benchmark of diagfuzz's triu/tril (and triu_/tril_, and ``.out``) against
aten, on a GPU, in bench_diagonal.py's way of timing.

Each row is first checked bitwise against aten on random bit patterns (never zeros: zeros
hide unwritten words; ``.out`` rows write into 0x5A bytes), then timed in interleaved
rounds (``triton.testing.do_bench`` medians with CUDA events, L2 flushed before each call):
aten eager (diagfuzz's registration off: the kernels are called directly) and ours, and
FlagGems' function where its wheel is installed and it has the op. In-place rows time the
op on the same tensor over and over (idempotent: each call writes the same zeros).

    python benchmarks/bench_triangle.py [--out DIR] [--quick] [--tile ROWS,ROW_BYTES,WARPS]

Prints each row and the geomean and worst of aten/ours over the rows of 1 MB or more (the
goal: at least 1.0x, i.e. as fast as aten); writes ``triangle.json`` under ``--out``
(default ``$OUT`` or ``bench-out``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_diagonal as bd

from diagfuzz import ops
from diagfuzz.ops import triangle

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "int64": torch.int64, "bool": torch.bool}

#: (op, sizes, dtype, diagonal, input layout): every result is 1 MB or more.
ROWS = [
    ("triu", (4096, 4096), "float32", 0, "contiguous"),
    ("tril", (4096, 4096), "float32", -3, "contiguous"),
    ("triu", (8192, 8192), "bfloat16", 1, "contiguous"),
    ("tril", (2048, 2048), "float16", 0, "contiguous"),
    ("triu", (64, 512, 512), "float32", 0, "contiguous"),
    ("tril", (8, 4, 256, 1024), "float16", 7, "contiguous"),
    ("triu", (4096, 4096), "float32", 0, "transposed"),
    ("tril", (4096, 4096), "float32", 0, "sliced"),
    ("triu", (2048, 2048), "int64", 100, "contiguous"),
    ("tril", (4096, 4096), "bool", -1, "contiguous"),
    ("triu", (1024, 8192), "float32", -500, "contiguous"),
    ("triu.out", (4096, 4096), "float32", 0, "contiguous"),
    ("triu_", (4096, 4096), "float32", 0, "contiguous"),
    ("tril_", (4096, 4096), "float32", 1, "contiguous"),
    ("tril_", (64, 512, 512), "bfloat16", 0, "contiguous"),
    ("triu_", (4096, 4096), "float32", 0, "transposed"),
]


def make_input(sizes: tuple[int, ...], dtype: torch.dtype, layout: str) -> torch.Tensor:
    """Random bits of ``sizes`` laid out as ``layout`` says."""
    if layout == "transposed":
        return bd.random_bits((*sizes[:-2], sizes[-1], sizes[-2]), dtype, False).transpose(-2, -1)
    return bd.random_bits(sizes, dtype, layout == "sliced")


def calls(op: str, x: torch.Tensor, k: int, gems: object) -> dict[str, Callable[[], object]]:
    """What a row times: aten's call, ours and (if it has the op) FlagGems'."""
    upper = op.startswith("triu")
    name = "triu" if upper else "tril"
    if op.endswith(".out"):
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        fns = {"aten": lambda: torch.ops.aten.__getattr__(name).out(x, k, out=out),
               "ours": lambda: getattr(ops, f"{name}_out")(x, k, out=out)}
    elif op.endswith("_"):
        fns = {"aten": lambda: torch.ops.aten.__getattr__(op)(x, k),
               "ours": lambda: getattr(ops, op)(x, k)}
    else:
        fns = {"aten": lambda: torch.ops.aten.__getattr__(name)(x, k),
               "ours": lambda: getattr(ops, name)(x, k)}
    flat = _flat_plan(x, k, upper, op.endswith("_"))
    if flat is not None:  # the flat kernel on the same call, for the tiled one's rows
        if op.endswith("_"):
            fns["ours_flat"] = lambda: triangle._launch(flat, (x, x))
        else:
            fns["ours_flat"] = lambda: triangle._launch(
                flat, (torch.empty(x.shape, dtype=x.dtype, device=x.device), x))
    fn = None if gems is None or op.endswith(".out") else getattr(gems, op, None)
    if fn is not None:
        try:  # FlagGems' dtypes are fewer than aten's: a column only where it runs
            fn(x, k)
        except Exception:
            fn = None
    if fn is not None:
        fns["flaggems"] = lambda: fn(x, k)
    return fns


def _flat_plan(x: torch.Tensor, k: int, upper: bool, in_place: bool) -> object:
    """The flat kernel's plan for a call the tiled kernel serves (None otherwise)."""
    if triangle._plan_tiles(x, k, upper, in_place) is None:
        return None
    saved = triangle.TILE_MIN_ROWS
    triangle.TILE_MIN_ROWS = 1 << 62
    try:
        return triangle._plan(x, max(-x.shape[-2], min(x.shape[-1], k)), upper, in_place)
    finally:
        triangle.TILE_MIN_ROWS = saved


def checked(op: str, sizes: tuple[int, ...], dtype: torch.dtype, k: int, layout: str) -> bool:
    """Ours bitwise against aten on fresh random bits (in-place: the whole input after)."""
    name = op.split(".")[0].rstrip("_")
    x = make_input(sizes, dtype, layout)
    if op.endswith("_"):
        want, got = x.clone(), x.clone()
        torch.ops.aten.__getattr__(op)(want, k)
        result = getattr(ops, op)(got, k)
        return result is got and bd.same_bits(got, want)
    want = torch.ops.aten.__getattr__(name)(x, k)
    if op.endswith(".out"):
        got = getattr(ops, f"{name}_out")(x, k, out=bd.sentinel(want.shape, dtype))
    else:
        got = getattr(ops, name)(x, k)
    return bd.same_bits(got, want)


def flaggems() -> object:
    """FlagGems' ops module where its wheel is installed, else None."""
    try:
        import flag_gems.ops as gems
    except Exception:
        return None
    return gems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--tile", metavar="ROWS,ROW_BYTES,WARPS",
                        help="the tiled kernel's tile (rows, bytes along a row) and warps "
                             "for this run, in place of ops/triangle.py's")
    args = parser.parse_args()
    name = "triangle.json"
    if args.tile:
        rows_, bytes_, warps = (int(v) for v in args.tile.split(","))
        triangle.TILE_ROWS, triangle.TILE_ROW_BYTES, triangle.TILE_WARPS = rows_, bytes_, warps
        name = f"triangle-tile-{rows_}-{bytes_}-{warps}.json"
        print(f"tile: {rows_} rows of {bytes_} bytes, {warps} warps")
    if not torch.cuda.is_available():
        print("bench_triangle: needs a CUDA GPU", file=sys.stderr)
        return 2
    gems = flaggems()
    rounds = 3 if args.quick else 7
    rows = []
    for op, sizes, dtype_name, k, layout in ROWS:
        dtype = DTYPES[dtype_name]
        ok = checked(op, sizes, dtype, k, layout)
        x = make_input(sizes, dtype, layout)
        times = bd.interleaved_us(calls(op, x, k, gems), args.quick, rounds)
        mb = math.prod(sizes) * x.element_size() / 2**20
        row = {"op": op, "sizes": list(sizes), "dtype": dtype_name, "diagonal": k,
               "layout": layout, "MB": round(mb, 1), "bitwise": ok,
               **{f"{name}_us": round(us, 2) for name, us in times.items()},
               "aten/ours": round(times["aten"] / times["ours"], 3)}
        rows.append(row)
        gem = f" flaggems {times['flaggems']:9.1f}" if "flaggems" in times else ""
        gem += f" flat {times['ours_flat']:9.1f}" if "ours_flat" in times else ""
        print(f"{op:9} {sizes!s:18} {dtype_name:9} k={k:<5} {layout:10} {mb:7.1f} MB "
              f"bitwise {'ok' if ok else 'WRONG'}  aten {times['aten']:9.1f} us  ours "
              f"{times['ours']:9.1f} us{gem}  aten/ours {row['aten/ours']:.3f}", flush=True)
    big = [r["aten/ours"] for r in rows if r["MB"] >= 1]
    geomean = math.exp(sum(math.log(v) for v in big) / len(big))
    print(f"rows of 1 MB or more: {len(big)}, aten/ours geomean {geomean:.3f}, worst "
          f"{min(big):.3f}; bitwise {'all ok' if all(r['bitwise'] for r in rows) else 'WRONG'}")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "triton": __import__("triton").__version__,
            "flaggems": getattr(sys.modules.get("flag_gems"), "__version__", None)}
    meta["tile"] = [triangle.TILE_ROWS, triangle.TILE_ROW_BYTES, triangle.TILE_WARPS]
    (args.out / name).write_text(json.dumps({"meta": meta, "rows": rows,
                                                        "geomean": geomean}, indent=1))
    return 0 if all(r["bitwise"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
