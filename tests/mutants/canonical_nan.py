"""Replaces every NaN by the canonical NaN: payloads and NaN signs are lost."""

import torch

from tests.mutants._base import FLOATS, Correct


class CanonicalNan(Correct):
    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        if source.dtype in FLOATS:
            source = torch.where(source.isnan(), torch.full_like(source, float("nan")), source)
        dest.copy_(source)


impl = CanonicalNan()
