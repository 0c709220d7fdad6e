"""The diagfuzz fuzz suite: three streams of Cases, each split into seeded shards.

Run it with the plugin, which parametrizes ``diagfuzz_shard`` and runs every Case through
the implementation under test::

    pytest -n auto -p diagfuzz --pyargs diagfuzz.suite [--impl MODULE:ATTR]

Each test is one shard (a separate item, so xdist spreads the budget over workers); a
non-pass Verdict fails it with the Verdict's message after Hypothesis has shrunk the Case.
"""

from __future__ import annotations

import pytest

from diagfuzz import strategies
from diagfuzz.plugin import Shard

pytestmark = pytest.mark.fuzz


def test_diagonal(diagfuzz_shard: Shard) -> None:
    """Valid diagonal (diagonal_copy) Cases: every bit, stride and alias checked."""
    diagfuzz_shard.fuzz(strategies.diagonal_cases)


def test_diagonal_backward(diagfuzz_shard: Shard) -> None:
    """Valid diagonal_backward Cases."""
    diagfuzz_shard.fuzz(strategies.diagonal_backward_cases)


def test_invalid(diagfuzz_shard: Shard) -> None:
    """Invalid Cases of either op: the impl must raise what aten raises (error parity)."""
    diagfuzz_shard.fuzz(strategies.invalid_cases)
