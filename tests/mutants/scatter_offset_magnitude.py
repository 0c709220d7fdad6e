"""diagonal_scatter writes src on the diagonal at ``|offset|``: above the main diagonal
where aten writes below it."""

import torch

from tests.mutants._base import Correct


class ScatterOffsetMagnitude(Correct):
    def diagonal_scatter(self, x: torch.Tensor, src: torch.Tensor, offset: int = 0,
                         dim1: int = 0, dim2: int = 1) -> torch.Tensor:
        self.validate("diagonal_scatter", x, src, offset, dim1, dim2)
        out = self.clone_input(x)
        self.write(torch.diagonal(out, abs(offset), dim1, dim2), src)
        return out


impl = ScatterOffsetMagnitude()
