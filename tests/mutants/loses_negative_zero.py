"""Canonicalises -0.0 to +0.0 (a compare-with-zero fast path), losing the sign of zero."""

import torch

from tests.mutants._base import FLOATS, Correct


class LosesNegativeZero(Correct):
    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        if source.dtype in FLOATS:
            source = torch.where(source == 0, torch.zeros_like(source), source)
        dest.copy_(source)


impl = LosesNegativeZero()
