"""diagonal_copy's two GPU-side layouts of work, bitwise against aten under the interpreter.

* Programs that own whole rows or one segment of a row (``GATHER_ALIGN_ROWS``): with flat
  blocks a block crossing a row end took a second pass of loads.
* Transposed tiles (``COPY_TRANSPOSE``): where the input holds its innermost row dim closer
  together than the diagonal's positions (``16x16x256x256 d=(0,1)``), a program moves a
  ``[I_BLOCK, C_BLOCK]`` tile loaded along the rows and stored along the diagonal.

Each runs under the interpreter's own plans and under GPU plans shrunk to a few words
(several programs a row, several tiles both ways, masked edges). On a GPU this file runs the
compiled kernels with those plans.
"""

from __future__ import annotations

import importlib

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling
from tests.bitwise import bitwise_difference
from tests.tuning import tune

copy_module = importlib.import_module("diagfuzz.ops.diagonal_copy")


def _bits(sizes: list[int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    bits = torch.randint(-2**31, 2**31 - 1, sizes, generator=gen, dtype=torch.int64)
    if dtype == torch.bool:
        return (bits % 2 == 0).to(ops.DEVICE)
    if dtype == torch.float32:
        return bits.to(torch.int32).view(torch.float32).to(ops.DEVICE)
    return bits.to(dtype).to(ops.DEVICE)


def _copy_plan(x: torch.Tensor, offset: int, dim1: int, dim2: int):
    """Check the functional and ``.out`` forms against aten; return the plan made."""
    copy_module._PLANS.clear()
    with ops.use_triton(False):
        expected = torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)
    assert bitwise_difference(ops.diagonal_copy(x, offset, dim1, dim2), expected) == ""
    out = torch.empty(expected.shape, dtype=x.dtype, device=ops.DEVICE)
    out.view(torch.uint8).fill_(0x5A)  # a word left unwritten shows
    ops.diagonal_copy_out(x, offset, dim1, dim2, out=out)
    assert bitwise_difference(out, expected) == ""
    ((_, plan),) = copy_module._PLANS.values()
    return plan


def _gpu_plans(monkeypatch, gather_bytes: int) -> None:
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    monkeypatch.setattr(copy_module, "INTERPRET", False)
    tune(monkeypatch, gather_block_bytes=gather_bytes, max_wide_lanes=2)


@pytest.fixture(params=["interpreter-plans", "gpu-plans"])
def tiles(request, monkeypatch):
    tune(monkeypatch, copy_transpose=True)
    monkeypatch.setattr(copy_module, "_PLANS", {})
    if request.param == "interpreter-plans":  # on a GPU too: valid Triton, other blocks
        monkeypatch.setattr(_tiling, "INTERPRET", True)
        monkeypatch.setattr(copy_module, "INTERPRET", True)
    if request.param == "gpu-plans":
        _gpu_plans(monkeypatch, 16)
        # tiny results are "large"
        tune(monkeypatch, copy_transpose_min_bytes=0, copy_transpose_i_block=2,
             copy_transpose_c_block=2)
    return request.param


#: (input sizes, offset, dim1, dim2): contiguous, the rows' innermost dim is contiguous and
#: the diagonal strided across whole rows.
TILE_GEOMETRIES = [
    ([5, 7, 3, 4], 1, 0, 1),  # rows of 12 (two dims merged), a diagonal of 5
    ([6, 6, 8], -2, 1, 0),  # dims given in reverse, a negative offset
    ([2, 5, 6, 4], 0, 1, 2),  # a batch dim outside the diagonal dims: rows 2 x 4
    ([5, 2, 6, 5], 2, 0, 2),  # a batch dim between them: rows 2 x 5 (not merged)
    ([3, 4, 2, 16], 0, 0, 1),  # a diagonal shorter than a tile, long rows
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.int64, torch.bool])
@pytest.mark.parametrize("geometry", TILE_GEOMETRIES, ids=str)
def test_transposed_tiles_match_aten(tiles, geometry, dtype) -> None:
    sizes, offset, dim1, dim2 = geometry
    plan = _copy_plan(_bits(sizes, dtype, sum(sizes)), offset, dim1, dim2)
    assert plan.constexprs["TRANSPOSE"] is True
    if tiles == "gpu-plans" and sizes != [3, 4, 2, 16]:  # several tiles both ways
        assert plan.arg("n_iblocks") > 1 and plan.arg("n_cblocks") > 1


