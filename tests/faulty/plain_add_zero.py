"""The plain PyTorch implementation (``examples.plain_torch``) with one planted bug:
``out.add_(0.0)`` on floating results, which turns -0.0 into +0.0 (-0.0 + 0.0 == +0.0)."""

from __future__ import annotations

import sys

import torch

from examples import plain_torch
from examples.plain_torch import diagonal_backward, diagonal_backward_out, diagonal_out

__all__ = ["diagonal", "diagonal_backward", "diagonal_backward_out", "diagonal_out"]
uses_triton_registration = False


def diagonal(x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> torch.Tensor:
    out = plain_torch.diagonal(x, offset, dim1, dim2)
    if out.dtype.is_floating_point and out.dtype.itemsize > 1:
        out.add_(0.0)
    return out


impl = sys.modules[__name__]
