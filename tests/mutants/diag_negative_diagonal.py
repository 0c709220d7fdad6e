"""diag takes the diagonal as ``abs(diagonal)``: a negative diagonal (below the main one)
is read, or written, above it. Both directions: a matrix's and a vector's."""

import torch

from tests.mutants._base import Correct


class DiagNegativeDiagonal(Correct):
    def diag(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        if isinstance(diagonal, int) and not isinstance(diagonal, bool):
            diagonal = abs(diagonal)
        return super().diag(x, diagonal)


impl = DiagNegativeDiagonal()
