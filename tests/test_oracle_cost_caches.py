"""The oracle's cost-cutting caches never change what it sees: word views, index grids."""

from __future__ import annotations

import itertools

import pytest
import torch

from diagfuzz.core import bits
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.specs import common, index_reference


def test_word_view_memo_follows_the_tensor_not_its_id() -> None:
    t = torch.tensor([1.0, -0.0, float("nan")])
    first = bits._words(t)
    assert bits._words(t) is first  # reused while nothing about t changed
    t.set_(torch.tensor([2.0, 3.0]))  # same object, another storage and shape
    again = bits._words(t)
    assert again is not first and torch.equal(again, torch.tensor([2.0, 3.0]).view(torch.int32))
    t[0] = 5.0  # content changes show through the (view) memo
    assert bits._words(t)[0].item() == torch.tensor(5.0).view(torch.int32).item()


def test_word_view_memo_never_reuses_a_copy() -> None:
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    strided = base.t()  # non-contiguous: its words are a fresh copy each time
    before = bits._words(strided).clone()
    base[0, 0] = 100.0
    assert not torch.equal(bits._words(strided), before)


@pytest.mark.parametrize("shape,steps,start", [((3, 4), (5, 0), 7), ((0, 3), (1, 2), 0),
                                               ((2,), (0,), 3), ((2, 3, 2), (7, 1, 3), 1)])
def test_grid_is_the_index_arithmetic(shape: tuple[int, ...], steps: tuple[int, ...],
                                      start: int) -> None:
    grid = index_reference._grid(shape, steps, start, torch.device("cpu"))
    want = [start + sum(i * s for i, s in zip(idx, steps, strict=True))
            for idx in itertools.product(*map(range, shape))]
    assert grid.shape == shape and grid.reshape(-1).tolist() == want


@pytest.mark.parametrize("dtype", [torch.complex128, torch.bool, torch.float16, torch.int64])
def test_index_reference_matches_aten_through_warm_caches(dtype: torch.dtype) -> None:
    case = Case(op="diagonal_backward", sizes=(3, 4, 5), dtype=str(dtype).split(".")[-1],
                offset=-1, dim1=2, dim2=0,
                layout=Layout(shape=(4, 1), strides=(1, 0), storage_offset=1),
                values=Values(seed=1))
    storage = (torch.arange(8) * 37 % 11).to(dtype)
    for round_ in range(2):  # cold, then every grid from the cache
        grad = storage[:4].as_strided((4, 1), (1, 0), 1) + (round_ if dtype != torch.bool
                                                             else 0)
        want = torch.ops.aten.diagonal_backward(grad, [3, 4, 5], -1, 2, 0)
        got = index_reference.diagonal_backward(grad, case)
        assert torch.equal(bits._words(got), bits._words(want))
        assert common.off_diagonal_zero(case, got) is None
        x = want.transpose(0, 1)
        view = torch.diagonal(x, case.offset, 1, 2)
        fwd = Case(op="diagonal", sizes=tuple(x.shape), dtype=case.dtype, offset=-1, dim1=1,
                   dim2=2, layout=case.layout, values=case.values)
        assert torch.equal(bits._words(index_reference.diagonal(x, fwd)),
                           bits._words(view.contiguous()))
