"""diag_embed fills its zeros as -0.0 (a negated zero, ``fill_(-0.0)``): the right numbers
off the diagonal, the wrong bits (the sign bit set)."""

import torch

from tests.mutants._base import Correct


class EmbedNegativeZeroFill(Correct):
    def diag_embed(self, x: torch.Tensor, offset: int = 0, dim1: int = -2,
                   dim2: int = -1) -> torch.Tensor:
        self.validate("diag_embed", x, offset, dim1, dim2)
        sizes = torch.ops.aten.diag_embed(x.to("meta"), offset, dim1, dim2).shape
        out = self.allocate(sizes, x.dtype, x.device)
        if out.dtype.is_floating_point or out.dtype.is_complex:
            out.fill_(-0.0)
        else:
            out.zero_()
        self.write(torch.diagonal(out, offset, dim1, dim2), x)
        return out


impl = EmbedNegativeZeroFill()
