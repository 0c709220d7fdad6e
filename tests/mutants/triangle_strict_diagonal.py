"""triu and tril compare strictly: the elements on the ``diagonal``-th diagonal itself
are dropped (an off-by-one of the diagonal)."""

import torch

from tests.mutants._base import Correct


class TriangleStrictDiagonal(Correct):
    def keeps(self, upper: bool, rows: int, cols: int, diagonal: int,
              device: torch.device) -> torch.Tensor:
        row = torch.arange(rows, device=device).view(rows, 1)
        col = torch.arange(cols, device=device).view(1, cols)
        return col - row > diagonal if upper else col - row < diagonal


impl = TriangleStrictDiagonal()
