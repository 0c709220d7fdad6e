"""Proof that the oracles bite: every mutant under tests/mutants is caught by fuzzing.

Each mutant is fuzzed, for each op it breaks (``tests.mutants.MUTANTS``), the way the fuzz
suite runs a profile: the op's stream of valid Cases, then its invalid Cases, each split
into the profile's shards of ``examples`` Cases, shard seeds derived from one fixed run
seed (``RUN_SEED``) exactly as ``diagfuzz.harness.sharding`` derives them, until
``oracles.check`` returns a failing Verdict. The correct implementations must pass the
whole ``ci`` budget of every op.

Bar: every mutant is caught on every op it breaks within the ``ci`` budget, no
exceptions. The strategies put specials mostly on the elements the op reads and weight the
rare bug classes (-0.0, True, wide int64 on a non-empty diagonal) up. Measured over run
seeds 1..30 when diagonal and diagonal_backward were the only ops (one pass over their
streams and the invalid Cases of both): 15 mutants caught at every seed,
loses_negative_zero and int32_wrap at 29/30. The mutation score is printed per op, and
recorded as JUnit properties (``mutation_score``, and ``mutation_score_<op>``).
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
from diagfuzz.core.case import Case
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness.profiles import Budget, budget_for
from diagfuzz.harness.sharding import derive_seed
from diagfuzz.specs import SPECS
from diagfuzz.strategies import cases, invalid_cases
from tests.mutants import MUTANTS

#: The one run seed every shard seed derives from (any fixed value: the test is reproducible).
RUN_SEED = 20260430

CI = budget_for("ci")


def streams(op: str) -> dict[str, Any]:
    """An op's streams, named as diagfuzz.suite's test functions: its valid Cases, then its
    invalid ones (strategy factories of the element cap)."""
    return {f"test_{op}": lambda cap: cases(op, max_elements=cap),
            "test_invalid": lambda cap: invalid_cases(op, max_elements=cap)}


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


def fuzz(impl: Any, budget: Budget, op: str,
         only: tuple[str, ...] | None = None) -> tuple[Verdict | None, str, int]:
    """All shards of ``op``'s streams (``only``: those of them) at ``budget``: (first
    failing Verdict, its stream, Cases run)."""
    total = 0
    for stream, strategy_of in streams(op).items():
        if only is not None and stream not in only:
            continue
        strategy = strategy_of(budget.max_elements)
        for shard in range(budget.shards):
            verdict, ran = fuzz_shard(impl, strategy, derive_seed(RUN_SEED, stream, shard),
                                      budget.examples)
            total += ran
            if verdict is not None:
                return verdict, stream, total
    return None, "", total


def test_mutation_score(record_property: Any) -> None:
    """Every mutant is caught on every op it breaks within the ci budget; prints the score
    per op."""
    rows, missed = [], []
    per_op: dict[str, list[int]] = {op: [0, 0] for op in SPECS}  # caught, mutants
    for name, broken in MUTANTS.items():
        impl = importlib.import_module(f"tests.mutants.{name}").impl
        for op in broken:
            start = time.perf_counter()
            verdict, stream, ran = fuzz(impl, CI, op)
            seconds = time.perf_counter() - start
            per_op[op][1] += 1
            if verdict is None:
                missed.append(f"{name} ({op})")
                rows.append(f"  MISSED {name:28} {op:18} after {ran} Cases ({seconds:.1f}s)")
                continue
            per_op[op][0] += 1
            rows.append(f"  caught {name:28} {op:18} {verdict.kind:12} [{verdict.check}] "
                        f"in {stream} after {ran} Cases ({seconds:.1f}s)")
    caught = sum(c for c, _ in per_op.values())
    pairs = sum(n for _, n in per_op.values())
    score = (f"mutation score: {caught}/{pairs} (mutant, op) pairs caught within the ci "
             f"budget ({CI.examples * CI.shards} Cases a stream), {len(MUTANTS)} mutants")
    by_op = [f"  {op:18} {c}/{n}" for op, (c, n) in per_op.items() if n]
    print("\n" + score + "\n" + "\n".join(by_op) + "\n" + "\n".join(rows))
    record_property("mutation_score", f"{caught}/{pairs}")
    record_property("mutation_score_ci", f"{caught}/{pairs}")
    for op, (c, n) in per_op.items():
        record_property(f"mutation_score_{op}", f"{c}/{n}")
    assert all(n for _, n in per_op.values()), f"an op without mutants: {per_op}"
    assert not missed, f"{score}\nnot caught: {missed}\n" + "\n".join(rows)


@pytest.mark.parametrize("stream", ["valid", "invalid"])
@pytest.mark.parametrize("op", SPECS)
@pytest.mark.parametrize("spec", ["tests.mutants._base:impl", "diagfuzz.impl:triton_aten"])
def test_correct_impl_passes(spec: str, op: str, stream: str) -> None:
    """The correct implementations pass the whole ci budget of every op's streams."""
    module, _, attr = spec.partition(":")
    impl = getattr(importlib.import_module(module), attr)
    name = f"test_{op}" if stream == "valid" else "test_invalid"
    verdict, _, ran = fuzz(impl, CI, op, (name,))
    assert verdict is None, f"{spec} failed:\n{verdict}\n{verdict.details}"
    assert ran == CI.examples * CI.shards
