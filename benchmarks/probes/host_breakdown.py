"""Where a call's host time goes, without the kernel launch (a probe, not a test).

Replaces the launchers with no-ops and times aten's own op, ``torch.empty``, our wrapper
called directly, and our wrapper reached through aten's dispatcher (registration on). On a
GPU, ours minus aten is then the dispatcher's call into Python, our wrapper, and Triton's
launcher (BENCHMARKS.md, "Host time per call"). On a GPU it also times diagonal_copy with
its launch: Triton's compiled launcher alone, the Launcher alone, ours through aten, and
aten's. Runs on any device; on CPU it
needs no GPU at all.

    python benchmarks/probes/host_breakdown.py
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

import torch

import diagfuzz.ops as ops


def per_call_us(fn: Callable[[], object], calls: int = 20000) -> float:
    """Mean of ``calls`` back-to-back calls after a warm-up, in µs."""
    for _ in range(200):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    copy_module = importlib.import_module("diagfuzz.ops.diagonal_copy")
    backward_module = importlib.import_module("diagfuzz.ops.diagonal_backward")
    x = torch.randn(64, 64, device=ops.DEVICE)
    g = torch.randn(64, device=ops.DEVICE)
    aten = torch.ops.aten

    def no_launch(plan: object, tensors: object) -> None:
        return None

    launched = []
    if not ops.INTERPRET:  # with their launches (on a GPU; the interpreter takes ms a launch)
        launch = copy_module._launch
        copy_module.diagonal_copy(x, 0, 0, 1)
        _, plan = copy_module._PLANS[copy_module._key(x, 0, 0, 1)]
        out = torch.empty(64, device=ops.DEVICE)
        launched.append(("diagonal_copy's Launcher alone (plan and result given)",
                         per_call_us(lambda: launch(plan, (out, x)))))
        from diagfuzz.adapters.triton import launch_direct

        direct = next(iter(launch._direct.values()))
        stream = torch._C._cuda_getCurrentRawStream(x.device.index)
        args = (out.data_ptr(), x.data_ptr(), *plan.trailing_args)
        launched.append(("Triton's compiled launcher alone (its arguments given)",
                         per_call_us(lambda: launch_direct(direct, plan.n_programs, stream,
                                                           args))))
        with ops.use_triton(True):
            launched.append(("ours diagonal_copy through aten, with its launch",
                             per_call_us(lambda: aten.diagonal_copy(x, 0, 0, 1))))
        with ops.use_triton(False):
            launched.append(("aten diagonal_copy, with its launch",
                             per_call_us(lambda: aten.diagonal_copy(x, 0, 0, 1))))
        torch.cuda.synchronize()
    copy_module._launch = no_launch
    backward_module._launch = no_launch
    rows = []
    with ops.use_triton(False):
        rows.append(("aten diagonal_copy", lambda: aten.diagonal_copy(x, 0, 0, 1)))
        rows.append(("aten diagonal_backward",
                     lambda: aten.diagonal_backward(g, [64, 64], 0, 0, 1)))
        rows.append(("torch.empty(64)", lambda: torch.empty(64, device=ops.DEVICE)))
        timed = [(name, per_call_us(fn)) for name, fn in rows]
    timed.append(("ours diagonal_copy, called directly, no launch",
                  per_call_us(lambda: copy_module.diagonal_copy(x, 0, 0, 1))))
    timed.append(("ours diagonal_backward, called directly, no launch",
                  per_call_us(lambda: backward_module.diagonal_backward(g, [64, 64], 0, 0, 1))))
    with ops.use_triton(True):
        timed.append(("ours diagonal_copy through aten, no launch",
                      per_call_us(lambda: aten.diagonal_copy(x, 0, 0, 1))))
        timed.append(("ours diagonal_backward through aten, no launch",
                      per_call_us(lambda: aten.diagonal_backward(g, [64, 64], 0, 0, 1))))
    for name, us in [*launched, *timed]:
        print(f"{name:52s} {us:6.1f} us")


if __name__ == "__main__":
    main()
