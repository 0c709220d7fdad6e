"""triu and tril's tiled kernel (a BLOCK_M x BLOCK_N tile of one matrix per program, used
for matrices of at least 8 rows of 256 bytes): bitwise aten's on every row of the triangle
table with its thresholds lowered so that every matrix takes it, functional, ``out=`` and
in place; and which matrices take it by default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.ops import triangle
from tests.bitwise import bitwise_difference
from tests.family_table import Row, inputs, storage_difference, tensor, triangle_rows


@pytest.fixture
def tiles_everywhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every non-empty matrix through the tiled kernel (plans cached before forgotten)."""
    monkeypatch.setattr(triangle, "TILE_MIN_ROWS", 1)
    monkeypatch.setattr(triangle, "TILE_MIN_WIDTH_BYTES", 1)
    triangle._PLANS.clear()
    yield
    triangle._PLANS.clear()


def _twin(x: torch.Tensor) -> torch.Tensor:
    """``x`` over a copy of its whole storage, viewed alike."""
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(
        x.untyped_storage().clone(), x.storage_offset(), x.shape, x.stride())


@pytest.mark.parametrize("row", triangle_rows(), ids=Row.describe)
def test_the_tiled_kernel_is_atens_bitwise(row: Row, tiles_everywhere: None) -> None:
    (x,) = inputs(row)
    name = row.op
    if x.numel():
        assert triangle._plan_tiles(x, row.offset, name == "triu", False) is not None
    with ops.use_triton(False):
        expected = getattr(torch.ops.aten, name)(x, row.offset)
    actual = getattr(ops, name)(x, row.offset)
    assert bitwise_difference(actual, expected) == "", row.describe()
    out = getattr(ops, f"{name}_out")(x, row.offset, out=torch.empty(0, dtype=x.dtype,
                                                                       device=x.device))
    assert bitwise_difference(out, expected) == "", row.describe()
    if row.kind == "expanded" and ops.DEVICE == "cpu":
        return  # aten's CPU kernel refuses some; test_kernels_family judges those
    want, got = _twin(x), _twin(x)
    with ops.use_triton(False):
        getattr(want, f"{name}_")(row.offset)
    assert getattr(ops, f"{name}_")(got, row.offset) is got
    assert storage_difference(got, want) == "", row.describe()


def test_large_matrices_take_tiles_and_small_ones_the_flat_kernel() -> None:
    big = tensor((16, 64))  # 16 rows of 256 bytes
    assert triangle._plan_tiles(big, 0, True, False) is not None
    for small in (tensor((7, 64)), tensor((16, 63)), tensor((1000, 3, 4))):
        assert triangle._plan_tiles(small, 0, True, False) is None
