"""Computes half-precision results in float32 and forgets to cast back."""

import torch

from tests.mutants._base import Correct


class WrongDtype(Correct):
    def finish(self, result: torch.Tensor) -> torch.Tensor:
        if result.dtype in (torch.float16, torch.bfloat16):
            return result.float()
        return result


impl = WrongDtype()
