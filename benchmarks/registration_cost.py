"""What the oracle's per-Case dispatcher registrations cost on this host (a benchmark).

An H200 profile of a fuzz worker (cProfile) showed registrations costing ~10x what they cost
on this repository's CPU machine: switching diagfuzz's aten registration off and on
(``ops.use_triton``) and the oracle's guarded allocations (``SentinelAllocations``: two aten
factory overrides registered and reset around each impl call; 0.8-1.1 ms a Case under the
profiler there). This times each alone, what a standing Python override would cost every
allocation instead, and (``--cases``) the sentinel block's enter and exit inside real oracle
checks with perf_counter. On the H200 (BENCHMARKS.md, ``afeffa6``) those were 54.6 and 5.1 us
of a 935 us check: the profiler's numbers were its own overhead.

    python benchmarks/registration_cost.py [--cases N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from host_breakdown import per_call_us  # back-to-back calls after a warm-up (this directory)

import diagfuzz.ops as ops
from diagfuzz.oracles.sentinel import SentinelAllocations


def toggle() -> None:
    """One switch off and back on (what the oracle made per Case for its host references)."""
    with ops.use_triton(False):
        pass


def sentinel_block() -> None:
    """One guarded-allocation block, empty (its registration and reset alone)."""
    with SentinelAllocations(0xAB):
        pass


def empty_through_python_override(calls: int) -> tuple[float, float]:
    """``torch.empty`` plain, and through a Python BackendSelect kernel that only forwards."""
    plain = per_call_us(lambda: torch.empty(4, device=ops.DEVICE), calls)
    key = torch._C.DispatchKey.CUDA if ops.DEVICE == "cuda" else torch._C.DispatchKey.CPU
    after = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)

    def forward(keyset: object, size: object, **kwargs: object) -> torch.Tensor:
        ks = (keyset & after) | torch._C.DispatchKeySet(key)
        return torch.ops.aten.empty.memory_format.redispatch(ks, size, **kwargs)

    library = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)
    library.impl("empty.memory_format", "BackendSelect", forward, True)
    try:
        overridden = per_call_us(lambda: torch.empty(4, device=ops.DEVICE), calls)
    finally:
        library.reset()
    return plain, overridden


def in_oracle(cases: int) -> dict[str, float]:
    """Time each SentinelAllocations enter and exit while the oracle checks real Cases in
    this process (perf_counter around them; no profiler): the H200 profiles showed ~0.8 and
    ~1.1 ms per Case there against ~14 us for an empty block."""
    import bench_throughput  # this directory

    from diagfuzz import oracles
    from diagfuzz.impl import triton_aten
    from diagfuzz.oracles import sentinel

    spent = {"enter": 0.0, "exit": 0.0}
    enter, exit_ = sentinel.SentinelAllocations.__enter__, sentinel.SentinelAllocations.__exit__

    def timed(name: str, fn: object) -> object:
        def wrapper(*args: object) -> object:
            t0 = time.perf_counter()
            try:
                return fn(*args)  # type: ignore[operator]
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapper

    drawn, _ = bench_throughput.draw("diagonal_backward", cases, 0, 4096, True)
    for case in drawn[:50]:  # warm: first loads and compiles
        oracles.check(case, triton_aten, ops.DEVICE)
    sentinel.SentinelAllocations.__enter__ = timed("enter", enter)  # type: ignore[method-assign]
    sentinel.SentinelAllocations.__exit__ = timed("exit", exit_)  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        for case in drawn:
            oracles.check(case, triton_aten, ops.DEVICE)
        total = time.perf_counter() - t0
    finally:
        sentinel.SentinelAllocations.__enter__ = enter  # type: ignore[method-assign]
        sentinel.SentinelAllocations.__exit__ = exit_  # type: ignore[method-assign]
    n = len(drawn)
    return {"oracle_cases": n, "oracle_per_case_us": round(total / n * 1e6, 1),
            "sentinel_enter_in_oracle_us": round(spent["enter"] / n * 1e6, 1),
            "sentinel_exit_in_oracle_us": round(spent["exit"] / n * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--cases", type=int, default=400,
                        help="Cases the oracle checks while its sentinel blocks are timed")
    args = parser.parse_args()
    ops.enable()
    result = {
        "device": ops.DEVICE, "torch": torch.__version__,
        "use_triton_switch_us": round(per_call_us(toggle, args.calls), 2),
        "sentinel_block_us": round(per_call_us(sentinel_block, args.calls), 2),
    }
    plain, overridden = empty_through_python_override(args.calls * 10)
    result.update(empty_us=round(plain, 2), empty_through_python_override_us=round(overridden, 2))
    if args.cases:
        result.update(in_oracle(args.cases))
    ops.disable()
    for name, value in result.items():
        print(f"{name:36s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
