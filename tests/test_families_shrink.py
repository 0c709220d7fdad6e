"""A failure planted in a sibling shrinks to a family of the base and that one sibling, both
at their simplest: the failing member a reported failure names is as small as a Case's."""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from random import Random

from hypothesis import HealthCheck, find, settings

from diagfuzz.core.case import Case, Values
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.specs import spec_of
from diagfuzz.strategies import (
    diagonal_backward_case_families,
    diagonal_case_families,
    invalid_case_families,
)

FIND = settings(max_examples=300, database=None, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))
#: FIND without derandomize, for a test that shrinks under several fixed seeds.
SEEDED = settings(FIND, derandomize=False)
SHRINK_SEEDS = range(5)
Family = tuple[Case, ...]


def _non_empty(case: Case) -> bool:
    return prod(diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).shape) > 0


def _simplest(case: Case) -> None:
    """Everything a planted failure does not need is at its simplest."""
    dims = spec_of(case.op).dims or (0, 1)  # an op of fixed dims (triu: -2, -1) has its own
    assert case.sizes == (1, 1) and (case.dim1, case.dim2) == dims, case
    assert case.layout.kinds == ("contiguous",) and case.values == Values(), case


def _first_failing(family: Family, fails: Callable[[Case], bool]) -> Case:
    """The member the suite reports: the first that fails (the suite stops there)."""
    return next(case for case in family if fails(case))


def test_an_int8_sibling_shrinks_to_base_and_one_sibling() -> None:
    def fails(case: Case) -> bool:
        return case.dtype == "int8" and _non_empty(case)

    family = find(diagonal_case_families(), lambda f: any(map(fails, f[1:])), settings=FIND)
    assert len(family) == 2, family
    case = _first_failing(family, fails)
    assert case is family[1] and case.offset == 0, family
    _simplest(case)
    _simplest(family[0])
    assert family[0].dtype == "float32", family


def test_a_failure_anywhere_reports_a_small_member() -> None:
    def fails(case: Case) -> bool:
        return case.dtype == "int8" and _non_empty(case)

    family = find(diagonal_case_families(), lambda f: any(map(fails, f)), settings=FIND)
    _simplest(_first_failing(family, fails))


def test_a_later_sibling_loses_the_siblings_before_it() -> None:
    """Only the fourth member's dtype matters: the three before it shrink to the simplest,
    and none is left that does not need to be."""
    family = find(diagonal_case_families(),
                  lambda f: len(f) >= 4 and f[3].dtype == "int16", settings=FIND)
    assert len(family) == 4 and family[3].dtype == "int16", family
    assert all(c.dtype == "float32" for c in family[:3]), family
    _simplest(family[3])


def test_an_offset_sibling_shrinks_to_offset_minus_one() -> None:
    family = find(diagonal_case_families(), lambda f: any(c.offset < 0 for c in f[1:]),
                  settings=FIND)
    assert len(family) == 2 and family[1].offset == -1 and family[0].offset == 0, family
    _simplest(family[1])


def test_a_backward_dtype_sibling_shrinks_to_the_simplest_grad() -> None:
    family = find(diagonal_backward_case_families(),
                  lambda f: any(c.dtype == "int8" for c in f[1:]), settings=FIND)
    assert len(family) == 2 and family[1].dtype == "int8", family
    assert family[1].offset == 0 and family[1].sizes == (1, 1), family
    assert family[1].values == Values(), family


def test_an_invalid_sibling_shrinks_to_its_class_on_the_simplest_case() -> None:
    """Over SHRINK_SEEDS fixed seeds (one derandomized shrink is one draw of the shrinker's
    luck): the out_dtype member is always at its simplest, and no run keeps a sibling it
    does not need, but for one seed at most. With the sibling count drawn first, 3 of 20
    seeds kept one (6 of 20 with families of up to 12); with a "one more?" draw before each
    sibling, 1 of 20 (seed 0, over the ten ops' invalid classes: a high_rank sibling of
    diag kept between its base and the out_dtype member; CPU, 2026-12-06)."""
    sizes = []
    for shrink_seed in SHRINK_SEEDS:
        family = find(invalid_case_families(), lambda f: any(c.invalid == "out_dtype"
                                                              for c in f[1:]),
                      settings=SEEDED, random=Random(shrink_seed))
        case = next(c for c in family[1:] if c.invalid == "out_dtype")
        assert case.out_dtype == "bool", family
        _simplest(case)
        sizes.append(len(family))
    assert sizes.count(2) >= len(SHRINK_SEEDS) - 1 and max(sizes) <= 3, sizes
