"""How fast the oracle judges Cases: ``python benchmarks/oracle_bench.py [N] [MAX_ELEMENTS]``.

Draws N Cases per stream (diagonal, diagonal_backward, invalid) from diagfuzz.strategies
once, outside the timing, then times ``check`` over them for the kernels via aten and for
aten itself (whose calls cost microseconds, so that row is the oracle's own overhead), and
prints Cases per second. Numbers go to stdout only; nothing asserts on time.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

import diagfuzz.ops as ops
from diagfuzz.core.case import Case
from diagfuzz.impl import aten, triton_aten
from diagfuzz.oracles import check


def draw(n: int, max_elements: int) -> list[Case]:
    """N Cases of each stream, deterministically (fixed seed)."""
    from diagfuzz.strategies import diagonal_backward_cases, diagonal_cases, invalid_cases

    cases: list[Case] = []
    for strategy in (diagonal_cases(max_elements=max_elements),
                     diagonal_backward_cases(max_elements=max_elements),
                     invalid_cases(max_elements=max_elements)):
        @seed(1234)
        @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(case: Case) -> None:
            cases.append(case)

        collect()
    return cases


def rate(cases: list[Case], impl: Any) -> tuple[float, int]:
    """Cases per second of ``check`` over ``cases``, and how many failed."""
    for case in cases[:5]:
        check(case, impl, ops.DEVICE)  # warm up (first launches compile/trace)
    start = time.perf_counter()
    failed = sum(not check(case, impl, ops.DEVICE).ok for case in cases)
    return len(cases) / (time.perf_counter() - start), failed


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 100
    max_elements = int(argv[1]) if len(argv) > 1 else 1024
    cases = draw(n, max_elements)
    print(f"{len(cases)} Cases (max {max_elements} elements), device {ops.DEVICE}, "
          f"interpreter {ops.INTERPRET}")
    for name, impl in (("triton_aten", triton_aten), ("aten (oracle overhead)", aten)):
        per_second, failed = rate(cases, impl)
        print(f"  check() with {name:24}: {per_second:7.1f} Cases/s  ({failed} failed)")


if __name__ == "__main__":
    main(sys.argv[1:])
