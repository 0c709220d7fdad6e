"""diagonal with a bug behind three input properties at once (a covering-array test).

Wrong values (one result bit flipped) only when all three hold: the other diagonal dim
equals |offset| (the factor model's ``sizes=offset_equal``), the input is permuted
(dense, ``layout_input=transposed``) and the dtype is two bytes wide (``dtype=reduced``). Each is
common alone; independent draws rarely make all three at once (a size equal to the
offset above all), so only Cases built to hold every 3-way combination reach it.
Everything else is aten (registration off).
"""

from __future__ import annotations

import torch

from diagfuzz.core.geometry import wrap_dim
from diagfuzz.impl import aten
from tests.faulty._base import Faulty, flip_first_bit


def permuted(x: torch.Tensor) -> bool:
    """Whether ``x`` is dense (no gaps, no stride 0) but not laid out outermost first: a
    transposed or otherwise permuted tensor, the layout a fast path keys on."""
    dims = sorted((d for d in range(x.dim()) if x.shape[d] > 1), key=lambda d: -x.stride(d))
    expected = 1
    for d in reversed(dims):  # innermost first: each stride the product of those inside
        if x.stride(d) != expected:
            return False
        expected *= x.shape[d]
    return dims != sorted(dims)


def triggered(x: torch.Tensor, offset: int, dim1: int, dim2: int) -> bool:
    d1, d2 = wrap_dim(dim1, x.dim()), wrap_dim(dim2, x.dim())
    other = x.shape[d1] if offset > 0 else x.shape[d2]
    return (offset != 0 and other == abs(offset) and permuted(x)
            and x.dtype in (torch.float16, torch.bfloat16))


class ThreeWay(Faulty):
    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        result = aten.diagonal(x, offset, dim1, dim2)
        return flip_first_bit(result) if triggered(x, offset, dim1, dim2) else result


impl = ThreeWay()
