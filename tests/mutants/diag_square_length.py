"""diag of a matrix takes its diagonal's length as ``min(rows, cols) - |diagonal|``: right
for a square matrix, short for many others."""

import torch

from tests.mutants._base import Correct


class DiagSquareLength(Correct):
    def diag(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        self.validate("diag", x, diagonal)
        if x.dim() == 1:
            return super().diag(x, diagonal)
        length = max(min(x.shape) - abs(diagonal), 0)
        out = self.allocate((length,), x.dtype, x.device)
        self.write(out, torch.diagonal(x, diagonal)[:length])
        return out


impl = DiagSquareLength()
