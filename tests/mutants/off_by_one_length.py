"""Diagonal length as min(n1, n2) - |offset|: right for square slices, short otherwise."""

import torch

from tests.mutants._base import Correct


class OffByOneLength(Correct):
    def view(self, t: torch.Tensor, offset: int, dim1: int, dim2: int) -> torch.Tensor:
        view = torch.diagonal(t, offset, dim1, dim2)
        n1, n2 = t.shape[dim1], t.shape[dim2]
        length = max(min(n1, n2) - abs(offset), 0)
        return view[..., :length]

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        out = self.allocate(input_sizes, grad_output.dtype, grad_output.device)
        out.zero_()
        diag = self.view(out, offset, dim1, dim2)
        full = torch.diagonal(out, offset, dim1, dim2)
        diag.copy_(grad_output.expand(full.shape)[..., :diag.shape[-1]])
        return out


impl = OffByOneLength()
