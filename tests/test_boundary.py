"""Boundary Cases: their share, their budget, their validity, their class and their shrinking.

Strategies draw about BOUNDARY_PERCENT valid Cases in 100 with a diagonal length or a
result extent next to a block size (``diagfuzz.strategies._boundary``). Tests that need
many of them set the share to 100 (``all_boundary``): every Case is then a boundary one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from math import prod

import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz import ops
from diagfuzz.core.case import Case, Layout
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.harness.report import classify
from diagfuzz.strategies import (
    BOUNDARY_PERCENT,
    BOUNDARY_SIZES,
    DEFAULT_BOUNDARY_ELEMENTS,
    _boundary,
    boundary_class,
    cases,
    diagonal_backward_case_families,
    diagonal_backward_cases,
    diagonal_case_families,
    diagonal_cases,
)
from tests.test_strategies import check_case

OPS = ("diagonal", "diagonal_backward")
DRAW = settings(database=None, derandomize=True, deadline=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck))
FIND = settings(max_examples=3000, database=None, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture
def all_boundary(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every Case a boundary Case (where the budgets let one be drawn)."""
    monkeypatch.setattr(_boundary, "BOUNDARY_PERCENT", 100)
    yield


def drawn(strategy: st.SearchStrategy[Case], examples: int) -> list[Case]:
    """``examples`` derandomized draws (generation only)."""
    out: list[Case] = []

    @settings(DRAW, max_examples=examples)
    @given(strategy)
    def run(case: Case) -> None:
        out.append(case)

    run()
    return out


def result_size(case: Case) -> int:
    """Elements of the op's result."""
    if case.op == "diagonal":
        return prod(diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).shape)
    return prod(case.sizes)


def within(case: Case, budget: int) -> bool:
    """Every tensor of the Case, the result included, holds at most ``budget`` elements;
    diagonal_backward's input_sizes (its result) too."""
    return case.layout.storage_size <= budget and result_size(case) <= budget


@pytest.mark.parametrize("op", OPS)
def test_boundary_cases_come_at_about_their_share(op: str) -> None:
    """About BOUNDARY_PERCENT in 100 more Cases have a boundary class with boundary draws
    on than off (plain Cases have one when a size happens to be there), and only they go
    beyond max_elements."""
    on = drawn(cases(op), 2000)
    off = drawn(cases(op, boundary=False), 2000)
    share = (sum(boundary_class(c) != "none" for c in on)
             - sum(boundary_class(c) != "none" for c in off)) / 2000
    assert BOUNDARY_PERCENT / 2 <= share * 100 <= BOUNDARY_PERCENT * 1.5, share
    assert all(within(c, 4096) for c in off)
    assert all(within(c, DEFAULT_BOUNDARY_ELEMENTS) for c in on)
    beyond = [c for c in on if not within(c, 4096)]
    assert beyond and all(boundary_class(c) != "none" for c in beyond)
    lengths = Counter(boundary_class(c) for c in on)
    assert lengths["length 128±1"] and lengths["length 256±1"], lengths


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("cap", [DEFAULT_BOUNDARY_ELEMENTS, 20_000, 1024, 70])
def test_boundary_cases_respect_their_cap(op: str, cap: int, all_boundary: None) -> None:
    """Every tensor stays within ``boundary_elements``; the sizes it leaves room for all
    come up; with ``max_elements`` given as the same cap (as the plugin passes a user's
    --diagfuzz-max-elements), no Case exceeds it."""
    seen: Counter[str] = Counter()
    for case in drawn(cases(op, max_elements=min(cap, 4096), boundary_elements=cap), 400):
        assert within(case, cap), case
        seen[boundary_class(case)] += 1
    assert seen["none"] == 0, seen
    if cap >= 2049:
        assert "extent 2048±1" in seen, seen


def test_backward_lengths_need_their_square(all_boundary: None) -> None:
    """A diagonal_backward length L needs L² elements: 1,025 fits the default budget, 2,047
    does not; at 20,000 elements 129 is the longest."""
    default = drawn(diagonal_backward_cases(), 800)
    lengths = {diagonal_of(c.sizes, c.offset, c.dim1, c.dim2).length for c in default}
    assert {127, 128, 129, 1023, 1025} <= lengths and max(lengths) <= 1025
    small = drawn(diagonal_backward_cases(boundary_elements=20_000), 300)
    assert max(diagonal_of(c.sizes, c.offset, c.dim1, c.dim2).length for c in small) == 129


def test_long_diagonals_of_expanded_inputs_stay_small_in_storage(all_boundary: None) -> None:
    """Storage, not logical size, bounds an input: at a 4,096-element budget diagonal Cases
    still reach lengths up to 2,049, their input's longer diagonal dim expanded (stride 0)."""
    long = []
    for case in drawn(diagonal_cases(max_elements=4096, boundary_elements=4096), 600):
        assert within(case, 4096), case
        if prod(case.sizes) > 4096:
            assert 0 in case.layout.strides and "expanded" in case.layout.kinds, case
            long.append(diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).length)
    assert max(long) == 2049 and 1025 in long, sorted(set(long))


