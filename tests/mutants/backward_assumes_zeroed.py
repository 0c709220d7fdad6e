"""diagonal_backward writes the diagonal into torch.empty and assumes the rest is zero.

Fresh pages from malloc often are zero, so this passes by luck without sentinel memory.
"""

import torch

from tests.mutants._base import Correct


class BackwardAssumesZeroed(Correct):
    def zero(self, out: torch.Tensor) -> None:
        """Skipped: "torch.empty is zeroed anyway"."""


impl = BackwardAssumesZeroed()
