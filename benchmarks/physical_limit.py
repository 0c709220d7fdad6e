"""The physical limit of judging: the GPU time of the Cases' own kernels and references.

Draws the dev profile's Case mix (the three streams of ``bench_throughput.py``, Case
families as the suite draws them), puts every Case's arguments on the device, and under
``torch.profiler`` runs, per Case, aten's device kernel (the oracle's device reference)
and the implementation's call, nothing else. The GPU time those kernels take, summed
(``self_device_time_total`` of every CUDA event), per Case, is the floor: no judging of
this mix can exceed 1 / that Cases per second on this GPU. Then the whole oracle
(``oracles.check_batch`` in batches of 64, as an executor judges) runs under the profiler
too: its GPU time per Case (kernels, fills and copies) against its wall time per Case says
how busy one executor keeps the GPU.

    python3 benchmarks/physical_limit.py --cases 1500 [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from bench_throughput import STREAMS, draw


def gpu_us(profile: Any) -> float:
    """Microseconds of GPU time in ``profile``: every device event's own time."""
    return sum(e.self_device_time_total for e in profile.key_averages())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1500, help="Cases per stream")
    parser.add_argument("--impl", default="diagfuzz.impl:triton_aten")
    parser.add_argument("--max-elements", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import diagfuzz.ops as ops
    from diagfuzz import oracles
    from diagfuzz.core.impl import load_impl
    from diagfuzz.specs import arguments

    if ops.DEVICE != "cuda":
        print("physical_limit: needs a CUDA GPU (kernels run interpreted here)")
        return
    impl = load_impl(args.impl)
    cases = [c for stream in STREAMS
             for c in draw(stream, args.cases, args.seed, args.max_elements, True)[0]]
    prepared = [(c, arguments(c, "cuda")) for c in cases]
    for c, a in prepared[:200]:  # compile what the mix reaches before timing
        _kernels(c, a, impl)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as kernels:
        for c, a in prepared:
            _kernels(c, a, impl)
        torch.cuda.synchronize()
    floor_us = gpu_us(kernels) / len(cases)

    oracles.check_batch(cases[:64], impl, "cuda")  # warm
    with profile(activities=[ProfilerActivity.CUDA]) as whole:
        t0 = time.perf_counter()
        for start in range(0, len(cases), 64):
            oracles.check_batch(cases[start:start + 64], impl, "cuda")
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    oracle_us = gpu_us(whole) / len(cases)
    result = {
        "cases": len(cases), "impl": args.impl, "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "kernels_gpu_us_per_case": round(floor_us, 2),
        "physical_limit_cases_per_s": round(1e6 / floor_us),
        "oracle_gpu_us_per_case": round(oracle_us, 2),
        "oracle_wall_us_per_case": round(1e6 * wall / len(cases), 1),
        "oracle_gpu_busy": round(oracle_us * len(cases) / 1e6 / wall, 3),
    }
    print(f"{len(cases)} Cases of the dev mix on {result['gpu']}:")
    print(f"  own kernels and aten's references: {floor_us:.2f} us of GPU time a Case -> "
          f"physical limit {result['physical_limit_cases_per_s']:,} Cases/s")
    print(f"  the whole oracle in batches of 64, one process (profiled): "
          f"{oracle_us:.2f} us of GPU time and {result['oracle_wall_us_per_case']} us of "
          f"wall time a Case (GPU busy {result['oracle_gpu_busy']:.1%})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


def _kernels(case: Any, args: dict[str, Any], impl: Any) -> None:
    """aten's device kernel and the implementation's call for one Case (refusals are
    fine: an invalid Case's kernels are whatever runs before the refusal)."""
    from diagfuzz.oracles import reference
    from diagfuzz.specs import spec_of

    with contextlib.suppress(Exception):
        spec_of(case.op).aten_kernel(case, args)
    if "out" in args:
        return  # an .out Case's buffer is made by the oracle; its kernels match the plain call
    with contextlib.suppress(Exception):
        reference.call_op(impl, case, dict(args))


if __name__ == "__main__":
    main()