#: name -> (input maker, offset, dim1, dim2, takes the tiles)
INPUTS = {
    "rows read with a stride of 2": (lambda d: _bits([6, 6, 10], d, 1)[..., ::2], 0, 0, 1, True),
    "storage offset": (lambda d: _bits([200], d, 2)[11:11 + 150].reshape(5, 5, 6), 1, 0, 1,
                       True),
    "expanded rows (stride 0)": (lambda d: _bits([5, 5, 1], d, 3).expand(5, 5, 6), 0, 0, 1,
                                 True),
    "permuted: rows outermost": (lambda d: _bits([6, 5, 5], d, 4).permute(1, 2, 0), 0, 0, 1,
                                 False),
    "diagonal dims innermost": (lambda d: _bits([4, 6, 6], d, 5), 1, 1, 2, False),
    "a diagonal of one": (lambda d: _bits([1, 5, 6], d, 6), 0, 0, 1, False),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
@pytest.mark.parametrize("name", INPUTS)
def test_input_views(tiles, name, dtype) -> None:
    make, offset, dim1, dim2, takes_tiles = INPUTS[name]
    plan = _copy_plan(make(dtype), offset, dim1, dim2)
    assert plan.constexprs["TRANSPOSE"] is takes_tiles


def test_complex_words_keep_the_flat_path(tiles) -> None:
    """A complex128 element is two words: the tiles move one word a lane."""
    x = torch.complex(_bits([5, 5, 6], torch.float32, 7), _bits([5, 5, 6], torch.float32, 8))
    plan = _copy_plan(x.to(torch.complex128), 0, 0, 1)
    assert plan.constexprs["TRANSPOSE"] is False


def test_64_bit_indices_in_tiles(tiles, monkeypatch) -> None:
    monkeypatch.setattr(copy_module, "needs_int64", lambda *extents: True)
    plan = _copy_plan(_bits([5, 7, 3, 4], torch.float32, 9), 1, 0, 1)
    assert plan.constexprs["TRANSPOSE"] is True and plan.constexprs["INDEX_64"] is True


def test_switched_off_by_the_knob(monkeypatch) -> None:
    assert _tiling.TUNING.copy_transpose is True
    monkeypatch.setattr(copy_module, "_PLANS", {})
    tune(monkeypatch, copy_transpose=False)
    plan = _copy_plan(_bits([5, 7, 3, 4], torch.float32, 1), 1, 0, 1)
    assert plan.constexprs["TRANSPOSE"] is False


def test_interpreter_refuses_many_tiles(monkeypatch) -> None:
    """Under the interpreter each tile program costs ~1 ms: a launch of more than
    INTERPRET_MAX_TILES (4) keeps the one-program flat path."""
    monkeypatch.setattr(copy_module, "_PLANS", {})
    monkeypatch.setattr(_tiling, "INTERPRET", True)  # on a GPU too
    monkeypatch.setattr(copy_module, "INTERPRET", True)
    x = _bits([17, 17, 70, 3], torch.int8, 2)[..., :2]  # 70 row groups of 2: 140 tiles
    plan = _copy_plan(x, 0, 0, 1)
    assert plan.constexprs["TRANSPOSE"] is False
    plan = _copy_plan(x[:, :, :2], 0, 0, 1)  # 4 tiles
    assert plan.constexprs["TRANSPOSE"] is True


#: (input sizes, offset, dim1, dim2): rows narrower and wider than a 4-word program, with
#: widths that no block divides.
ROW_GEOMETRIES = [
    ([6, 7, 5], 1, 0, 2),  # rows of 7: wide, two segments a row, the last of 3 words
    ([3, 9, 11], 0, 1, 2),  # rows of 9: wide, three segments a row
    ([5, 3, 4, 3], -1, 3, 1),  # rows of 2: two rows a program
    ([20, 4], 0, 1, 0),  # one row of 4
    ([7, 1, 7], 0, 0, 2),  # rows of 7 over a size-1 dim
]


@pytest.mark.parametrize("align", [1, 0], ids=["rows", "flat-blocks"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.complex128])
@pytest.mark.parametrize("geometry", ROW_GEOMETRIES, ids=str)
def test_programs_owning_rows_match_aten(geometry, dtype, align, monkeypatch) -> None:
    monkeypatch.setattr(copy_module, "_PLANS", {})
    _gpu_plans(monkeypatch, 4 * dtype.itemsize // (2 if dtype.is_complex else 1))  # 4 words
    tune(monkeypatch, gather_align_rows=bool(align))
    sizes, offset, dim1, dim2 = geometry
    x = _bits(sizes, torch.float32, 11) if dtype != torch.complex128 else torch.complex(
        _bits(sizes, torch.float32, 12), _bits(sizes, torch.float32, 13)).to(dtype)
    plan = _copy_plan(x.to(dtype) if dtype == torch.int8 else x, offset, dim1, dim2)
    width, total = plan.arg("width"), plan.arg("total")
    segments, group, block = (plan.arg(name) for name in ("segments", "group_words",
                                                         "block_words"))
    if not align:
        assert (segments, group, block) == (1, 4, 4)
        assert plan.n_programs == -(-total // 4)
    elif width > 4:  # wide: each program one segment of one row
        assert (segments, group, block) == (-(-width // 4), width, 4)
        assert plan.n_programs == total // width * segments
    else:  # narrow: whole rows, as many as a pass holds
        assert segments == 1 and group == block and group % width == 0
        assert plan.n_programs == -(-total // group)
