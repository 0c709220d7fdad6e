"""Compile every GPU variant of the kernels for an H200 (sm_90) on a machine with no GPU.

Every triton wheel ships the front end and the NVIDIA back end (LLVM, ptxas), so a plan made
for a GPU compiles here to PTX and a cubin. The interpreter runs a kernel's Python and
accepts code the compiler refuses: a name bound to a scalar in one branch of a runtime ``if``
and to a vector in the other passed every CPU test of the transposed runs and failed their
first compile on the H200. Run it as a module (it runs itself again with
``DIAGFUZZ_COMPILE_ONLY=1``, set before ``diagfuzz.ops`` is imported: kernels are then JIT
functions and plans are GPU plans)::

    python -m diagfuzz.ops._gpu_compile [--set NAME=VALUE ...] [--ops OP,...] [--json PATH]

It plans ``GEOMETRIES`` on meta tensors (nothing is allocated or launched), compiles each
distinct variant once, prints one line per variant with its registers a thread and the bytes
it spills (the cubin's resource usage: a kernel holding 255 registers runs two programs an
SM) and exits 1 naming the geometry of any variant that does not compile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
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
#: dtype in DTYPES. ``diag_embed`` rows give its input's sizes (diagonal_backward's kernel);
#: ``diagonal_scatter`` rows plan a contiguous input (clone mode) and, as
#: ``diagonal_scatter:expanded``, the same input with a zero stride on its first dim (gather
#: mode, a dense result).
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
    ("diag_embed", (64,), 1, -2, -1),
    ("diag_embed", (8, 8), 0, 0, 2),
    ("diag_embed", (16, 4096), 0, -2, -1),  # large output
    ("diag_embed", (2, 40000), 0, -2, -1),  # > 2**31 elements
    ("diagonal_scatter", (64, 64), 1, 0, 1),
    ("diagonal_scatter", (4, 8, 8, 3), 0, 1, 2),
    ("diagonal_scatter", (4096, 4096), -1, 0, 1),  # large output
    ("diagonal_scatter", (512, 512, 64), 0, 0, 1),
    ("diagonal_scatter", (65536, 40000), 0, 0, 1),  # > 2**31 elements
    ("diagonal_scatter", (16, 16, 256, 256), 0, 0, 1),  # runs of 65,536 elements
    ("diagonal_scatter", (3, 3, 2**28), 0, 0, 1),  # runs, > 2**31 elements
    ("diagonal_scatter:expanded", (64, 64), 0, 0, 1),
    ("diagonal_scatter:expanded", (16, 256, 256), 1, 1, 2),
    ("diagonal_scatter:expanded", (3, 65536, 16384), 0, 1, 2),  # > 2**31 elements
]
DTYPES = (torch.int8, torch.float16, torch.float32, torch.float64, torch.complex128)


def plan_of(op: str, sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
            dtype: torch.dtype) -> LaunchPlan | None:
    """The plan a GPU makes for this call, from meta tensors of contiguous arguments."""
    module = sys.modules[f"diagfuzz.ops.{op.partition(':')[0]}"]
    if op == "diag_embed":
        embedded = module.embed_sizes(tuple(sizes), offset, dim1, dim2)
        backward = sys.modules["diagfuzz.ops.diagonal_backward"]
        return backward._plan(embedded, torch.empty(sizes, dtype=dtype, device="meta"),
                              diagonal_of(embedded, offset, dim1, dim2))
    diag = diagonal_of(sizes, offset, dim1, dim2)
    if op == "diagonal_backward":
        grad = torch.empty(diag.shape, dtype=dtype, device="meta")
        return module._plan(tuple(sizes), grad, diag)
    if op.startswith("diagonal_scatter"):
        source = torch.empty(sizes, dtype=dtype, device="meta")
        if op.endswith(":expanded"):
            source = source[:1].expand(sizes)
        src = torch.empty(diag.shape, dtype=dtype, device="meta")
        result = module._result(source)
        return module._plan(source, src, diag, result.clone, result.strides,
                            result.storage_offset, result.storage_numel)
    return module._plan(torch.empty(sizes, dtype=dtype, device="meta"), diag)


def kernel_of(op: str) -> Any:
    """The @triton.jit kernel ``op``'s plans launch (diag_embed: diagonal_backward's)."""
    name = {"diag_embed": "diagonal_backward"}.get(op, op.partition(":")[0])
    return getattr(sys.modules[f"diagfuzz.ops.{name}"], f"_{name}_kernel")


def aligned_of(op: str) -> int:
    """How many leading pointers ``op``'s launcher specialises on 16-byte alignment."""
    name = {"diag_embed": "diagonal_backward"}.get(op, op.partition(":")[0])
    return sys.modules[f"diagfuzz.ops.{name}"]._launch.aligned


