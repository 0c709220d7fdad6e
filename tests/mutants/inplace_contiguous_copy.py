"""triu_ and tril_ zero a contiguous copy of a non-contiguous input and never copy it back:
right on every contiguous input, a no-op on a transposed or sliced one."""

import torch

from tests.mutants._base import Correct


class InPlaceContiguousCopy(Correct):
    def written_in_place(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous()


impl = InPlaceContiguousCopy()
