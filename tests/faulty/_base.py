"""aten's diagonal ops with a hook that may replace the result: the shape of every fault."""

from __future__ import annotations

import torch

from diagfuzz.core.words import as_words
from diagfuzz.impl import aten


def flip_first_bit(result: torch.Tensor) -> torch.Tensor:
    """``result`` with the lowest bit of its first element flipped (a bitwise mismatch)."""
    if result.numel() == 0:
        return result
    out = result.clone(memory_format=torch.contiguous_format)
    as_words(out).reshape(-1)[0] ^= 1
    return out


class Faulty:
    """Delegates to aten; ``fault(result, offset)`` may misbehave or replace the result."""

    uses_triton_registration = False

    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        raise NotImplementedError

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        return self.fault(aten.diagonal(x, offset, dim1, dim2), offset)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        return self.fault(aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2),
                          offset)
