"""Foundation: both kernels equal aten bitwise over the hand-written table.

Runs on the kernels' device (CPU tensors through Triton's interpreter here, CUDA on a GPU).
aten runs with the registration off, on its own output buffer.
"""

from __future__ import annotations

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.core.case import Case, materialise
from tests.bitwise import bitwise_difference
from tests.kernel_table import case, dtype_rows, geometry_rows


def _run_both(row: Case) -> tuple[torch.Tensor, torch.Tensor]:
    tensor = materialise(row, ops.DEVICE)
    args = (row.offset, row.dim1, row.dim2)
    with ops.use_triton(False):
        if row.op == "diagonal":
            expected = torch.ops.aten.diagonal_copy(tensor, *args)
            actual = ops.diagonal_copy(tensor, *args)
        else:
            expected = torch.ops.aten.diagonal_backward(tensor, list(row.sizes), *args)
            actual = ops.diagonal_backward(tensor, list(row.sizes), *args)
    return actual, expected


ROWS = [*geometry_rows("diagonal"), *geometry_rows("diagonal_backward"),
        *dtype_rows("diagonal"), *dtype_rows("diagonal_backward")]


@pytest.mark.parametrize("row", ROWS, ids=Case.describe)
def test_kernel_matches_aten_bitwise(row: Case) -> None:
    actual, expected = _run_both(row)
    assert bitwise_difference(actual, expected) == "", row.to_json()


def test_table_covers_every_dtype_and_special_zero_and_nan() -> None:
    dtypes = {row.dtype for row in ROWS}
    assert {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
            "float32", "float64", "complex64", "complex128"} <= dtypes
    # -0.0 and a NaN with a payload survive the trip bit for bit (assert_close would not see).
    row = case("diagonal", (2, 2), 0, 0, 1, specials=[(0, 0x80000000), (3, 0xFFA00001)])
    actual, _ = _run_both(row)
    assert actual.view(torch.int32).tolist() == [-(2**31), -0x5FFFFF]


def test_result_is_a_new_contiguous_tensor() -> None:
    x = materialise(case("diagonal", (4, 5), 1, 0, 1, layout="sliced"), ops.DEVICE)
    out = ops.diagonal_copy(x, 1, 0, 1)
    assert out.is_contiguous() and out.untyped_storage().data_ptr() != \
        x.untyped_storage().data_ptr()
    grad = ops.diagonal_backward(out, [4, 5], 1, 0, 1)
    assert grad.is_contiguous() and grad.shape == (4, 5)


def test_backward_writes_every_element_of_an_uninitialised_result(monkeypatch) -> None:
    """The result comes from torch.empty: poison what empty returns, then demand zeros."""
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", _poisoning(real_empty))
    g = materialise(case("diagonal_backward", (5, 7, 3), 2, 1, 0), ops.DEVICE)
    out = ops.diagonal_backward(g, [5, 7, 3], 2, 1, 0)
    monkeypatch.undo()
    with ops.use_triton(False):
        expected = torch.ops.aten.diagonal_backward(g, [5, 7, 3], 2, 1, 0)
    assert bitwise_difference(out, expected) == ""


def _poisoning(real_empty):
    """torch.empty whose memory holds 0xA5 bytes, so unwritten elements cannot look zero."""
    def empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        t.view(-1).view(torch.uint8).fill_(0xA5)
        return t
    return empty


@pytest.mark.parametrize("op", ["diagonal", "diagonal_backward"])
def test_out_overloads_write_into_out(op: str) -> None:
    row = case(op, (3, 4, 5), -1, 2, 0, layout="permuted")
    tensor = materialise(row, ops.DEVICE)
    args = (row.offset, row.dim1, row.dim2)
    with ops.use_triton(False):
        if op == "diagonal":
            expected = torch.ops.aten.diagonal_copy(tensor, *args)
            out = torch.empty(0, device=ops.DEVICE)
            result = ops.diagonal_copy_out(tensor, *args, out=out)
        else:
            expected = torch.ops.aten.diagonal_backward(tensor, [3, 4, 5], *args)
            out = torch.empty(0, device=ops.DEVICE)
            result = ops.diagonal_backward_out(tensor, [3, 4, 5], *args, out=out)
    assert result is out
    assert bitwise_difference(out, expected) == ""


def test_out_overload_keeps_a_non_contiguous_out_of_the_right_shape() -> None:
    g = materialise(case("diagonal_backward", (3, 4), 0, 0, 1), ops.DEVICE)
    out = torch.empty(4, 3, device=ops.DEVICE).t()
    with ops.use_triton(False):
        expected = torch.ops.aten.diagonal_backward(g, [3, 4], 0, 0, 1)
        ops.diagonal_backward_out(g, [3, 4], 0, 0, 1, out=out)
    assert out.stride() == (1, 3)
    assert bitwise_difference(out.contiguous(), expected) == ""