def compile_plan(kernel: Any, plan: LaunchPlan, word_bytes: int, *, aligned: int | bool = 1,
                 target: tuple[str, int, int] = H200) -> Any:
    """Compile the variant ``plan`` launches for tensors of ``word_bytes``-byte words
    (result first; the kernel's leading runtime arguments that the plan's integers do not
    fill are the pointers); returns Triton's compiled kernel (``.asm`` holds ttir ... cubin).

    Integers are typed as Triton's binder types them (i32 when they fit); the first
    ``aligned`` pointers are marked 16-byte aligned, as the launcher's variant key does.
    """
    from diagfuzz.adapters.triton import compile_for

    names = kernel.arg_names
    constexprs = dict(plan.constexprs)
    runtime = [name for name in names if name not in constexprs]
    pointers = len(runtime) - len(plan.ints)
    if pointers < 2:
        raise ValueError(f"{kernel.__name__} takes {len(runtime)} runtime arguments, the "
                         f"plan gives {len(plan.ints)} integers: fewer than 2 pointers left")
    pointer = f"*{_WORD_TYPES[word_bytes]}"
    signature = dict.fromkeys(names, "constexpr")
    signature.update(dict.fromkeys(runtime[:pointers], pointer))
    for name, value in zip(runtime[pointers:], plan.ints, strict=True):
        signature[name] = "i32" if fits_int32((value,)) else "i64"
    attrs = {(names.index(runtime[i]),): [["tt.divisibility", 16]]
             for i in range(int(aligned))}
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
                compiled = compile_plan(kernel_of(op), plan, word_bytes,
                                        aligned=aligned_of(op))
                row["shared_bytes"] = compiled.metadata.shared
                row["ptx_lines"] = compiled.asm["ptx"].count("\n")
                row.update(resources(compiled.asm["cubin"]))
            except Exception as exc:  # named and reported; the run goes on
                row["error"] = f"{type(exc).__name__}: {exc}"
            row["seconds"] = round(time.perf_counter() - t0, 2)
            rows[key] = row
    return list(rows.values())


def resources(cubin: bytes) -> dict[str, int]:
    """Registers a thread and stack bytes (spills) of a cubin's kernel, as the cuobjdump
    shipped with Triton's NVIDIA back end reads them; empty where it cannot."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            usage = subprocess.run([tool, "-res-usage", f.name], capture_output=True,
                                   text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return {}
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    return {"registers": int(found[1]), "stack_bytes": int(found[2])} if found else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a knob of ops._tiling.Tuning (e.g. TRANSPOSE_RUNS=1)")
    parser.add_argument("--json", help="write the variants here")
    parser.add_argument("--ops", default="", metavar="OP,...",
                        help="only these ops' geometries (diagonal_scatter includes its "
                             "expanded rows); default: every op")
    args = parser.parse_args(argv)
    if not _runtime.COMPILE_ONLY:  # kernels were decorated for this machine: start afresh
        env = {**os.environ, _runtime.COMPILE_ONLY_ENV: "1", "TRITON_INTERPRET": "0"}
        argv = sys.argv[1:] if argv is None else argv
        return subprocess.run([sys.executable, "-m", "diagfuzz.ops._gpu_compile", *argv],
                              env=env).returncode
    _tiling.apply_settings(args.set)
    wanted = {op for op in args.ops.split(",") if op}
    unknown = wanted - {g[0].partition(":")[0] for g in GEOMETRIES}
    if unknown:
        parser.error(f"--ops: no geometries for {sorted(unknown)}")
    rows = compile_all([g for g in GEOMETRIES
                        if not wanted or g[0].partition(":")[0] in wanted])
    for row in rows:
        how = row.get("error") or (
            f"{row['seconds']} s, {row['ptx_lines']} PTX lines, "
            f"{row.get('registers', '?')} registers, {row.get('stack_bytes', '?')} B stack")
        shown = {k: v for k, v in row["constexprs"].items() if k not in ("SELECT_INDEX",)}
        print(f"{row['op']:25} {row['geometry']:34} {how}  {shown}")
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
