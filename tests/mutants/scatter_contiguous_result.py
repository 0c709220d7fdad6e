"""diagonal_scatter returns a contiguous copy of its input, not aten's
``clone_preserve_strides``: the right values, the wrong strides for a strided input."""

import torch

from tests.mutants._base import Correct


class ScatterContiguousResult(Correct):
    def clone_input(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone(memory_format=torch.contiguous_format)


impl = ScatterContiguousResult()
