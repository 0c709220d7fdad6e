"""Where an executor's time goes per Case: ``oracles.check_batch`` on the dev mix, profiled.

Draws the dev profile's Case mix as ``bench_throughput.py`` does (Case families of the
diagonal, diagonal_backward and invalid streams), judges them in batches of ``--batch``
as an executor does (one untimed pass first, so compiles and lazy loads are not counted),
then times a second pass without the profiler, a third with a clock around each step of
``oracles.batch`` (materialise, host references, uploads and aten's device kernel, the
sentinel registration, the implementation's calls, the copy back, the judgement, error
parity: a step's own time, its inner steps' excluded), and profiles a fourth (cProfile).
Prints microseconds of wall time per Case for each, and the functions that take the most
of the profiled pass; ``--pstats PATH`` keeps the raw profile for ``pstats`` to read.

    python3 benchmarks/probes/oracle_profile.py --cases 1500 [--impl SPEC] [--pstats PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_throughput import STREAMS, draw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1500, help="Cases per stream")
    parser.add_argument("--impl", default="diagfuzz.impl:triton_aten")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-elements", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=60)
    parser.add_argument("--pstats", type=Path, default=None)
    args = parser.parse_args()

    from diagfuzz import oracles
    from diagfuzz.core.impl import load_impl
    from diagfuzz.core.runtime import DEVICE

    impl = load_impl(args.impl)
    t0 = time.perf_counter()
    cases = [c for stream in STREAMS
             for c in draw(stream, args.cases, args.seed, args.max_elements, True)[0]]
    drawn = time.perf_counter() - t0

    def judge() -> None:
        for start in range(0, len(cases), args.batch):
            oracles.check_batch(cases[start:start + args.batch], impl, DEVICE)

    judge()  # compiles, lazy loads, first-backward imports
    t0 = time.perf_counter()
    judge()
    wall = time.perf_counter() - t0
    print(f"{len(cases)} Cases of the dev mix on {DEVICE}, impl {args.impl}, batches of "
          f"{args.batch}: drawn {1e6 * drawn / len(cases):.1f} us a Case, judged "
          f"{1e6 * wall / len(cases):.1f} us a Case ({len(cases) / wall:,.0f} Cases/s)")
    steps = _clock_steps()
    t0 = time.perf_counter()
    judge()
    clocked = time.perf_counter() - t0
    print(f"with the step clocks: {1e6 * clocked / len(cases):.1f} us a Case; own time of "
          "each step, us a Case:")
    for name, seconds in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {1e6 * seconds / len(cases):8.1f}")
    rest = clocked - sum(steps.values())
    print(f"  {'(the rest)':<24} {1e6 * rest / len(cases):8.1f}")
    _unclock()
    profiler = cProfile.Profile()
    profiler.runcall(judge)
    stats = pstats.Stats(profiler)
    if args.pstats:
        stats.dump_stats(str(args.pstats))
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


#: (module, name) -> the original, while the step clocks are in.
_ORIGINALS: dict[tuple[Any, str], Any] = {}


def _clock_steps() -> dict[str, float]:
    """Wrap each step ``oracles.batch`` calls in a clock; own seconds per step (a step
    called inside another is taken out of the outer one's)."""
    from diagfuzz.oracles import batch, sentinel

    seconds: dict[str, float] = {}
    stack: list[float] = []  # inner seconds of each open step

    def clocked(name: str, fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                inner = stack.pop()
                seconds[name] = seconds.get(name, 0.0) + spent - inner
                if stack:
                    stack[-1] += spent
        return run

    steps = {"arguments": "materialise", "plan_valid": "host references",
             "upload": "upload + aten device", "call_impl": "impl calls",
             "bring_back": "copy back", "judge_runs": "judgement",
             "error_parity_batch": "error parity", "served": "dispatch counter",
             "capability_refusal": "capability check"}
    for attr, name in steps.items():
        _ORIGINALS[(batch, attr)] = getattr(batch, attr)
        setattr(batch, attr, clocked(name, getattr(batch, attr)))
    cls = sentinel.SentinelAllocations
    for attr in ("__enter__", "__exit__"):
        _ORIGINALS[(cls, attr)] = getattr(cls, attr)
        setattr(cls, attr, clocked(f"sentinel {attr.strip('_')}", getattr(cls, attr)))
    return seconds


def _unclock() -> None:
    for (owner, attr), original in _ORIGINALS.items():
        setattr(owner, attr, original)
    _ORIGINALS.clear()


if __name__ == "__main__":
    main()
