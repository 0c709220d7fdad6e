"""Case families: every member is an ordinary Case, siblings share what they should, and a
seed draws the same families.

Shrinking of families is in test_families_shrink.py, the suite drawing them end to end in
test_families_suite.py.
"""

from __future__ import annotations

from math import prod

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz import ops
from diagfuzz.core.case import Case
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.strategies import (
    DEFAULT_MAX_ELEMENTS,
    INVALID_CLASSES,
    MAX_MEMBERS,
    MEAN_MEMBERS,
    case_families,
    diagonal_backward_case_families,
    diagonal_backward_cases,
    diagonal_case_families,
    diagonal_cases,
    invalid_case_families,
    invalid_cases,
    mean_members,
    same_length_offsets,
)
from diagfuzz.strategies._families import EXTREME_OFFSETS
from tests.test_strategies import check_case
from tests.test_strategies_invalid import aten_call

FAST = settings(max_examples=60, database=None, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))
Family = tuple[Case, ...]


def _shared(family: Family) -> None:
    """Siblings keep the base's sizes, dims and layout (the dear choices)."""
    base = family[0]
    assert 1 <= len(family) <= MAX_MEMBERS, family
    for member in family[1:]:
        assert (member.op, member.sizes, member.dim1, member.dim2, member.layout) == (
            base.op, base.sizes, base.dim1, base.dim2, base.layout), (base, member)


@FAST
@given(diagonal_case_families())
def test_diagonal_family_members_are_valid_cases(family: Family) -> None:
    _shared(family)
    for case in family:
        assert case.op == "diagonal" and case.layout.shape == case.sizes and not case.invalid
        tensor = check_case(case)
        with ops.use_triton(False):
            out = torch.ops.aten.diagonal_copy(tensor, case.offset, case.dim1, case.dim2)
        assert tuple(out.shape) == diagonal_of(case.sizes, case.offset, case.dim1,
                                               case.dim2).shape


@FAST
@given(diagonal_backward_case_families())
def test_backward_family_members_are_valid_cases_of_one_grad_shape(family: Family) -> None:
    _shared(family)
    for case in family:
        assert case.op == "diagonal_backward" and not case.invalid
        grad_shape = diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).shape
        assert case.layout.shape == grad_shape, case
        tensor = check_case(case)
        with ops.use_triton(False):
            out = torch.ops.aten.diagonal_backward(tensor, list(case.sizes), case.offset,
                                                   case.dim1, case.dim2)
        assert tuple(out.shape) == case.sizes


@settings(FAST, max_examples=100)
@given(invalid_case_families())
def test_invalid_family_members_make_aten_raise(family: Family) -> None:
    base = family[0]
    for case in family:
        assert case.invalid in INVALID_CLASSES and case.op == base.op, family
        with pytest.raises((RuntimeError, IndexError, TypeError)):
            aten_call(case)
        low_rank = case.invalid in ("rank0", "rank1")
        assert low_rank == (base.invalid in ("rank0", "rank1")), family
        if low_rank:  # siblings of a low-rank base keep its class, sizes and layout
            assert (case.invalid, case.sizes, case.layout) == (base.invalid, base.sizes,
                                                               base.layout), family
        check_case(case, budget=max(DEFAULT_MAX_ELEMENTS, case.layout.storage_size))


def test_siblings_vary_what_they_draw() -> None:
    """Over a few dozen families, siblings bring dtypes and offsets the base did not have."""
    seen: dict[str, set[tuple[str, bool]]] = {"dtype": set(), "offset": set()}

    @settings(FAST, max_examples=80)
    @given(st.one_of(diagonal_case_families(), diagonal_backward_case_families()))
    def run(family: Family) -> None:
        base = family[0]
        for member in family[1:]:
            seen["dtype"].add((member.op, member.dtype != base.dtype))
            seen["offset"].add((member.op, member.offset != base.offset))

    run()
    for op in ("diagonal", "diagonal_backward"):
        assert (op, True) in seen["dtype"] and (op, True) in seen["offset"], seen


