"""Every invalid Case makes aten raise, with the error its class names."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from diagfuzz import ops
from diagfuzz.case import call_arguments
from diagfuzz.core.case import Case
from diagfuzz.oracles import reference
from diagfuzz.strategies import INVALID_CLASSES, broadcastable, invalid_cases

_SCHEMA = (r"Expected a value of type|failed to match any schema|Overflow"
           r"|Expected a proper Tensor but got None")
_DIMS = r"Dimension out of range|diagonal dimensions cannot be identical"
_DIAG_RANK = r"diag\(\): Supports 1D or 2D tensors"
_TRIANGLE_RANK = r"input tensor must have at least 2 dimensions"
#: What aten says for each class (CPU, torch 2.11 - 2.13).
EXPECTED = {
    "rank0": f"{_DIMS}|{_DIAG_RANK}|{_TRIANGLE_RANK}",
    "rank1": f"{_DIMS}|{_TRIANGLE_RANK}",
    "high_rank": _DIAG_RANK,
    "dim_above_range": "Dimension out of range",
    "dim_below_range": "Dimension out of range",
    "same_dims": "diagonal dimensions cannot be identical",
    "grad_output_shape": r"must match the size|doesn't match the broadcast shape",
    "src_shape": "expected src to have a size equal to the slice of self",
    "negative_size": "Dimension size must be non-negative",
    "huge_offset": r"cannot be represented as a SymInt|calculation overflowed",
    "out_dtype": r"Expected out tensor to have dtype|can't be cast to the desired out= type",
    "out_device": "cross-device copies are not allowed",
    "non_integer": _SCHEMA,
    "int_overflow": _SCHEMA,
    "non_tensor": _SCHEMA,
}


def aten_call(case: Case, device: str = "cpu") -> Any:
    """Call aten itself (diagfuzz's kernels off) with the Case's arguments, through the
    op's spec (its ``.out`` overload for a ``.out`` Case)."""
    with ops.use_triton(False):
        return reference.call_op(reference.ATEN, case, call_arguments(case, device))


def test_invalid_cases_make_aten_raise_their_error() -> None:
    """Every (op, class) pair is drawn and raises aten's error. 1,600 draws (for 56 pairs
    of six ops; when there were 22, 800 draws missed a pair at one run seed in 12, as
    Hypothesis repeats earlier choices, so the derandomized run could flip with the set
    of imported modules)."""
    raised: set[tuple[str, str]] = set()

    @settings(max_examples=1600, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(invalid_cases())
    def run(case: Case) -> None:
        with pytest.raises((RuntimeError, IndexError, TypeError)) as caught:
            aten_call(case)
        assert re.search(EXPECTED[case.invalid], str(caught.value)), (case, caught.value)
        raised.add((case.op, case.invalid))

    run()
    expected = {(op, c) for c, ops in INVALID_CLASSES.items() for op in ops}
    assert raised == expected, sorted(expected - raised)


def test_every_class_has_an_expected_error() -> None:
    assert set(EXPECTED) == set(INVALID_CLASSES)


def test_a_broadcastable_grad_output_is_valid_for_aten() -> None:
    """Why grad_output_shape Cases avoid broadcastable shapes: aten accepts those."""
    for grad_shape in [(), (1,), (3,), (1, 3)]:
        assert broadcastable(grad_shape, (2, 3))
        with ops.use_triton(False):
            out = torch.ops.aten.diagonal_backward(torch.ones(grad_shape), [2, 3, 4], 0, 1, 2)
        assert out.shape == (2, 3, 4)
    assert not broadcastable((1, 2, 3), (2, 3)) and not broadcastable((2,), (2, 3))
