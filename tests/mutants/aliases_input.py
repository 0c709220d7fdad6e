"""diagonal returns aten's view instead of a copy: the result aliases the input."""

import torch

from tests.mutants._base import Correct


class AliasesInput(Correct):
    def diagonal(self, x: torch.Tensor, offset: int = 0, dim1: int = 0,
                 dim2: int = 1) -> torch.Tensor:
        return torch.diagonal(x, offset, dim1, dim2)


impl = AliasesInput()
