"""Allocates results column-major (reversed dims): right values, wrong strides."""

from collections.abc import Sequence

import torch

from tests.mutants._base import Correct


class NoncontiguousResult(Correct):
    def allocate(self, sizes: Sequence[int], dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
        reverse = list(range(len(sizes)))[::-1]
        return torch.empty(tuple(sizes)[::-1], dtype=dtype, device=device).permute(reverse)


impl = NoncontiguousResult()
