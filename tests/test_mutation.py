"""Proof that the oracles bite: every mutant under tests/mutants is caught by fuzzing.

Each mutant is fuzzed the way the fuzz suite runs a profile: three streams (diagonal,
diagonal_backward, invalid), each split into the profile's shards of ``examples`` Cases,
shard seeds derived from one fixed run seed (``RUN_SEED``) exactly as ``diagfuzz.sharding``
derives them, until ``oracles.check`` returns a failing Verdict. The correct
implementations must pass the whole ``ci`` budget.

Bar: every mutant is caught within the ``ci`` budget, except the bug classes in
``KNOWN_CI_ESCAPES``: at the ci budget the strategies rarely put the triggering input on a
diagonal (measured over 10 seeds: see each entry), so those must be caught within the
``dev`` budget. The mutation score is printed and recorded as JUnit properties (overall, and
within the ci budget).
"""

from __future__ import annotations

import contextlib
import importlib
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.case import Case
from diagfuzz.profiles import Budget, budget_for
from diagfuzz.sharding import derive_seed
from diagfuzz.strategies import (
    INVALID_CLASSES,
    diagonal_backward_cases,
    diagonal_cases,
    invalid_cases,
)
from diagfuzz.verdict import Verdict
from tests.mutants import MUTANTS

#: The one run seed every shard seed derives from (any fixed value: the test is reproducible).
RUN_SEED = 20260430

CI, DEV = budget_for("ci"), budget_for("dev")

#: Mutants whose trigger the strategies reach too rarely for the ci budget to be a reliable
#: bar: fraction of 10 run seeds whose ci budget (200 Cases per stream) caught them,
#: measured 2026-11-30 with the strategies of commit afc7789. Every other mutant was
#: caught by 10/10 seeds.
KNOWN_CI_ESCAPES = {
    "loses_negative_zero": "needs -0.0 on a float diagonal: 3/10 seeds",
    "bool_bytes": "needs True on a non-empty bool diagonal: 6/10 seeds",
    "int32_wrap": "needs an int64 Case with a non-empty diagonal: 9/10 seeds",
}

#: Stream name (as diagfuzz.suite's test functions) -> strategy factory.
STREAMS = {
    "test_diagonal": lambda cap: diagonal_cases(max_elements=cap),
    "test_diagonal_backward": lambda cap: diagonal_backward_cases(max_elements=cap),
    "test_invalid": lambda cap: invalid_cases(max_elements=cap,
                                              classes=list(INVALID_CLASSES)),
}


class _Caught(Exception):
    """Stops a Hypothesis run at the first failing Verdict."""


def fuzz_shard(impl: Any, strategy: st.SearchStrategy[Case], shard_seed: int,
               examples: int) -> tuple[Verdict | None, int]:
    """One shard: the first failing Verdict (or None) and how many Cases ran."""
    found: list[Verdict] = []
    ran = [0]

    @seed(shard_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(strategy)
    def run(case: Case) -> None:
        ran[0] += 1
        verdict = oracles.check(case, impl, ops.DEVICE)
        if not verdict.ok:
            found.append(verdict)
            raise _Caught(str(verdict))

    with contextlib.suppress(_Caught):
        run()
    return (found[0] if found else None), ran[0]


def fuzz(impl: Any, budget: Budget,
         streams: tuple[str, ...] = tuple(STREAMS)) -> tuple[Verdict | None, str, int]:
    """All shards of ``streams`` at ``budget``: (first failing Verdict, its stream, Cases run)."""
    total = 0
    for stream in streams:
        strategy = STREAMS[stream](budget.max_elements)
        for shard in range(budget.shards):
            verdict, ran = fuzz_shard(impl, strategy, derive_seed(RUN_SEED, stream, shard),
                                      budget.examples)
            total += ran
            if verdict is not None:
                return verdict, stream, total
    return None, "", total


def test_mutation_score(record_property: Any) -> None:
    """Every mutant is caught (ci budget, or dev for known escapes); prints the score."""
    rows, missed, at_ci = [], [], 0
    for name in MUTANTS:
        impl = importlib.import_module(f"tests.mutants.{name}").impl
        start = time.perf_counter()
        verdict, stream, ran = fuzz(impl, CI)
        budget = "ci"
        if verdict is None and name in KNOWN_CI_ESCAPES:
            verdict, stream, more = fuzz(impl, DEV)
            ran, budget = ran + more, "dev"
        seconds = time.perf_counter() - start
        if verdict is None:
            missed.append(name)
            rows.append(f"  MISSED {name:26} after {ran} Cases ({seconds:.1f}s)")
            continue
        at_ci += budget == "ci"
        note = " (a known ci escape, caught at ci with this seed)" if (
            budget == "ci" and name in KNOWN_CI_ESCAPES) else ""
        rows.append(f"  caught {name:26} {budget:3} {verdict.kind:12} [{verdict.check}] "
                    f"in {stream} after {ran} Cases ({seconds:.1f}s){note}")
    total = len(MUTANTS)
    score = (f"mutation score: {total - len(missed)}/{total} caught; {at_ci}/{total} within "
             f"the ci budget ({CI.total} Cases), the rest within dev ({DEV.total})")
    print("\n" + score + "\n" + "\n".join(rows))
    record_property("mutation_score", f"{total - len(missed)}/{total}")
    record_property("mutation_score_ci", f"{at_ci}/{total}")
    assert not missed, f"{score}\nnot caught: {missed}\n" + "\n".join(rows)


@pytest.mark.parametrize("stream", list(STREAMS))
@pytest.mark.parametrize("spec", ["tests.mutants._base:impl", "diagfuzz.impl:triton_aten"])
def test_correct_impl_passes(spec: str, stream: str) -> None:
    """The correct implementations pass the whole ci budget of every stream."""
    module, _, attr = spec.partition(":")
    impl = getattr(importlib.import_module(module), attr)
    verdict, _, ran = fuzz(impl, CI, (stream,))
    assert verdict is None, f"{spec} failed:\n{verdict}\n{verdict.details}"
    assert ran == CI.examples * CI.shards
