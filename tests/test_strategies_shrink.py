"""Planted failures shrink to the simplest Case that still fails, one aspect at a time."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st

from diagfuzz.core.case import Case, Values
from diagfuzz.strategies import diagonal_backward_cases, diagonal_cases, invalid_cases

FIND = settings(max_examples=300, database=None, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))


def _plain(case: Case) -> None:
    """Everything the planted failure does not need is at its simplest."""
    assert case.dtype == "float32", case
    assert (case.dim1, case.dim2) == (0, 1), case
    assert case.values == Values(), case
    assert max(case.sizes) <= 2, case


def test_negative_offset_failure_shrinks_to_rank2_contiguous_float32() -> None:
    case = find(diagonal_cases(), lambda c: c.offset < 0, settings=FIND)
    assert len(case.sizes) == 2, case
    assert case.layout.kinds == ("contiguous",), case
    assert case.offset == -1, case
    _plain(case)


def test_storage_offset_failure_keeps_only_the_offset() -> None:
    case = find(diagonal_cases(), lambda c: c.layout.storage_offset > 0, settings=FIND)
    assert case.layout.kinds == ("offset",), case
    assert case.layout.storage_offset == 1, case
    assert len(case.sizes) == 2 and case.offset == 0, case
    assert case.layout.strides == (max(case.sizes[1], 1), 1), case
    _plain(case)


def test_backward_failure_on_expanded_grad_keeps_only_the_expansion() -> None:
    case = find(diagonal_backward_cases(), lambda c: 0 in c.layout.strides, settings=FIND)
    assert case.layout.kinds == ("expanded",), case
    assert len(case.sizes) == 2 and case.offset == 0, case
    _plain(case)


def test_invalid_failure_shrinks_to_its_class_on_the_simplest_case() -> None:
    case = find(invalid_cases(), lambda c: c.invalid == "out_dtype", settings=FIND)
    assert case.out_dtype == "bool", case
    assert len(case.sizes) == 2 and case.layout.kinds == ("contiguous",), case
    assert case.offset == 0, case
    _plain(case)


def test_invalid_cases_shrink_to_rank0() -> None:
    case = find(invalid_cases(), lambda c: True, settings=FIND)
    assert case.invalid == "rank0" and case.sizes == (), case


def test_any_case_shrinks_to_the_minimal_case() -> None:
    case = find(st.one_of(diagonal_cases()), lambda c: True, settings=FIND)
    assert case == Case("diagonal", (1, 1), 0, 0, 1, "float32",
                        case.layout.contiguous((1, 1))), case


@pytest.mark.parametrize("seed", range(5))
def test_special_failure_keeps_one_special_at_the_first_read_element(seed: int) -> None:
    """A failure needing -0.0 in a float32 Case shrinks to that one special, on the first
    diagonal element, of the simplest Case, whatever the search's seed: the specials blob
    (draw_values) shrinks bytewise, a zeroed slot is no special, and the count shrinks
    towards 1."""
    case = find(diagonal_cases(),
                lambda c: c.dtype == "float32" and any(bits == 0x80000000
                                                      for _, bits in c.values.specials),
                settings=settings(FIND, max_examples=3000, derandomize=False),
                random=Random(seed))
    assert case.values == Values(specials=((0, 0x80000000),)), case
    assert case.sizes == (1, 1) and case.layout.kinds == ("contiguous",), case
