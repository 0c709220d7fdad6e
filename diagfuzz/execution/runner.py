"""Runners turn a Case into a Verdict. The suite talks to a Runner, never to oracles directly.

``InProcessRunner`` calls the oracles in this process. The isolation work adds a runner with
the same interface that runs each Case in a spawned executor process (crash/hang isolation).
"""

from __future__ import annotations

import atexit
import gc
from typing import Any, Protocol

from diagfuzz import oracles
from diagfuzz.core.case import Case
from diagfuzz.core.verdict import Verdict
from diagfuzz.impl import load_impl

_unfreeze_at_exit = False


def settle_heap() -> None:
    """Take every object alive now out of the cyclic garbage collector's scans.

    Why: after torch, Triton, Hypothesis and the impl are imported a worker holds ~250,000
    long-lived objects, and every full (generation 2) collection walks all of them: about 80 ms
    each, six per 900 Cases, 12% of a CPU worker's time (benchmarks/bench_throughput.py).
    ``gc.freeze`` moves them to the permanent generation (reference counting still frees
    them; only cycles among them wait), so later collections walk only what Cases create.
    Call it once the process has imported everything, in whichever process draws or runs
    Cases. Unfrozen at exit, so interpreter shutdown collects as usual.
    """
    global _unfreeze_at_exit
    gc.collect()
    gc.freeze()
    if not _unfreeze_at_exit:
        atexit.register(gc.unfreeze)
        _unfreeze_at_exit = True


class Runner(Protocol):
    """Anything that runs a Case against the implementation under test."""

    def run(self, case: Case) -> Verdict: ...

    def close(self) -> None: ...


class InProcessRunner:
    """Runs the oracles in this process: fastest, but a crash takes the process down."""

    def __init__(self, impl_spec: str, device: str, *, strict: bool = False) -> None:
        self.impl_spec = impl_spec
        self.strict = strict
        self.impl: Any = load_impl(impl_spec)
        self.device = device
        settle_heap()  # the impl is loaded: what is alive now lives as long as the worker

    def run(self, case: Case) -> Verdict:
        return oracles.check(case, self.impl, self.device, strict=self.strict)

    def close(self) -> None:
        """Nothing to release."""
