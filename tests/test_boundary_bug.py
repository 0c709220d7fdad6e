"""Boundary Cases catch a tail-mask bug past element 128 at the gate's budget.

``tests.faulty.tail_block`` drops the last partial block of every diagonal_backward
diagonal longer than 128 elements (a floor where ``cdiv`` is right). The gate's budget
holds at most 4,096 elements, so a plain diagonal_backward Case has a diagonal of at most
64 elements and cannot reach the bug; boundary Cases (``diagfuzz.strategies._boundary``)
can. Each run here fuzzes as the gate does: the ``gate`` profile's budget (100 Cases a
shard, 4 shards, 4,096 elements, one Case per Hypothesis example), shard seeds from
``diagfuzz.harness.sharding.derive_seed`` of a run seed, the suite's family strategies, the
oracle on the CPU; a run stops at the first failing Verdict.

Only the diagonal_backward stream runs: the impl is aten in every other call (diagonal,
and the invalid stream's error parity, which aten's own checks answer before the planted
code runs), so the other two streams cannot catch it and would only add time.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import Case
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness.profiles import budget_for
from diagfuzz.harness.sharding import derive_seed
from diagfuzz.strategies import boundary_class, diagonal_backward_case_families
from tests.faulty import tail_block

GATE = budget_for("gate")
#: Run seeds: 0, the one ``diagfuzz gate`` runs (its profile is derandomized), and five
#: more. Measured over run seeds 0..60 with the strategies of this commit: caught under
#: 60 of 61, after 4 to 235 Cases (median 58); seed 29 drew 11 boundary Cases, none a
#: length past 128. ``diagfuzz gate --impl tests.faulty.tail_block:impl`` fails
#: deterministically and shrinks the failure to diagonal_backward of a contiguous
#: 129 x 129 float32 matrix.
RUN_SEEDS = (0, 1, 2, 3, 4, 5)
STREAM = "test_diagonal_backward"


class _Caught(Exception):
    """Stops a Hypothesis run at the first failing Verdict."""


def gate_run(impl: Any, run_seed: int, *, boundary: bool) -> tuple[Verdict | None, int]:
    """The gate's diagonal_backward shards for ``run_seed``: (first failing Verdict or
    None, Cases checked)."""
    strategy = diagonal_backward_case_families(max_elements=GATE.max_elements,
                                               max_members=GATE.max_members,
                                               boundary=boundary)
    ran = 0
    for shard in range(GATE.shards):
        verdict, checked = gate_shard(impl, strategy, derive_seed(run_seed, STREAM, shard))
        ran += checked
        if verdict is not None:
            return verdict, ran
    return None, ran


def gate_shard(impl: Any, strategy: st.SearchStrategy[tuple[Case, ...]],
               shard_seed: int, limit: int | None = None,
               device: str = ops.DEVICE) -> tuple[Verdict | None, int]:
    """One shard under the gate profile's settings, at most ``limit`` Cases: (first
    failing Verdict, Cases run)."""
    found: list[Verdict] = []
    ran = [0]

    @seed(shard_seed)
    @settings(max_examples=GATE.examples, deadline=None, database=None,
              derandomize=GATE.derandomize, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(strategy)
    def run(family: tuple[Case, ...]) -> None:
        for case in family:
            if limit is not None and ran[0] >= limit:
                return
            ran[0] += 1
            verdict = oracles.check(case, impl, device)
            if not verdict.ok:
                found.append(verdict)
                raise _Caught(str(verdict))

    with contextlib.suppress(_Caught):
        run()
    return (found[0] if found else None), ran[0]


@pytest.mark.parametrize("run_seed", RUN_SEEDS)
def test_tail_bug_is_caught_at_the_gate_budget(run_seed: int) -> None:
    verdict, ran = gate_run(tail_block.impl, run_seed, boundary=True)
    assert verdict is not None, f"run seed {run_seed}: not caught in {ran} Cases"
    case = verdict.case
    assert case is not None and boundary_class(case).startswith("length"), case
    length = case.layout.shape[-1]
    assert length > tail_block.BLOCK and length % tail_block.BLOCK, case
    print(f"run seed {run_seed}: caught after {ran} Cases, {verdict.kind} on {case.describe()}")


@pytest.mark.parametrize("run_seed", RUN_SEEDS)
def test_tail_bug_escapes_without_boundary_cases(run_seed: int) -> None:
    """The same runs with boundary draws off check every Case and pass: the catch above is
    the boundary Cases' doing."""
    verdict, ran = gate_run(tail_block.impl, run_seed, boundary=False)
    assert verdict is None, verdict
    assert ran == GATE.examples * GATE.shards
