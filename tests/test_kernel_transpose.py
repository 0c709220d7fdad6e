"""diagonal_backward's transposed runs (``TRANSPOSE_RUNS``), bitwise against aten.

The launch applies where grad_output keeps a run's words farther apart than its diagonal
positions (``16x16x256x256 d=(0,1)``: grad_output is ``256x256x16``): zero-fill programs
store every block off the runs, and tile programs move ``[I_BLOCK, C_BLOCK]`` tiles of the
runs. Here it runs under the interpreter's plans and under GPU-like plans shrunk to a few
words (several tiles along both axes, masked edges, blocks on and off runs), for a contiguous
grad_output and for one read with a stride of 2 along its diagonal dim. On a GPU this file
runs the compiled kernels with those plans.
"""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling
from tests.bitwise import bitwise_difference
from tests.tuning import tune

backward_module = importlib.import_module("diagfuzz.ops.diagonal_backward")

#: (input sizes, offset, dim1, dim2): grad_output contiguous puts the diagonal dim innermost,
#: so every run (the dims after the second diagonal dim) is strided across it.
GEOMETRIES = [
    ([5, 7, 3, 4], 1, 0, 1),  # runs of 12 words, rows of 84, a diagonal of 5
    ([6, 6, 8], -2, 1, 0),  # dims given in reverse, a negative offset
    ([2, 5, 6, 4], 0, 1, 2),  # a batch dim outside the diagonal dims
    ([5, 2, 6, 4], 2, 0, 2),  # a batch dim between them (inside the first)
    ([3, 4, 2, 16], 0, 0, 1),  # a diagonal shorter than a tile, long runs
]


@pytest.fixture(params=["interpreter-plans", "gpu-plans"])
def transposed(request, monkeypatch):
    tune(monkeypatch, transpose_runs=True)
    if request.param == "interpreter-plans":  # on a GPU too: valid Triton, other blocks
        monkeypatch.setattr(_tiling, "INTERPRET", True)
        monkeypatch.setattr(backward_module, "INTERPRET", True)
    if request.param == "gpu-plans":
        monkeypatch.setattr(_tiling, "INTERPRET", False)
        monkeypatch.setattr(backward_module, "INTERPRET", False)
        # these tiny outputs are "large"
        tune(monkeypatch, small_output_bytes=0, transpose_i_block=2, transpose_c_block=2)
    monkeypatch.setattr(backward_module, "_PLANS", {})
    return request.param


def _grad(shape: torch.Size, dtype: torch.dtype, seed: int,
          diagonal_step: int = 1) -> torch.Tensor:
    """Random bits of ``shape``; with ``diagonal_step`` > 1 a view read with that stride
    along the last (diagonal) dim."""
    gen = torch.Generator().manual_seed(seed)
    wide = (*shape[:-1], shape[-1] * diagonal_step)
    bits = torch.randint(-2**31, 2**31 - 1, wide, generator=gen, dtype=torch.int64)
    t = bits.to(torch.int32).view(torch.float32) if dtype == torch.float32 else bits.to(dtype)
    return t.to(ops.DEVICE)[..., ::diagonal_step]


def _plan(grad: torch.Tensor, sizes: list[int], offset: int, dim1: int, dim2: int):
    backward_module._PLANS.clear()
    with ops.use_triton(False):
        expected = torch.ops.aten.diagonal_backward(grad, sizes, offset, dim1, dim2)
    actual = ops.diagonal_backward(grad, sizes, offset, dim1, dim2)
    assert bitwise_difference(actual, expected) == ""
    out = torch.full(sizes, 0, dtype=grad.dtype, device=ops.DEVICE)
    out.view(torch.uint8).fill_(0x5A)  # a word left unwritten shows
    ops.diagonal_backward_out(grad, sizes, offset, dim1, dim2, out=out)
    assert bitwise_difference(out, expected) == ""
    ((_, plan),) = backward_module._PLANS.values()
    return plan


