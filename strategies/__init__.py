"""Hypothesis strategies for diagfuzz: valid and invalid Cases of the diagonal family.

Strategies draw ``Case`` records, never tensors, so a failure shrinks as a Case and the Case
alone reproduces it (``diagfuzz.core.case.materialise``). Use them in any ``@given`` test::

    from hypothesis import given
    from diagfuzz.strategies import diagonal_cases

    @given(diagonal_cases(ranks=(2, 4), dtypes=["float32", "bfloat16"]))
    def test_my_kernel(case): ...

Every strategy validates its narrowing arguments when called and puts the simplest choice
first, so failures shrink towards rank 2, small sizes, dims (0, 1), offset 0, float32, a
contiguous layout and plain values.

The ``*_case_families`` strategies draw tuples of Cases instead: a base Case as above and
siblings that share its dearest choices (sizes, dims, layout) and draw only their own
offset, dtype and values, so one Hypothesis example yields several Cases (about
MEAN_MEMBERS) for few extra choices. A fuzz loop checks every member.

About BOUNDARY_PERCENT valid Cases in 100 are boundary Cases: a diagonal length or an
extent of the result just around a usual block size (BOUNDARY_SIZES), under a budget of
their own (``boundary_elements``), so a kernel's last partial block is reached at any
``max_elements``; ``boundary_class`` names a Case's class for coverage reports.

``huge_cases(seed, count_per_op)`` is no strategy: a fixed, seeded list of Cases past 2**31
elements for the huge tier (``diagfuzz.oracles.check_huge``).
"""

from diagfuzz.strategies._args import DEFAULT_MAX_ELEMENTS, DEFAULT_RANKS, MAX_RANK
from diagfuzz.strategies._boundary import (
    BOUNDARY_BLOCKS,
    BOUNDARY_PERCENT,
    BOUNDARY_SIZES,
    DEFAULT_BOUNDARY_ELEMENTS,
    boundary_class,
)
from diagfuzz.strategies._cases import (
    OFFSET_KINDS,
    cases,
    diagonal_backward_cases,
    diagonal_cases,
)
from diagfuzz.strategies._classes import case_classes, offset_class
from diagfuzz.strategies._families import (
    MAX_MEMBERS,
    MEAN_MEMBERS,
    case_families,
    diagonal_backward_case_families,
    diagonal_case_families,
    invalid_case_families,
    mean_members,
    same_length_offsets,
)
from diagfuzz.strategies._huge import huge_cases
from diagfuzz.strategies._invalid import (
    INVALID_CLASSES,
    broadcastable,
    broken_pairs,
    invalid_cases,
)
from diagfuzz.strategies._layouts import LAYOUT_KINDS, layouts
from diagfuzz.strategies._values import VALUE_MODES, classify_bits, special_values, values

__all__ = [
    "BOUNDARY_BLOCKS",
    "BOUNDARY_PERCENT",
    "BOUNDARY_SIZES",
    "DEFAULT_BOUNDARY_ELEMENTS",
    "DEFAULT_MAX_ELEMENTS",
    "DEFAULT_RANKS",
    "INVALID_CLASSES",
    "LAYOUT_KINDS",
    "MAX_MEMBERS",
    "MAX_RANK",
    "MEAN_MEMBERS",
    "OFFSET_KINDS",
    "VALUE_MODES",
    "boundary_class",
    "broadcastable",
    "broken_pairs",
    "case_classes",
    "case_families",
    "cases",
    "classify_bits",
    "diagonal_backward_case_families",
    "diagonal_backward_cases",
    "diagonal_case_families",
    "diagonal_cases",
    "huge_cases",
    "invalid_case_families",
    "invalid_cases",
    "layouts",
    "mean_members",
    "offset_class",
    "same_length_offsets",
    "special_values",
    "values",
]
