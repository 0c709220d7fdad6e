"""Host cost of each way to launch diagonal_copy's compiled kernel (a benchmark, not a test).

Whether ``Launcher``'s direct path is active on this Triton, and per launch, back to back,
synchronised once at the end: ``Launcher`` (plan given), its ``_run``, Triton's own
``CompiledKernel[grid]``, the bare compiled launcher with no hooks, ``torch.empty`` and
aten's whole ``diagonal_copy``. Needs a CUDA GPU.

    python benchmarks/launch_paths.py
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch
import triton
from bench_diagonal import host_us  # back to back, synchronised once (this directory)

import diagfuzz.ops as ops


def main() -> int:
    if ops.INTERPRET:
        print("launch_paths: needs a CUDA GPU")
        return 2
    copy_module = importlib.import_module("diagfuzz.ops.diagonal_copy")
    x = torch.randn(64, 64, device="cuda")
    for _ in range(3):
        copy_module.diagonal_copy(x, 0, 0, 1)
    launcher = copy_module._launch
    print(f"triton {triton.__version__}: direct path {launcher.direct}, "
          f"{len(launcher._direct)} direct entries")
    _, plan = copy_module._PLANS[copy_module._key(x, 0, 0, 1)]
    out = torch.empty(64, device="cuda")
    entry = next(iter(launcher._direct.values()))
    compiled, run, function, packed = entry
    args = (out.data_ptr(), x.data_ptr(), *plan.ints, *plan.constexprs.values())
    stream = torch.cuda.current_stream().cuda_stream
    rows: list[tuple[str, Callable[[], object]]] = [
        ("Launcher (plan and result given)", lambda: launcher(plan, (out, x))),
        ("Launcher._run", lambda: launcher._run(entry, 0, plan, (out, x))),
        ("CompiledKernel[grid](...)", lambda: compiled[(plan.n_programs, 1, 1)](*args)),
        ("bare launcher, no hooks",
         lambda: run(plan.n_programs, 1, 1, stream, function, packed, None, None, None, *args)),
        ("torch.empty(64)", lambda: torch.empty(64, device="cuda")),
    ]
    for name, fn in rows:
        print(f"{name:36s} {host_us(fn, calls=5000):6.1f} us")
    with ops.use_triton(False):
        aten_us = host_us(lambda: torch.ops.aten.diagonal_copy(x, 0, 0, 1), calls=5000)
    print(f"{'aten diagonal_copy (whole op)':36s} {aten_us:6.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
