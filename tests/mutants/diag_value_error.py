"""diag refuses an input that is neither 1-D nor 2-D with a ValueError (as FlagGems' diag
does), where aten raises a RuntimeError: a caller's ``except RuntimeError`` misses it."""

import torch

from tests.mutants._base import Correct


class DiagValueError(Correct):
    def diag(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        if isinstance(x, torch.Tensor) and x.dim() not in (1, 2):
            raise ValueError("Input must be a 1D or 2D tensor.")
        return super().diag(x, diagonal)


impl = DiagValueError()
