"""Hypothesis strategies for diagfuzz: valid and invalid Cases of the diagonal family.

Strategies draw ``Case`` records, never tensors, so a failure shrinks as a Case and the Case
alone reproduces it (``diagfuzz.case.materialise``). Use them in any ``@given`` test::

    from hypothesis import given
    from diagfuzz.strategies import diagonal_cases

    @given(diagonal_cases(ranks=(2, 4), dtypes=["float32", "bfloat16"]))
    def test_my_kernel(case): ...

Every strategy validates its narrowing arguments when called and puts the simplest choice
first, so failures shrink towards rank 2, small sizes, dims (0, 1), offset 0, float32, a
contiguous layout and plain values.
"""

from diagfuzz.strategies._args import DEFAULT_MAX_ELEMENTS, DEFAULT_RANKS, MAX_RANK
from diagfuzz.strategies._cases import (
    OFFSET_KINDS,
    cases,
    diagonal_backward_cases,
    diagonal_cases,
)
from diagfuzz.strategies._classes import case_classes, offset_class
from diagfuzz.strategies._invalid import INVALID_CLASSES, broadcastable, invalid_cases
from diagfuzz.strategies._layouts import LAYOUT_KINDS, layouts
from diagfuzz.strategies._values import VALUE_MODES, classify_bits, special_values, values

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "DEFAULT_RANKS",
    "INVALID_CLASSES",
    "LAYOUT_KINDS",
    "MAX_RANK",
    "OFFSET_KINDS",
    "VALUE_MODES",
    "broadcastable",
    "case_classes",
    "cases",
    "classify_bits",
    "diagonal_backward_cases",
    "diagonal_cases",
    "invalid_cases",
    "layouts",
    "offset_class",
    "special_values",
    "values",
]
