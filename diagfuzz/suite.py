"""The diagfuzz fuzz suite: three streams of Cases, each split into seeded shards.

Run it with the plugin, which parametrizes ``diagfuzz_shard`` and runs every Case through
the implementation under test::

    pytest -n auto -p diagfuzz --pyargs diagfuzz.suite [--impl MODULE:ATTR]

Each test is one shard (a separate item, so xdist spreads the budget over workers). A shard
draws Case families (``diagfuzz.strategies.*_case_families``: a base Case and siblings that
share its sizes, dims and layout, so one Hypothesis example yields several Cases for a few
extra choices) and checks every member over its whole budget; it then fails with one shrunk
finding per failure signature (``diagfuzz.shard``).
"""

from __future__ import annotations

import pytest

from diagfuzz import strategies
from diagfuzz.shard import Shard

pytestmark = pytest.mark.fuzz


def test_diagonal(diagfuzz_shard: Shard) -> None:
    """Valid diagonal (diagonal_copy) Cases: every bit, stride and alias checked."""
    diagfuzz_shard.fuzz(strategies.diagonal_case_families)


def test_diagonal_backward(diagfuzz_shard: Shard) -> None:
    """Valid diagonal_backward Cases."""
    diagfuzz_shard.fuzz(strategies.diagonal_backward_case_families)


def test_invalid(diagfuzz_shard: Shard) -> None:
    """Invalid Cases of either op: the impl must raise what aten raises (error parity)."""
    diagfuzz_shard.fuzz(strategies.invalid_case_families)
