"""``oracles.check_batch`` gives each Case the verdict ``oracles.check`` gives it alone.

On a fixed seed: the same Cases (every op's valid and invalid streams) judged one by one
and in batches, for the correct implementations and for mutants whose bugs the batch
must still see (unwritten elements, stray writes past a buffer, input writes, aliasing,
a kernel that never ran). A batch that shares one sentinel registration must not let one
Case's sentinel or allocations leak into another's evidence.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import Case
from diagfuzz.core.verdict import Verdict
from diagfuzz.oracles import checks
from diagfuzz.oracles.batch import MAX_BATCH
from diagfuzz.specs import SPECS
from diagfuzz.strategies import cases, invalid_cases

SEED = 20261203


def drawn(strategy: st.SearchStrategy[Case], n: int, at: int = SEED) -> list[Case]:
    """``n`` Cases of ``strategy``, the same on every run (a fixed Hypothesis seed)."""
    found: list[Case] = []

    @seed(at)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(case: Case) -> None:
        found.append(case)

    draw()
    return found


def mixed(per_stream: int, ops_: tuple[str, ...] = tuple(SPECS)) -> list[Case]:
    """Valid and invalid Cases of ``ops_``, interleaved as a fuzz shard's pipeline sends
    them (a batch holds several ops and both kinds)."""
    streams = [drawn(cases(op, max_elements=64), per_stream) for op in ops_]
    streams += [drawn(invalid_cases(op, max_elements=64), per_stream // 2) for op in ops_]
    out: list[Case] = []
    for i in range(max(len(s) for s in streams)):
        out += [s[i] for s in streams if i < len(s)]
    return out


def outcome(verdict: Verdict) -> tuple[Any, ...]:
    """What a verdict says, without the counter readings that differ between runs of one
    process (the dispatch proof's cumulative launch count), between runners (where each
    keeps its executor's history) or with the machine's load (``first_attempt``,
    ``batch_attempt``: a Case whose batch or first try stalled on a loaded machine, judged
    again alone, records that try)."""
    details = {k: v for k, v in verdict.details.items()
               if k not in ("launches", "history", "first_attempt", "batch_attempt")}
    return verdict.kind, verdict.check, verdict.message, repr(sorted(details.items()))


def alone_and_batched(impl: Any, batch: list[Case], size: int = 16
                      ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    alone = [outcome(oracles.check(case, impl, ops.DEVICE)) for case in batch]
    together: list[tuple[Any, ...]] = []
    for start in range(0, len(batch), size):
        verdicts = oracles.check_batch(batch[start:start + size], impl, ops.DEVICE)
        assert [v.case for v in verdicts] == batch[start:start + size]
        together += [outcome(v) for v in verdicts]
    return alone, together


@pytest.fixture(scope="module")
def sample() -> list[Case]:
    return mixed(20)


@pytest.mark.parametrize("impl_name", ["diagfuzz.impl:triton_aten", "diagfuzz.impl:aten"])
def test_correct_impls_pass_alike(impl_name: str, sample: list[Case]) -> None:
    from diagfuzz.core.impl import load_impl

    alone, together = alone_and_batched(load_impl(impl_name), sample)
    assert together == alone
    assert {kind for kind, *_ in alone} <= {"pass", "unsupported"}, alone


@pytest.mark.parametrize("mutant", [
    "unwritten_last", "overruns_buffer", "mutates_input", "aliases_input",
    "silent_fallback", "missing_dim_error", "backward_assumes_zeroed",
    "embed_unzeroed", "scatter_drops_storage_offset",
])
def test_mutants_fail_alike(mutant: str, sample: list[Case]) -> None:
    impl = importlib.import_module(f"tests.mutants.{mutant}").impl
    alone, together = alone_and_batched(impl, sample)
    assert together == alone
    assert any(kind not in ("pass", "unsupported") for kind, *_ in alone), mutant


def test_two_sentinel_cases_and_a_full_batch() -> None:
    """A Case whose reference holds every byte value runs twice (two sentinels) inside a
    batch of MAX_BATCH, and unwritten elements are still told from wrong ones."""
    from diagfuzz.core.case import Layout, Values
    from diagfuzz.oracles.sentinel import choose_sentinel
    from diagfuzz.specs import arguments, spec_of
    from tests.mutants import unwritten_last

    # Element (k, 0, 0) of the input, read by the diagonal, holds the byte k.
    every_byte = Case("diagonal", (256, 2, 2), 0, 1, 2, "uint8",
                      Layout.contiguous((256, 2, 2)),
                      values=Values(seed=7, specials=tuple((4 * k, k) for k in range(256))))
    expected, _ = spec_of("diagonal").reference(every_byte, arguments(every_byte, "cpu"))
    assert choose_sentinel(expected) is None
    batch = ([every_byte, *mixed(8, ("diagonal", "diagonal_backward"))])[:MAX_BATCH]
    for impl in (unwritten_last.impl, oracles_impl()):
        alone, together = alone_and_batched(impl, batch, size=MAX_BATCH)
        assert together == alone


def oracles_impl() -> Any:
    from diagfuzz.impl import triton_aten

    return triton_aten


def test_one_registration_each_way_per_batch(monkeypatch: pytest.MonkeyPatch,
                                             sample: list[Case]) -> None:
    """The batch's point: one sentinel registration and one copy back for all its Cases."""
    from diagfuzz.impl import triton_aten
    from diagfuzz.oracles import batch, sentinel

    entered, copies = [0], [0]
    real_enter, real_bring = sentinel.SentinelAllocations.__enter__, checks.bring_back

    def enter(self: Any) -> Any:
        entered[0] += 1
        return real_enter(self)

    def bring(runs: Any) -> None:
        copies[0] += 1
        real_bring(runs)

    monkeypatch.setattr(sentinel.SentinelAllocations, "__enter__", enter)
    monkeypatch.setattr(batch, "bring_back", bring)
    valid = [c for c in sample if not c.invalid][:16]
    verdicts = oracles.check_batch(valid, triton_aten, ops.DEVICE)
    assert all(v.ok for v in verdicts)
    assert (entered[0], copies[0]) == (1, 1)
