"""An off-by-one mask: the last element of every result is never written."""

import torch

from tests.mutants._base import Correct


class UnwrittenLast(Correct):
    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        if dest.numel() <= 1:
            dest.copy_(source)
            return
        keep = torch.ones(dest.shape, dtype=torch.bool, device=dest.device)
        keep.view(-1)[-1] = False
        dest[keep] = source[keep]


impl = UnwrittenLast()
