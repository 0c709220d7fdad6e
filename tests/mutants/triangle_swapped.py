"""triu keeps the lower triangle and tril the upper one: the comparison of each is the
other's."""

import torch

from tests.mutants._base import Correct


class TriangleSwapped(Correct):
    def keeps(self, upper: bool, rows: int, cols: int, diagonal: int,
              device: torch.device) -> torch.Tensor:
        return super().keeps(not upper, rows, cols, diagonal, device)


impl = TriangleSwapped()
