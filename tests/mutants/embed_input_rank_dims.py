"""diag_embed wraps negative dims with the input's rank, not the result's (one more): the
default dims (-2, -1) of a 2-D input become (0, 1) instead of (1, 2)."""

import torch

from tests.mutants._base import Correct


class EmbedInputRankDims(Correct):
    def diag_embed(self, x: torch.Tensor, offset: int = 0, dim1: int = -2,
                   dim2: int = -1) -> torch.Tensor:
        self.validate("diag_embed", x, offset, dim1, dim2)
        rank = max(x.dim(), 1)
        wrapped = [d + rank if d < 0 else d for d in (dim1, dim2)]
        if wrapped[0] != wrapped[1] and all(0 <= d <= x.dim() for d in wrapped):
            dim1, dim2 = wrapped
        return super().diag_embed(x, offset, dim1, dim2)


impl = EmbedInputRankDims()
