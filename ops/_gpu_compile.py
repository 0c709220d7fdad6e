"""Compile every GPU variant of the kernels for an H200 (sm_90) on a machine with no GPU.

Every triton wheel ships the front end and the NVIDIA back end (LLVM, ptxas), so a plan made
for a GPU compiles here to PTX and a cubin. The interpreter runs a kernel's Python and
accepts code the compiler refuses: a name bound to a scalar in one branch of a runtime ``if``
and to a vector in the other passed every CPU test of the transposed runs and failed their
first compile on the H200. Run it as a module (it runs itself again with
``DIAGFUZZ_COMPILE_ONLY=1``, set before ``diagfuzz.ops`` is imported: kernels are then JIT
functions and plans are GPU plans)::

    python -m diagfuzz.ops._gpu_compile [--set NAME=VALUE ...] [--json PATH]

It plans ``GEOMETRIES`` on meta tensors (nothing is allocated or launched), compiles each
distinct variant once, prints one line per variant and exits 1 naming the geometry of any
variant that does not compile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import torch

from diagfuzz.core.geometry import diagonal_of
from diagfuzz.ops import _runtime, _tiling
from diagfuzz.ops._tiling import LaunchPlan, fits_int32

#: The H200's compute capability and warp size.
H200 = ("cuda", 90, 32)

_WORD_TYPES = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}

#: (op, input sizes, offset, dim1, dim2): small and large outputs, narrow and wide runs, runs
#: in rows and in columns, transposable runs (16x16x256x256 d=(0,1)), and 64-bit indices
#: (more than 2**31 elements, or a tile's masked lanes past int32); each is planned for every
#: dtype in DTYPES.
GEOMETRIES = [
    ("diagonal_backward", (64, 64), 1, 0, 1),
    ("diagonal_backward", (4, 8, 8, 3), 0, 1, 2),
    ("diagonal_backward", (4, 4, 1000), 0, 0, 1),  # small output, wide runs
    ("diagonal_backward", (723, 723, 4096), 0, 0, 1),  # transposed, masked lanes past int32
    ("diagonal_backward", (2, 2, 2**30), 0, 0, 1),  # transposed, > 2**31 elements
    ("diagonal_backward", (2048, 2048), 0, 0, 1),
    ("diagonal_backward", (64, 512, 512), -1, 1, 2),
    ("diagonal_backward", (16, 16, 256, 256), 0, 0, 1),
    ("diagonal_backward", (65536, 40000), 0, 0, 1),
    ("diagonal_copy", (64, 64), 1, 0, 1),
    ("diagonal_copy", (4, 8, 8, 3), 0, 1, 2),
    ("diagonal_copy", (256, 8192, 8192), 0, 1, 2),
    ("diagonal_copy", (65536, 40000), 0, 0, 1),
    ("diagonal_copy", (16, 16, 256, 256), 0, 0, 1),  # transposed tiles
    ("diagonal_copy", (4, 4, 2**30), 0, 0, 1),  # transposed, > 2**31 elements
]
DTYPES = (torch.int8, torch.float16, torch.float32, torch.float64, torch.complex128)


def plan_of(op: str, sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
            dtype: torch.dtype) -> LaunchPlan | None:
    """The plan a GPU makes for this call, from a meta tensor of the contiguous argument."""
    module = sys.modules[f"diagfuzz.ops.{op}"]
    diag = diagonal_of(sizes, offset, dim1, dim2)
    if op == "diagonal_backward":
        grad = torch.empty(diag.shape, dtype=dtype, device="meta")
        return module._plan(tuple(sizes), grad, diag)
    return module._plan(torch.empty(sizes, dtype=dtype, device="meta"), diag)


def kernel_of(op: str) -> Any:
    module = sys.modules[f"diagfuzz.ops.{op}"]
    return getattr(module, f"_{op}_kernel")


def compile_plan(kernel: Any, plan: LaunchPlan, word_bytes: int, *, aligned: bool = True,
                 target: tuple[str, int, int] = H200) -> Any:
    """Compile the variant ``plan`` launches for two tensors of ``word_bytes``-byte words
    (result first); returns Triton's compiled kernel (``.asm`` holds ttir ... cubin).

    Integers are typed as Triton's binder types them (i32 when they fit); ``aligned`` marks
    the result pointer 16-byte aligned, as the launcher's variant key does.
    """
    from diagfuzz.adapters.triton import compile_for

    names = kernel.arg_names
    constexprs = dict(plan.constexprs)
    runtime = [name for name in names if name not in constexprs]
    if len(runtime) != 2 + len(plan.ints):
        raise ValueError(f"{kernel.__name__} takes {len(runtime)} runtime arguments, the "
                         f"plan gives 2 pointers and {len(plan.ints)} integers")
    pointer = f"*{_WORD_TYPES[word_bytes]}"
    signature = dict.fromkeys(names, "constexpr")
    signature.update({runtime[0]: pointer, runtime[1]: pointer})
    for name, value in zip(runtime[2:], plan.ints, strict=True):
        signature[name] = "i32" if fits_int32((value,)) else "i64"
    attrs = {(0,): [["tt.divisibility", 16]]} if aligned else {}
    return compile_for(kernel, signature, constexprs, attrs, target, plan.num_warps)


def compile_all(geometries: list[tuple] = GEOMETRIES,
                dtypes: tuple[torch.dtype, ...] = DTYPES) -> list[dict[str, Any]]:
    """Plan every geometry for every dtype; compile each distinct variant once."""
    from diagfuzz.core.words import words_per_element

    rows: dict[tuple, dict[str, Any]] = {}
    for op, sizes, offset, dim1, dim2 in geometries:
        for dtype in dtypes:
            plan = plan_of(op, sizes, offset, dim1, dim2, dtype)
            if plan is None:
                continue
            word_bytes = dtype.itemsize // words_per_element(dtype)
            key = (op, word_bytes, plan.num_warps, tuple(plan.constexprs.items()),
                   tuple(fits_int32((v,)) for v in plan.ints))
            if key in rows:
                continue
            row = {"op": op, "geometry": f"{'x'.join(map(str, sizes))} o={offset} "
                                         f"d=({dim1},{dim2}) {str(dtype).removeprefix('torch.')}",
                   "word_bytes": word_bytes, "num_warps": plan.num_warps,
                   "constexprs": plan.constexprs}
            t0 = time.perf_counter()
            try:
                compiled = compile_plan(kernel_of(op), plan, word_bytes)
                row["shared_bytes"] = compiled.metadata.shared
                row["ptx_lines"] = compiled.asm["ptx"].count("\n")
            except Exception as exc:  # named and reported; the run goes on
                row["error"] = f"{type(exc).__name__}: {exc}"
            row["seconds"] = round(time.perf_counter() - t0, 2)
            rows[key] = row
    return list(rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a planning constant of ops._tiling (e.g. TRANSPOSE_RUNS=1)")
    parser.add_argument("--json", help="write the variants here")
    args = parser.parse_args(argv)
    if not _runtime.COMPILE_ONLY:  # kernels were decorated for this machine: start afresh
        env = {**os.environ, _runtime.COMPILE_ONLY_ENV: "1", "TRITON_INTERPRET": "0"}
        argv = sys.argv[1:] if argv is None else argv
        return subprocess.run([sys.executable, "-m", "diagfuzz.ops._gpu_compile", *argv],
                              env=env).returncode
    _tiling.override(args.set)
    rows = compile_all()
    for row in rows:
        how = row.get("error") or f"{row['seconds']} s, {row['ptx_lines']} PTX lines"
        shown = {k: v for k, v in row["constexprs"].items() if k not in ("SELECT_INDEX",)}
        print(f"{row['op']:18} {row['geometry']:34} {how}  {shown}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    failed = [row for row in rows if "error" in row]
    print(f"{len(rows) - len(failed)}/{len(rows)} variants compiled for "
          f"sm_{H200[1]}" + (f"; failed: {[row['geometry'] for row in failed]}"
                             if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
