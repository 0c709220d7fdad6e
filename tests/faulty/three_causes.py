"""Exactly three causes, as a maintainer counts them, on top of plain PyTorch:

* ``diag_embed`` checks its dims with one ``assert`` (aten raises IndexError or
  RuntimeError there, depending on the invalid class);
* ``diagonal_backward`` raises NotImplementedError for a non-contiguous grad;
* ``diagonal`` turns -0.0 into +0.0 (an ``abs``-style fast path on zeros).

A gate on it must report three findings, whatever dtypes, invalid classes and stages reach
each cause.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

from examples import plain_torch

uses_triton_registration = False


def diagonal(x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> torch.Tensor:
    result = plain_torch.diagonal(x, offset, dim1, dim2)
    if result.dtype.is_floating_point:
        result = torch.where(result == 0, torch.zeros_like(result), result)
    return result


def diagonal_backward(grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int,
                      dim1: int, dim2: int) -> torch.Tensor:
    if not grad_output.is_contiguous():
        raise NotImplementedError("diagonal_backward: grad_output must be contiguous")
    return plain_torch.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


def diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> torch.Tensor:
    rank = x.dim() + 1
    assert -rank <= dim1 < rank and -rank <= dim2 < rank and dim1 % rank != dim2 % rank
    return plain_torch.diag_embed(x, offset, dim1, dim2)


impl = sys.modules[__name__]
