"""diagonal zeroes the diagonal of its input after copying it out (a move, not a copy)."""

import contextlib

import torch

from tests.mutants._base import Correct


class MutatesInput(Correct):
    def diagonal(self, x: torch.Tensor, offset: int = 0, dim1: int = 0,
                 dim2: int = 1) -> torch.Tensor:
        out = super().diagonal(x, offset, dim1, dim2)
        view = torch.diagonal(x, offset, dim1, dim2)
        # An expanded input cannot be written in place; such a Case escapes.
        with contextlib.suppress(RuntimeError):
            view.zero_()
        return out


impl = MutatesInput()
