"""Small Cases the faulty impls misbehave on (offset 1: abort/wrong; offset -1: hang)."""

from __future__ import annotations

from diagfuzz.core.case import Case, Layout
from diagfuzz.core.verdict import Verdict


def square(offset: int, n: int = 3, op: str = "diagonal") -> Case:
    """A contiguous n x n float32 diagonal Case (or its backward) with ``offset``."""
    if op == "diagonal":
        return Case("diagonal", (n, n), offset, 0, 1, "float32", Layout.contiguous((n, n)))
    length = n - abs(offset)
    return Case("diagonal_backward", (n, n), offset, 0, 1, "float32",
                Layout.contiguous((length,)))


def unplaced(verdict: Verdict) -> str:
    """The verdict's JSON without where its executor's history was written (which differs
    by runner and by the calls made before it): what two runs of one Case can agree on."""
    return Verdict(verdict.kind, verdict.check, verdict.message, verdict.case,
                   {k: v for k, v in verdict.details.items() if k != "history"}).to_json()