@pytest.mark.parametrize(("rows", "cols"), [(3, 3), (3, 7), (7, 3), (1, 1), (0, 4), (5, 0)])
def test_same_length_offsets_keep_the_diagonal_length(rows: int, cols: int) -> None:
    for offset in range(-rows - 2, cols + 3):
        found = same_length_offsets(rows, cols, offset)
        assert found[0] == offset and len(set(found)) == len(found)
        length = diagonal_of((rows, cols), offset, 0, 1).shape[-1]
        for other in found:
            assert diagonal_of((rows, cols), other, 0, 1).shape[-1] == length, (offset, other)
        if length == 0:
            assert set(EXTREME_OFFSETS) <= set(found)


def test_same_length_offsets_reach_both_ends_of_a_run() -> None:
    # A 3 x 7 matrix has full-length (3) diagonals at offsets 0 .. 4.
    assert same_length_offsets(3, 7, 2) == (2, 0, 4)
    assert same_length_offsets(7, 3, -1) == (-1, -4, 0)
    assert same_length_offsets(3, 3, 1) == (1, -1)


def test_one_member_families_are_the_case_strategies_cases() -> None:
    """max_members=1 draws exactly the Cases of the Case strategy for the same seed: the
    base is drawn as before, and no "one more?" draw follows it."""
    pairs = [(diagonal_case_families, diagonal_cases),
             (diagonal_backward_case_families, diagonal_backward_cases),
             (invalid_case_families, invalid_cases)]
    for families, plain in pairs:
        assert _draw(families(max_members=1), 40) == [(c,) for c in _draw(plain(), 40)]


def test_a_seed_draws_the_same_families() -> None:
    assert _draw(diagonal_case_families(), 30) == _draw(diagonal_case_families(), 30)
    assert _draw(invalid_case_families(), 30, 7) != _draw(invalid_case_families(), 30, 8)


def _draw(strategy: st.SearchStrategy, examples: int, at: int = 3) -> list:
    drawn: list = []

    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(at)
    @given(strategy)
    def run(value: object) -> None:
        drawn.append(value)

    run()
    return drawn


def test_family_sizes_average_about_mean_members() -> None:
    sizes = [len(f) for f in _draw(diagonal_case_families(), 200)]
    assert max(sizes) == MAX_MEMBERS and min(sizes) == 1
    assert 0.7 * MEAN_MEMBERS < sum(sizes) / len(sizes) < 1.3 * MEAN_MEMBERS, sizes
    assert mean_members(MAX_MEMBERS) == MEAN_MEMBERS and mean_members(1) == 1


def test_mean_members_estimates_smaller_families_too() -> None:
    """A shard's example count comes from mean_members(--diagfuzz-max-members): within 25%
    of what is drawn at 4 members (a straight line from 1 to MEAN_MEMBERS was 20% low)."""
    sizes = [len(f) for f in _draw(diagonal_case_families(max_members=4), 300)]
    assert abs(sum(sizes) / len(sizes) / mean_members(4) - 1) < 0.25, sizes


def test_narrowing_reaches_every_member() -> None:
    @settings(FAST, max_examples=30)
    @given(case_families("diagonal", ranks=3, dtypes=["int8", "float16"], max_elements=64,
                         offsets=["size"], max_members=3, boundary_elements=64))
    def run(family: Family) -> None:
        assert len(family) <= 3
        for case in family:
            d1, d2 = case.dim1 % 3, case.dim2 % 3
            assert case.dtype in ("int8", "float16") and len(case.sizes) == 3
            assert case.offset in (case.sizes[d2], -case.sizes[d1])
            assert prod(max(n, 1) for n in case.sizes) <= 64

    run()
    with pytest.raises(InvalidArgument, match="classes"):
        invalid_case_families("diagonal", classes=["negative_size"])
    only_low = _draw(invalid_case_families(classes=["rank1"]), 20)
    assert all(c.invalid == "rank1" for f in only_low for c in f)
    single = _draw(invalid_case_families(classes=["out_dtype"], max_members=4), 20)
    assert all(c.invalid == "out_dtype" for f in single for c in f)
    assert max(len(f) for f in single) > 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_max_members_is_checked(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="max_members"):
        diagonal_case_families(max_members=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="op="):
        case_families("trace")
