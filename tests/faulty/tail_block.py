"""diagonal_backward that never writes the last partial block of a diagonal past element 128.

The planted bug is the classic wrong tail of a Triton kernel: it tiles each diagonal in
blocks of BLOCK elements and launches ``length // BLOCK`` blocks (floor, where ``cdiv`` is
right) once the diagonal is longer than one block; a diagonal of at most BLOCK elements
is one masked block and comes out right. So a diagonal whose length exceeds 128 and is no
multiple of it keeps zeros on its last ``length % 128`` elements. Everything else is aten
(registration off). A diagonal_backward Case within 4,096 elements has a diagonal of at
most 64 elements: only boundary Cases (``diagfuzz.strategies._boundary``) reach the bug.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from diagfuzz.impl import aten
from tests.faulty._base import Faulty

BLOCK = 128


def launched(length: int) -> int:
    """Diagonal elements the faulty kernel writes: whole blocks only, past the first."""
    if length <= BLOCK:
        return length
    return length // BLOCK * BLOCK  # the bug: floor division drops the partial block


class TailBlock(Faulty):
    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        return result  # diagonal (diagonal_copy) is right

    def diagonal_backward(self, grad_output: torch.Tensor, input_sizes: Sequence[int],
                          offset: int, dim1: int, dim2: int) -> torch.Tensor:
        result = aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)
        diagonal = torch.diagonal(result, offset, dim1, dim2)
        written = launched(diagonal.shape[-1])
        diagonal[..., written:].zero_()  # never stored: still the zero fill's bits
        return result


impl = TailBlock()