@pytest.mark.parametrize("op", OPS)
def test_boundary_cases_are_valid(op: str, all_boundary: None) -> None:
    """aten takes every boundary Case and gives the result the Case promises."""
    for case in drawn(cases(op), 50):
        tensor = check_case(case)
        diag = diagonal_of(case.sizes, case.offset, case.dim1, case.dim2)
        with ops.use_triton(False):
            if op == "diagonal":
                out = torch.ops.aten.diagonal_copy(tensor, case.offset, case.dim1, case.dim2)
                assert tuple(out.shape) == diag.shape, case
            else:
                assert case.layout.shape == diag.shape, case
                out = torch.ops.aten.diagonal_backward(tensor, list(case.sizes), case.offset,
                                                       case.dim1, case.dim2)
                assert tuple(out.shape) == case.sizes, case
        assert boundary_class(case) != "none" or out.numel() == 0, case


@pytest.mark.parametrize("family", [diagonal_case_families, diagonal_backward_case_families])
def test_a_boundary_base_makes_a_boundary_family(
        family: Callable[..., st.SearchStrategy[tuple[Case, ...]]], all_boundary: None) -> None:
    """Siblings share the base's sizes; diagonal_backward's keep its length, so its class."""
    for members in drawn(family(), 40):  # type: ignore[arg-type]
        base = members[0]
        assert all(m.sizes == base.sizes for m in members)
        if base.op == "diagonal_backward":
            assert {boundary_class(m) for m in members} == {boundary_class(base)}, members


def _length(case: Case) -> int:
    return diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).length


@pytest.mark.parametrize("op", OPS)
def test_a_tail_failure_shrinks_to_the_smallest_boundary_that_fails(op: str) -> None:
    """A failure on a diagonal longer than 128 and no multiple of it shrinks to length 129
    on a plain 129 x 129 float32 matrix, the smallest boundary size that fails (a draw at
    255 shrinks by way of 257)."""
    case = find(cases(op), lambda c: _length(c) > 128 and _length(c) % 128 != 0,
                settings=FIND)
    assert case.sizes == (129, 129) and case.offset == 0, case
    assert (case.dim1, case.dim2) == (0, 1) and case.dtype == "float32", case
    assert case.layout.kinds == ("contiguous",), case


def test_a_long_extent_failure_shrinks_to_the_smallest_extent() -> None:
    """At 64 elements no plain Case has an extent beyond 128: a failure needing one shrinks
    to extents of 129, the smallest boundary size beyond 128 (an extent or a length of
    129: which the shrinker reaches depends on the draws it explored)."""
    case = find(diagonal_backward_cases(max_elements=64), lambda c: max(c.sizes) > 128,
                settings=FIND)
    assert case.sizes in ((129, 1), (129, 129)) and case.offset == 0, case
    assert case.layout.kinds == ("contiguous",) and case.dtype == "float32", case


def test_boundary_off_keeps_every_case_within_max_elements() -> None:
    for op in OPS:
        for case in drawn(cases(op, boundary=False, max_elements=256), 300):
            assert within(case, 256), case


def test_boundary_class_names_length_then_largest_extent() -> None:
    square = Case("diagonal_backward", (129, 129), 0, 0, 1, "float32",
                  Layout.contiguous((129,)))
    assert boundary_class(square) == "length 128±1"
    assert classify(square)["boundary"] == ["length 128±1"]
    batch = Case("diagonal", (3, 257, 2, 1023), 0, 0, 2, "float32",
                 Layout.contiguous((3, 257, 2, 1023)))
    assert boundary_class(batch) == "extent 1024±1"  # the largest of 257 and 1023
    input_dim = Case("diagonal", (5, 1024), 0, 0, 1, "float32", Layout.contiguous((5, 1024)))
    assert boundary_class(input_dim) == "extent 1024±1"  # a length-5 diagonal
    assert boundary_class(input_dim.replace(sizes=(5, 1000),
                                            layout=Layout.contiguous((5, 1000)))) == "none"
    assert boundary_class(square.replace(invalid="rank1")) == "n/a"
    assert all(b - 1 in BOUNDARY_SIZES and b + 1 in BOUNDARY_SIZES
               for b in _boundary.BOUNDARY_BLOCKS)


@pytest.mark.parametrize(("call", "argument"), [
    (lambda: diagonal_cases(boundary="yes"), "boundary"),
    (lambda: diagonal_backward_cases(boundary_elements=0), "boundary_elements"),
    (lambda: diagonal_case_families(boundary_elements=1.5), "boundary_elements"),
])
def test_boundary_arguments_are_checked(call: Callable[[], object], argument: str) -> None:
    with pytest.raises(InvalidArgument, match=argument):
        call()
