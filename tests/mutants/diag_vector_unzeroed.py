"""diag of a vector writes the diagonal of a ``torch.empty`` square and leaves the rest as
it finds it."""

import torch

from tests.mutants._base import Correct


class DiagVectorUnzeroed(Correct):
    def diag(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        self.validate("diag", x, diagonal)
        if x.dim() != 1:
            return super().diag(x, diagonal)
        n = x.shape[0] + abs(diagonal)
        out = self.allocate((n, n), x.dtype, x.device)
        self.write(torch.diagonal(out, diagonal), x)
        return out


impl = DiagVectorUnzeroed()
