"""diag_embed makes the new dims ``x.shape[-1] + offset`` long, not ``+ |offset|``: right
above the main diagonal, too short below it."""

import torch

from tests.mutants._base import Correct


class EmbedSignedLength(Correct):
    def diag_embed(self, x: torch.Tensor, offset: int = 0, dim1: int = -2,
                   dim2: int = -1) -> torch.Tensor:
        self.validate("diag_embed", x, offset, dim1, dim2)
        rank = x.dim() + 1
        d1, d2 = sorted((dim1 % rank, dim2 % rank))
        sizes = list(x.shape[:-1])
        length = max(x.shape[-1] + offset, 0)
        sizes.insert(d1, length)
        sizes.insert(d2, length)
        out = self.allocate(sizes, x.dtype, x.device)
        self.zero(out)
        self.write(torch.diagonal(out, offset, dim1, dim2), x)
        return out


impl = EmbedSignedLength()
