"""What the oracle's per-Case dispatcher registrations cost on this host (a benchmark).

The H200 profile of a fuzz worker (BENCHMARKS.md) showed registrations costing ~10x what they
cost on this repository's CPU machine: switching diagfuzz's aten registration off and on
(``ops.use_triton``: ~240 us there, ~25 us here) and the oracle's guarded allocations
(``SentinelAllocations``: two aten factory overrides registered and reset around each impl
call; ~0.9 ms under the profiler there, ~10 us here). This times each alone, and what a
standing Python override would cost every allocation instead (the alternative to registering
per Case), so the next change rests on a number from the host that matters.

    python benchmarks/registration_cost.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    ops.enable()
    result = {
        "device": ops.DEVICE, "torch": torch.__version__,
        "use_triton_switch_us": round(per_call_us(toggle, args.calls), 2),
        "sentinel_block_us": round(per_call_us(sentinel_block, args.calls), 2),
    }
    plain, overridden = empty_through_python_override(args.calls * 10)
    result.update(empty_us=round(plain, 2), empty_through_python_override_us=round(overridden, 2))
    ops.disable()
    for name, value in result.items():
        print(f"{name:36s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
