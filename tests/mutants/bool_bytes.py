"""Writes True as the byte 0xFF (a uint8 kernel doing ``-x`` or ``x * 255``), not 0x01."""

import torch

from tests.mutants._base import Correct


class BoolBytes(Correct):
    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        dest.copy_(source)
        if dest.dtype == torch.bool:
            raw = dest.view(torch.uint8)
            raw.copy_(torch.where(raw != 0, 255, 0).to(torch.uint8))


impl = BoolBytes()