@pytest.mark.parametrize("diagonal_step", [1, 2], ids=["contiguous", "diagonal-stride-2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.int64])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_transposed_runs_match_aten(transposed, geometry, dtype, diagonal_step,
                                    monkeypatch) -> None:
    sizes, offset, dim1, dim2 = geometry
    if transposed == "gpu-plans":  # blocks of 4 words: they divide every run and row here
        tune(monkeypatch, fill_block_bytes=4 * dtype.itemsize)
    shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
    grad = _grad(shape, dtype, sum(sizes), diagonal_step)
    plan = _plan(grad, sizes, offset, dim1, dim2)
    assert plan.constexprs["TRANSPOSE"] is True
    n_fill = plan.arg("n_fill")
    assert plan.n_programs > n_fill > 0  # tile programs follow the fill programs
    if transposed == "gpu-plans":  # several tiles both ways, a block smaller than a run
        assert plan.arg("n_iblocks") > 1 and plan.arg("n_cblocks") > 1
        assert plan.constexprs["BLOCK"] <= plan.arg("run_len")


def test_runs_contiguous_in_grad_output_or_complex_words_keep_the_flat_blocks(
        transposed) -> None:
    """A run grad_output holds contiguously gains nothing from tiles; a complex128 element is
    two words, so its diagonal dim is not word-contiguous: both keep the one path that the
    fuzz suite exercises on every run."""
    sizes, offset, dim1, dim2 = [5, 7, 3, 4], 1, 0, 1
    shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
    grad = _grad(shape, torch.float32, 3)
    diagonal_outer = grad.movedim(-1, 0).contiguous().movedim(0, -1)  # runs contiguous
    assert _plan(diagonal_outer, sizes, offset, dim1, dim2).constexprs["TRANSPOSE"] is False
    complex_grad = torch.complex(grad, grad.flip(-1)).to(torch.complex128)
    assert _plan(complex_grad, sizes, offset, dim1, dim2).constexprs["TRANSPOSE"] is False


def test_on_by_default_and_switched_off_by_the_knob(monkeypatch) -> None:
    assert _tiling.TUNING.transpose_runs is True
    monkeypatch.setattr(backward_module, "_PLANS", {})
    tune(monkeypatch, transpose_runs=False)
    sizes = [5, 7, 3, 4]
    shape = torch.empty(sizes, device="meta").diagonal(1, 0, 1).shape
    assert _plan(_grad(shape, torch.float32, 1), sizes, 1, 0, 1).constexprs["TRANSPOSE"] is False


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_fill_programs_leave_the_runs_to_the_tile_programs(transposed, geometry,
                                                           monkeypatch) -> None:
    """On a GPU the two kinds of program run concurrently, so a zero-fill program must never
    store into a run (the interpreter runs programs in order, and a later tile would hide
    it): launched alone, the fill programs write every element off the diagonal and none
    on it."""
    sizes, offset, dim1, dim2 = geometry
    if transposed == "gpu-plans":
        tune(monkeypatch, fill_block_bytes=16)
    shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
    grad = _grad(shape, torch.float32, 5)
    plan = _plan(grad, sizes, offset, dim1, dim2)
    n_fill = plan.arg("n_fill")
    out = torch.empty(sizes, dtype=torch.float32, device=ops.DEVICE)
    out.view(torch.uint8).fill_(0x5A)
    backward_module._launch(dataclasses.replace(plan, n_programs=n_fill), (out, grad))
    on_diagonal = torch.zeros(sizes, dtype=torch.bool, device=ops.DEVICE)
    on_diagonal.diagonal(offset, dim1, dim2).fill_(True)
    words = out.view(torch.int32)
    assert bool((words[on_diagonal] == 0x5A5A5A5A).all())  # untouched: the tiles' to write
    assert bool((words[~on_diagonal] == 0).all())


def _values(n: int, dtype: torch.dtype) -> torch.Tensor:
    """n distinct nonzero values (bool: a pattern with both values) on the kernels' device."""
    v = torch.arange(1, n + 1)
    return (v % 3 == 0 if dtype == torch.bool else v.to(dtype)).to(ops.DEVICE)


#: name -> (grad_output maker, input sizes, offset, dim1, dim2, takes the transposed path)
GRAD_OUTPUTS = {
    "expanded along the diagonal (stride 0)":
        (lambda d: _values(4, d).reshape(4, 1).expand(4, 5), [5, 5, 4], 0, 0, 1, True),
    "broadcast from (4, 1)": (lambda d: _values(4, d).reshape(4, 1), [5, 5, 4], 0, 0, 1, True),
    "storage offset": (lambda d: _values(27, d)[7:].reshape(4, 5), [5, 5, 4], 0, 0, 1, True),
    "permuted batch dims": (lambda d: _values(60, d).reshape(4, 3, 5).permute(1, 0, 2),
                            [3, 5, 5, 4], 0, 1, 2, True),
    "a diagonal of one: the flat blocks": (lambda d: _values(4, d).reshape(4, 1),
                                           [1, 5, 4], 0, 0, 1, False),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
@pytest.mark.parametrize("name", GRAD_OUTPUTS)
def test_grad_output_views_and_broadcasts(transposed, name, dtype, monkeypatch) -> None:
    make, sizes, offset, dim1, dim2, takes_it = GRAD_OUTPUTS[name]
    if transposed == "gpu-plans":  # blocks of 4 words: they divide the runs of 4 here
        tune(monkeypatch, fill_block_bytes=4 * dtype.itemsize)
    plan = _plan(make(dtype), sizes, offset, dim1, dim2)
    assert plan.constexprs["TRANSPOSE"] is takes_it


def test_64_bit_indices_in_tiles(transposed, monkeypatch) -> None:
    """The INDEX_64 variant of the tiles (taken where a tile's masked lanes reach past
    int32, e.g. 723x723x4096 float32 on a GPU), forced on a small Case."""
    monkeypatch.setattr(backward_module, "needs_int64", lambda *extents: True)
    if transposed == "gpu-plans":
        tune(monkeypatch, fill_block_bytes=16)
    sizes, offset, dim1, dim2 = GEOMETRIES[0]
    shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
    plan = _plan(_grad(shape, torch.float32, 9), sizes, offset, dim1, dim2)
    assert plan.constexprs["TRANSPOSE"] is True and plan.constexprs["INDEX_64"] is True


def test_interpreter_refuses_one_word_blocks(monkeypatch) -> None:
    """An odd run makes 1-word fill blocks: under the interpreter one program each (a
    (4,4,1023) Case took 25 s), so such launches keep the flat blocks there."""
    monkeypatch.setattr(_tiling, "INTERPRET", True)
    monkeypatch.setattr(backward_module, "INTERPRET", True)
    monkeypatch.setattr(backward_module, "_PLANS", {})
    sizes = [4, 4, 1023]
    shape = torch.empty(sizes, device="meta").diagonal(0, 0, 1).shape
    plan = _plan(_grad(shape, torch.float32, 2), sizes, 0, 0, 1)
    assert plan.constexprs["TRANSPOSE"] is False
    assert backward_module._transpose_block(4 * 4 * 1023, 4 * 1023, 1023, 4, 4) == 0
    assert backward_module._transpose_block(4 * 4 * 1024, 4 * 1024, 1024, 4, 4) == 1024
