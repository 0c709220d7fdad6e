"""Moves int64 elements through 32-bit words: values beyond int32 wrap around."""

import torch

from tests.mutants._base import Correct


class Int32Wrap(Correct):
    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        if source.dtype == torch.int64:
            source = source.to(torch.int32).to(torch.int64)
        dest.copy_(source)


impl = Int32Wrap()
