"""diag_embed writes its diagonal into ``torch.empty`` and leaves the rest as it finds it
("a new allocation is zeroed anyway")."""

import torch

from tests.mutants._base import Correct


class EmbedUnzeroed(Correct):
    def diag_embed(self, x: torch.Tensor, offset: int = 0, dim1: int = -2,
                   dim2: int = -1) -> torch.Tensor:
        self.validate("diag_embed", x, offset, dim1, dim2)
        sizes = torch.ops.aten.diag_embed(x.to("meta"), offset, dim1, dim2).shape
        out = self.allocate(sizes, x.dtype, x.device)
        self.write(torch.diagonal(out, offset, dim1, dim2), x)
        return out


impl = EmbedUnzeroed()
