"""triu_ and tril_ write the right elements into their input but return a copy of it: the
caller's ``y = x.triu_()`` then holds a tensor that later writes to ``x`` never reach."""

import torch

from tests.mutants._base import Correct


class InPlaceReturnsCopy(Correct):
    def returned_in_place(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


impl = InPlaceReturnsCopy()
