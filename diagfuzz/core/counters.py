"""Kernel launch counters: how the oracle proves a result came from diagfuzz's Triton kernel
and not from a silent fallback to aten (the dispatch proof).

Kept in the core, not with the kernels, so the oracle reads them without importing a
kernel: ``diagfuzz.ops`` counts each launch here.
"""

from __future__ import annotations

from collections import Counter

#: Triton launches per kernel since import.
LAUNCHES: Counter[str] = Counter()


def count(kernel: str) -> None:
    """Record one launch of ``kernel``."""
    LAUNCHES[kernel] += 1


def launches(kernel: str) -> int:
    """How many launches ``kernel`` has made."""
    return LAUNCHES[kernel]
