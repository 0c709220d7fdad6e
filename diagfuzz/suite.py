"""The diagfuzz fuzz suite: a stream of Cases per op, one of invalid Cases, each split into
seeded shards.

Run it with the plugin, which parametrizes ``diagfuzz_shard`` and runs every Case through
the implementation under test::

    pytest -n auto -p diagfuzz --pyargs diagfuzz.suite [--impl MODULE:ATTR]

Each test is one shard (a separate item, so xdist spreads the budget over workers). A shard
draws Case families (``diagfuzz.strategies.case_families``: a base Case and siblings that
share its sizes, dims and layouts, so one Hypothesis example yields several Cases for a few
extra choices) and checks every member over its whole budget; it then fails with one shrunk
finding per failure signature (``diagfuzz.harness.shard``). The streams come from the op
specs (``diagfuzz.specs``): ``test_<op>`` for each op, then ``test_invalid``.
``test_sequences`` draws call sequences for bugs that depend on what ran before
(``diagfuzz.harness.sequences``), and the nightly profile adds ``test_huge``, the huge tier
(``diagfuzz.harness.huge``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from diagfuzz import strategies
from diagfuzz.harness.shard import Shard
from diagfuzz.specs import SPECS

pytestmark = pytest.mark.fuzz


def _valid_stream(op: str) -> Callable[[Shard], None]:
    """The test function of op ``op``'s stream of valid Cases."""

    def test(diagfuzz_shard: Shard) -> None:
        diagfuzz_shard.fuzz(partial(strategies.case_families, op))

    test.__name__ = test.__qualname__ = f"test_{op}"
    test.__doc__ = f"Valid {op} Cases: every bit, stride and alias checked."
    return test


for _op in SPECS:
    globals()[f"test_{_op}"] = _valid_stream(_op)


def test_invalid(diagfuzz_shard: Shard) -> None:
    """Invalid Cases of every op: the impl must refuse each as aten does (error parity)."""
    diagfuzz_shard.fuzz(strategies.invalid_case_families)


def test_sequences(diagfuzz_sequences: Shard) -> None:
    """Call sequences drawn for bugs that depend on what ran before (a cache keyed without
    strides, a leaked flag, a switch at the n-th call), each on fresh executors."""
    from diagfuzz.harness.sequences import run_in_suite

    run_in_suite(diagfuzz_sequences)


def test_huge(diagfuzz_huge: Shard) -> None:
    """The huge tier: a few Cases per op past 2**31 elements and 2**32 bytes, judged on the
    GPU in chunks (the nightly profile, or --diagfuzz-huge; skipped without CUDA)."""
    from diagfuzz.harness.huge import run_huge_tier

    run_huge_tier(diagfuzz_huge)
