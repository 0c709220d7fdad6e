"""Cost of drawing and materialising one Case, per strategy, on one CPU core.

Each strategy runs under an ordinary ``@given`` test (generation phase only, no database,
derandomized) whose body materialises the Case on the CPU and stamps the clock. The gap
between two stamps is everything one Case costs a fuzz run before the op is called:
Hypothesis' engine, the draw and ``materialise``. The same loop over ``st.integers()`` gives
the engine's own floor, and ``materialise`` alone is timed over the drawn Cases.

    python benchmarks/bench_strategies.py [--examples N] [--max-elements N] [--out FILE]

Prints medians (and p90) in milliseconds of this process's CPU time (and wall time, which
other processes on a shared machine inflate); ``--out`` also writes them as JSON. The
process pins itself to one CPU core where the platform allows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

import hypothesis
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from diagfuzz.core.case import Case, materialise
from diagfuzz.strategies import (
    DEFAULT_MAX_ELEMENTS,
    diagonal_backward_cases,
    diagonal_cases,
    invalid_cases,
)


def stamp_gaps(strategy: st.SearchStrategy, examples: int,
               body: Callable[[object], object] = lambda value: None,
               clock: Callable[[], float] = time.process_time) -> list[float]:
    """Seconds between consecutive test-body runs of a @given loop over ``strategy``.

    The default clock is this process's CPU time, so other processes on a shared machine
    do not inflate the numbers (pass ``time.perf_counter`` for wall time).
    """
    stamps: list[float] = []

    @settings(max_examples=examples, database=None, derandomize=True, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def loop(value: object) -> None:
        body(value)
        stamps.append(clock())

    loop()
    return [b - a for a, b in itertools.pairwise(stamps)]


def summary(seconds: list[float]) -> dict[str, float]:
    """Median and 90th percentile in milliseconds, and the sample count."""
    ms = sorted(s * 1e3 for s in seconds)
    return {"median_ms": round(statistics.median(ms), 4),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 4), "n": len(ms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--max-elements", type=int, default=DEFAULT_MAX_ELEMENTS)
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch.set_num_threads(1)

    drawn: list[Case] = []

    def keep(case: object) -> None:
        assert isinstance(case, Case)
        materialise(case)
        drawn.append(case)

    results: dict[str, object] = {
        "hypothesis": hypothesis.__version__, "torch": torch.__version__,
        "python": platform.python_version(), "examples": args.examples,
        "max_elements": args.max_elements,
        "engine floor (st.integers())": summary(stamp_gaps(st.integers(), args.examples)),
    }
    for name, strategy in [
        ("diagonal_cases", diagonal_cases(max_elements=args.max_elements)),
        ("diagonal_backward_cases", diagonal_backward_cases(max_elements=args.max_elements)),
        ("invalid_cases", invalid_cases(max_elements=args.max_elements)),
    ]:
        results[f"{name}: draw + materialise"] = summary(
            stamp_gaps(strategy, args.examples, keep))
        results[f"{name}: wall"] = summary(
            stamp_gaps(strategy, args.examples, keep, time.perf_counter))
    alone = []
    for case in drawn:
        start = time.process_time()
        materialise(case)
        alone.append(time.process_time() - start)
    results["materialise alone"] = summary(alone)

    for key, value in results.items():
        if isinstance(value, dict):
            print(f"{key:45s} median {value['median_ms']:7.3f} ms   p90 "
                  f"{value['p90_ms']:7.3f} ms   n={value['n']}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
